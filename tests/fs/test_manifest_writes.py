"""Issue 15, part 3: the control file refuses a bad line at the write() that carries it, so a
shell redirection reports the error itself; CRLF line ends and a leading BOM are accepted.

Shell commands get every user-supplied value as an argument ("$1"), never inside the script.
"""
import errno
import os
import subprocess

from harness import ClairfsCase
import treeutil as tu

SIZES = {"a.bin": 1000, "b.bin": 2000, "dir/c.bin": 3000}
CAT_INTO = 'cat -- "$1" > "$2"'
CAT_ONTO = 'cat -- "$1" >> "$2"'
# bash's own printf: bash closes the redirection itself and ignores what close() returns, so
# only a refused write() can make it fail. The text is passed as "$1", never in the script.
PRINTF_INTO = 'printf "%s" "$1" > "$2"'
PRINTF_ONTO = 'printf "%s" "$1" >> "$2"'


def summary(plan):
    return {k: plan.get(k) for k in ("epochs", "entries", "files")}


class ManifestWriteCase(ClairfsCase):
    @classmethod
    def setUpClass(cls):
        cls.base = cls.class_tmpdir("mw")
        cls.ds = os.path.join(cls.base, "ds")
        for rel, size in SIZES.items():
            os.makedirs(os.path.dirname(os.path.join(cls.ds, rel)), exist_ok=True)
            tu.write_file(os.path.join(cls.ds, rel), bytes([len(rel)]) * size)

    def setUp(self):
        super().setUp()
        self.work = self.tmpdir("mw")
        self.mnt = os.path.join(self.work, "m")
        os.mkdir(self.mnt)
        self.mount(self.ds, self.mnt)
        self.manifest = os.path.join(self.mnt, ".clairfs", "manifest")

    def list_file(self, name, data):
        path = os.path.join(self.work, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def shell(self, script, *args):
        """bash -c script with args as $1, $2...: the completed process (stderr as text)."""
        return subprocess.run(["bash", "-c", script, "bash", *args], capture_output=True,
                              text=True, timeout=60)

    def install(self, text):
        self.write_manifest(self.mnt, text)
        self.assertEqual(self.control_read(self.mnt, "errors"), "")
        return self.plan(self.mnt)


class WriteRefusalTest(ManifestWriteCase):
    def test_cat_into_manifest_fails_at_the_write(self):
        before = self.install("a.bin\nb.bin\n#epoch\nb.bin\n")
        self.assertEqual(summary(before), {"epochs": 2, "entries": 3, "files": 2}, before)
        cases = [
            ("empty line", b"a.bin\n\nb.bin\n", "line 2: empty path"),
            ("bad range", b"a.bin\nb.bin\t01+5\n", "line 2: malformed range"),
            ("#begin late", b"a.bin\n#begin\nb.bin\n", "line 2: '#begin' is allowed only"),
            ("NUL", b"a.bin\nb.\0bin\n", "line 2: path contains a NUL byte"),
            ("overlong", b"a.bin\n" + b"x" * 5000 + b"\n", "line 2: line is longer"),
        ]
        for name, data, reason in cases:
            with self.subTest(case=name):
                r = self.shell(CAT_INTO, self.list_file("bad", data), self.manifest)
                self.assertNotEqual(r.returncode, 0, f"{name}: cat reported success")
                self.assertIn("Invalid argument", r.stderr, name)
                report = self.control_read(self.mnt, "errors")
                self.assertIn(reason, report, name)
                self.assertIn("refused at write()", report, name)
                self.assertEqual(self.plan(self.mnt), before, f"{name}: the plan changed")

    def test_a_shell_builtin_reports_a_bad_line(self):
        before = self.install("a.bin\n")
        for script in (PRINTF_INTO, PRINTF_ONTO):
            with self.subTest(script=script):
                r = self.shell(script, "b.bin\nb.bin\t0+0\n", self.manifest)
                self.assertEqual(r.returncode, 1, f"{script}: {r.stderr!r}")
                self.assertIn("write error: Invalid argument", r.stderr)
                self.assertIn("line 2: empty range", self.control_read(self.mnt, "errors"))
                self.assertEqual(self.plan(self.mnt), before)
        # A good text through the same builtin, CRLF included.
        r = self.shell(PRINTF_INTO, "b.bin\r\ndir/c.bin\r\n", self.manifest)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(summary(self.plan(self.mnt)), {"epochs": 1, "entries": 2, "files": 2})

    def test_a_bad_line_deep_in_a_long_list_stops_cat_there(self):
        before = self.install("a.bin\n")
        # About 1 MB: cat writes it in many write() calls; the one carrying line 20001 fails.
        good = b"dir/c.bin\n" * 20000
        path = self.list_file("long", good + b"b.bin\t5\n" + good)
        r = self.shell(CAT_INTO, path, self.manifest)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Invalid argument", r.stderr)
        report = self.control_read(self.mnt, "errors")
        self.assertIn("manifest rejected: 1 error\nline 20001: malformed range", report)
        self.assertIn("refused at write()", report)
        self.assertEqual(self.plan(self.mnt), before)

    def test_append_with_a_bad_line_fails_at_the_write(self):
        before = self.install("a.bin\n#epoch\nb.bin\n")
        r = self.shell(CAT_ONTO, self.list_file("bad", b"#epoch\na.bin\n#epoch\n#epoch\n"),
                       self.manifest)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Invalid argument", r.stderr)
        report = self.control_read(self.mnt, "errors")
        self.assertIn("line 4: epoch 2 is empty", report)
        self.assertIn("refused at write()", report)
        self.assertEqual(self.plan(self.mnt), before)
        # A good append still works after it.
        r = self.shell(CAT_ONTO, self.list_file("good", b"#epoch\ndir/c.bin\n"), self.manifest)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(summary(self.plan(self.mnt)), {"epochs": 3, "entries": 3, "files": 3})

    def test_later_writes_and_close_fail_too(self):
        before = self.install("a.bin\n")
        results = []
        fd = os.open(self.manifest, os.O_WRONLY | os.O_TRUNC)
        try:
            for data in (b"b.bin\n", b"\n", b"dir/c.bin\n"):
                try:
                    results.append(os.write(fd, data))
                except OSError as e:
                    results.append(e.errno)
        finally:
            try:
                os.close(fd)
                results.append("closed")
            except OSError as e:
                results.append(e.errno)
        self.assertEqual(results, [6, errno.EINVAL, errno.EINVAL, errno.EINVAL])
        self.assertIn("line 2: empty path", self.control_read(self.mnt, "errors"))
        self.assertEqual(self.plan(self.mnt), before)

    def test_a_missing_file_fails_the_write_that_completes_its_line(self):
        """Issue 25 item 7: a shell builtin's redirection naming a missing file fails in the
        shell; a last line not ended (its path not known complete) is left to close()."""
        before = self.install("a.bin\n")
        for script in (PRINTF_INTO, CAT_INTO):
            text = "a.bin\nnope.bin\n"
            arg = text if script == PRINTF_INTO else self.list_file("missing", text.encode())
            r = self.shell(script, arg, self.manifest)
            self.assertNotEqual(r.returncode, 0, script)
            self.assertIn("Invalid argument", r.stderr)
            report = self.control_read(self.mnt, "errors")
            self.assertIn("line 2: 'nope.bin'", report)
            self.assertIn("refused at write()", report)
            self.assertEqual(self.plan(self.mnt), before)
        r = self.shell(CAT_INTO, self.list_file("cut", b"a.bin\nnope.bin"), self.manifest)
        self.assertNotEqual(r.returncode, 0)  # cat checks its close()
        self.assertIn("line 2: 'nope.bin'", self.control_read(self.mnt, "errors"))
        self.assertEqual(self.plan(self.mnt), before)

    def test_a_missing_file_deep_in_a_long_list_stops_cat_there(self):
        before = self.install("a.bin\n")
        good = b"dir/c.bin\n" * 50000  # many write() calls, each checks its own lines
        r = self.shell(CAT_INTO, self.list_file("long", good + b"dir/nope.bin\n" + good),
                       self.manifest)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Invalid argument", r.stderr)
        report = self.control_read(self.mnt, "errors")
        self.assertIn("manifest rejected: 1 error\nline 50001: 'dir/nope.bin'", report)
        self.assertIn("refused at write()", report)
        self.assertEqual(self.plan(self.mnt), before)

    def test_control_bytes_in_a_refused_line_are_escaped(self):
        self.install("a.bin\n")
        r = self.shell(CAT_INTO, self.list_file("bad", b"#stream a\rb\r\n"), self.manifest)
        self.assertNotEqual(r.returncode, 0)
        report = self.control_read(self.mnt, "errors")
        self.assertIn("stream name 'a\\x0db'", report)
        self.assertNotIn("\r", report)


class LineEndsTest(ManifestWriteCase):
    def test_crlf_and_a_bom_are_accepted(self):
        data = (b"\xef\xbb\xbf#begin\r\n#stream win\r\na.bin\r\n#epoch\r\nb.bin\t0+10\r\n"
                b"dir/c.bin\r\n#end 3\r\n")
        r = self.shell(CAT_INTO, self.list_file("win", data), self.manifest)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.control_read(self.mnt, "errors"), "")
        plan = self.plan(self.mnt)
        self.assertEqual([(s["name"], s["epochs"], s["entries"], s["range_entries"])
                          for s in plan["streams"]], [("win", 2, 3, 1)], plan)
        self.assertEqual(plan["files"], 3, plan)

    def test_a_good_manifest_in_many_small_writes(self):
        lines = [b"#begin"]
        for e in range(3):
            lines.append(b"#epoch %d" % e)
            lines += [b"a.bin", b"b.bin\t1+7", b"./dir/c.bin", b"dir//c.bin"] * 25
        lines.append(b"#end 300")
        data = b"\r\n".join(lines) + b"\r\n"
        fd = os.open(self.manifest, os.O_WRONLY | os.O_TRUNC)
        try:
            at, size = 0, 1
            while at < len(data):  # 1 to 7 bytes a write: lines, CRLFs and TABs split anyhow
                at += os.write(fd, data[at:at + size])
                size = size % 7 + 1
        finally:
            os.close(fd)
        self.assertEqual(self.control_read(self.mnt, "errors"), "")
        self.assertEqual(summary(self.plan(self.mnt)), {"epochs": 3, "entries": 300, "files": 3})
