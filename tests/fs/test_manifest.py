"""Tests 4, 5, 6: manifest acceptance, the plan, hostile manifests, concurrent writers."""
import errno
import os
import signal
import subprocess
import sys
import time
import random
import re
import threading

from harness import ClairfsCase
import treeutil as tu

SIZES = {"a.bin": 1000, "b.bin": 2000, "dir/c.bin": 3000, "#hash.bin": 4000, "d.bin": 5000}
MANY = 1500


def many_name(i):
    return f"many/f{i:04d}"


def many_size(i):
    return 10 + i


def summary(plan):
    return {k: plan.get(k) for k in ("epochs", "entries", "files", "bytes")}


class ManifestCase(ClairfsCase):
    @classmethod
    def setUpClass(cls):
        cls.base = cls.class_tmpdir("man")
        cls.ds = os.path.join(cls.base, "ds")
        for rel, size in SIZES.items():
            os.makedirs(os.path.dirname(os.path.join(cls.ds, rel)), exist_ok=True)
            tu.write_file(os.path.join(cls.ds, rel), bytes([len(rel)]) * size)
        os.makedirs(os.path.join(cls.ds, "sub"))
        tu.write_file(os.path.join(cls.ds, "sub", "x.bin"), b"x" * 10)
        os.mkfifo(os.path.join(cls.ds, "fifo"))
        tu.write_file(os.path.join(cls.base, "outside"), b"outside\n")
        os.symlink("../outside", os.path.join(cls.ds, "out_link"))
        os.makedirs(os.path.join(cls.ds, "many"))
        for i in range(MANY):
            tu.write_file(os.path.join(cls.ds, many_name(i)), b"m" * many_size(i))

    def setUp(self):
        super().setUp()
        self.mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(self.mnt)
        self.mount(self.ds, self.mnt)
        self.manifest = os.path.join(self.mnt, ".clairfs", "manifest")


class ManifestAcceptTest(ManifestCase):
    """Test 4: a valid manifest, an appended epoch, a replacing write, an empty write."""

    def test_manifest_accept_append_replace(self):
        text = (f"# comment: the order for node 0\n"
                f"#epoch\n"
                f"a.bin\n"
                f"b.bin\n"
                f"./#hash.bin\n"
                f"{self.mnt}/dir/c.bin\n"
                f"#epoch\n"
                f"b.bin\n"
                f"a.bin\n"
                f"dir/c.bin\n"
                f"d.bin\n")
        with open(self.manifest, "w") as f:
            f.write(text)
        plan = self.plan(self.mnt)
        total = sum(SIZES.values())
        self.assertEqual(summary(plan), {"epochs": 2, "entries": 8, "files": 5, "bytes": total},
                         plan)
        self.assertEqual(self.stats(self.mnt)["prefetch"]["planned_files"], 5)

        with open(self.manifest, "a") as f:
            f.write(f"#epoch\nd.bin\n{self.ds}/a.bin\n")
        plan = self.plan(self.mnt)
        self.assertEqual(summary(plan), {"epochs": 3, "entries": 10, "files": 5, "bytes": total},
                         plan)
        # The leading "#epoch" is optional in an appended text too: it still adds an epoch.
        with open(self.manifest, "a") as f:
            f.write("b.bin\n")
        plan = self.plan(self.mnt)
        self.assertEqual(summary(plan), {"epochs": 4, "entries": 11, "files": 5, "bytes": total},
                         plan)

        with open(self.manifest, "w") as f:
            f.write(f"{many_name(0)}\n{many_name(1)}\n{many_name(1)}\n")
        plan = self.plan(self.mnt)
        self.assertEqual(summary(plan), {"epochs": 1, "entries": 3, "files": 2,
                                         "bytes": many_size(0) + many_size(1)}, plan)
        self.assertEqual(self.control_read(self.mnt, "errors"), "")

        empty = {"epochs": 0, "entries": 0, "files": 0, "bytes": 0}
        # A text without entries replaces the plan with an empty one when close() returns.
        with open(self.manifest, "w") as f:
            f.write("# nothing to read\n")
        plan = self.plan(self.mnt)
        self.assertEqual(summary(plan), empty, plan)

        # An O_TRUNC open that writes nothing clears it too, at release: the kernel sends that
        # just after the last close(), asynchronously.
        self.write_manifest(self.mnt, f"{many_name(0)}\n")
        with open(self.manifest, "w"):
            pass
        deadline = time.monotonic() + 5
        while summary(self.plan(self.mnt)) != empty and time.monotonic() < deadline:
            time.sleep(0.01)
        plan = self.plan(self.mnt)
        self.assertEqual(summary(plan), empty, plan)


class ManifestRejectTest(ManifestCase):
    """Test 5: each hostile manifest fails close() with EINVAL, names its line, changes nothing."""

    GOOD = [b"a.bin", b"b.bin", b"./#hash.bin", b"d.bin", b"dir/c.bin"]

    def hostile_cases(self):
        return [
            ("dotdot escape", [b"../outside"]),
            ("nested dotdot escape", [b"sub/../../outside"]),
            ("absolute outside", [b"/etc/hostname"]),
            ("absolute dotdot via dataset", [f"{self.ds}/../outside".encode()]),
            ("symlink leading out", [b"out_link"]),
            ("missing file", [b"no/such/file.bin"]),
            ("directory", [b"sub"]),
            ("fifo", [b"fifo"]),
            ("control file", [b".clairfs/stats"]),
            ("empty line", [b""]),
            ("NUL inside a line", [b"a.bin\x00b.bin"]),
            ("line over 4096 bytes", [b"x" * 5000]),
            ("empty epoch", [b"#epoch", b"#epoch"]),
            ("trailing slash on a file", [b"a.bin/"]),
            ("dot after a file", [b"a.bin/."]),
            ("dotdot after a file", [b"a.bin/../b.bin"]),
            ("symlink to a file with a slash", [b"dir/c.bin//"]),
            ("trailer counting wrong", [b"#end 7"]),
            ("malformed trailer", [b"#end"]),
        ]

    def test_hostile_manifests_rejected(self):
        with open(self.manifest, "w") as f:
            f.write("a.bin\nb.bin\n#epoch\nb.bin\ndir/c.bin\n")
        before = self.plan(self.mnt)
        self.assertEqual(summary(before)["epochs"], 2, before)

        for i, (name, bad) in enumerate(self.hostile_cases()):
            k = 1 + i % 4  # good lines before the bad one; differs from case to case
            lines = self.GOOD[:k] + bad + self.GOOD[k:]
            # The error is on line k+1; an empty epoch may be reported at either #epoch.
            allowed = {k + 1, k + 2} if name == "empty epoch" else {k + 1}
            with self.subTest(case=name):
                with self.assertRaises(OSError, msg=f"{name}: close() succeeded") as cm:
                    self.write_manifest(self.mnt, b"\n".join(lines) + b"\n")
                self.assertEqual(cm.exception.errno, errno.EINVAL, f"{name}: {cm.exception!r}")
                self.assertEqual(self.plan(self.mnt), before, f"{name}: plan changed")
                report = self.control_read(self.mnt, "errors")
                numbers = {int(n) for n in re.findall(r"\bline (\d+)", report, re.I)}
                self.assertTrue(numbers & allowed,
                                f"{name}: errors should name line {sorted(allowed)}: {report!r}")

    def test_error_on_line_3_of_5(self):
        with open(self.manifest, "w") as f:
            f.write("a.bin\n")
        before = self.plan(self.mnt)
        with self.assertRaises(OSError) as cm:
            self.write_manifest(self.mnt, "#epoch\na.bin\nno_such.bin\nb.bin\nd.bin\n")
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.assertEqual(self.plan(self.mnt), before)
        report = self.control_read(self.mnt, "errors")
        numbers = {int(n) for n in re.findall(r"\bline (\d+)", report, re.I)}
        self.assertEqual(numbers, {3}, report)
        self.assertIn("no_such.bin", report)
        # A rejected append changes nothing either.
        with self.assertRaises(OSError) as cm:
            self.write_manifest(self.mnt, "#epoch\nb.bin\nmissing.bin\n", append=True)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.assertEqual(self.plan(self.mnt), before)


class ConcurrentWritersTest(ManifestCase):
    """Test 6: two interleaved writers; the plan is exactly one of them, never a mix."""

    def writer_texts(self):
        rng = random.Random(6)
        a_files = [many_name(i) for i in range(1000)]
        b_files = [many_name(i) for i in range(1000, MANY)]
        a_epochs, b_epochs = [], []
        for _ in range(2):
            rng.shuffle(a_files)
            a_epochs.append("\n".join(a_files))
        for _ in range(4):
            rng.shuffle(b_files)
            b_epochs.append("\n".join(b_files))
        a = ("#epoch\n" + "\n#epoch\n".join(a_epochs) + "\n").encode()
        b = ("\n#epoch\n".join(b_epochs) + "\n").encode()
        a_sum = {"epochs": 2, "entries": 2000, "files": 1000,
                 "bytes": sum(many_size(i) for i in range(1000))}
        b_sum = {"epochs": 4, "entries": 2000, "files": 500,
                 "bytes": sum(many_size(i) for i in range(1000, MANY))}
        return [(a, a_sum), (b, b_sum)]

    def test_concurrent_writers(self):
        writers = self.writer_texts()
        chunk = 512
        rounds = max(len(t) for t, _ in writers) // chunk + 1
        for attempt in range(3):
            barrier = threading.Barrier(2, timeout=60)
            results = [None, None]

            def run(idx):
                data = writers[idx][0]
                try:
                    f = open(self.manifest, "wb", buffering=0)
                except OSError as e:
                    results[idx] = e
                    barrier.abort()
                    return
                try:
                    barrier.wait()
                    for r in range(rounds):
                        piece = data[r * chunk:(r + 1) * chunk]
                        if piece:
                            f.write(piece)
                        barrier.wait()
                except BaseException as e:  # noqa: BLE001 - reported below
                    results[idx] = e
                finally:
                    try:
                        f.close()
                    except OSError as e:
                        results[idx] = results[idx] or e
                results[idx] = results[idx] or "ok"

            threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            self.assertFalse(any(t.is_alive() for t in threads), "writer threads hung")
            for r in results:
                self.assertFalse(isinstance(r, threading.BrokenBarrierError), results)
                self.assertFalse(isinstance(r, OSError) and r.errno == errno.EINVAL,
                                 f"attempt {attempt}: a valid manifest was rejected: {results}")
            got = summary(self.plan(self.mnt))
            ok = [i for i, r in enumerate(results) if r == "ok"]
            self.assertTrue(ok, f"attempt {attempt}: no writer succeeded: {results}")
            matches = [i for i in ok if writers[i][1] == got]
            self.assertEqual(len(matches), 1,
                             f"attempt {attempt}: plan {got} is neither writer's "
                             f"({writers[0][1]}, {writers[1][1]}); results {results}")


class ManifestCommitTest(ManifestCase):
    """Commit at release: dups, forks and killed writers never install a partial text."""

    def entries(self):
        return self.plan(self.mnt)["entries"]

    def test_forked_child_closing_its_copy_installs_nothing(self):
        self.write_manifest(self.mnt, "a.bin\n")
        fd = os.open(self.manifest, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, b"b.bin\nd.bin\n")
            pid = os.fork()
            if pid == 0:  # the child closes its copy of the descriptor: a flush, no release
                try:
                    os.close(fd)
                    os._exit(0)
                except OSError as e:
                    os._exit(e.errno or 1)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0, "the child's close() failed")
            self.assertEqual(self.entries(), 1, "a child's close() installed a partial text")
            os.write(fd, b"dir/c.bin\n")
        finally:
            os.close(fd)
        self.assertEqual(self.entries(), 3)
        self.assertEqual(self.control_read(self.mnt, "errors"), "")

    def test_dup_closed_first_reports_the_partial_text(self):
        self.write_manifest(self.mnt, "a.bin\n")
        fd = os.open(self.manifest, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, b"b.bin\nd.b")
            with self.assertRaises(OSError) as cm:
                os.close(os.dup(fd))  # validates the text so far, whose line 2 is cut
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            self.assertIn("line 2: 'd.b'", self.control_read(self.mnt, "errors"))
            self.assertEqual(self.entries(), 1)
            os.write(fd, b"in\n")  # line 2 goes on: "d.bin"
        finally:
            os.close(fd)
        self.assertEqual(self.entries(), 2)
        self.assertEqual(self.control_read(self.mnt, "errors"), "")

    def test_writer_killed_mid_write_leaves_the_previous_plan(self):
        self.write_manifest(self.mnt, "a.bin\nb.bin\n")
        before = self.plan(self.mnt)
        code = ("import os, signal, sys\n"
                "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)\n"
                "os.write(fd, b'#begin\\n' + b'd.bin\\n' * 1000)\n"
                "os.kill(os.getpid(), signal.SIGKILL)\n")
        r = subprocess.run([sys.executable, "-c", code, self.manifest], timeout=60)
        self.assertEqual(r.returncode, -signal.SIGKILL)
        deadline = time.monotonic() + 10
        while "trailer" not in self.control_read(self.mnt, "errors"):
            self.assertLess(time.monotonic(), deadline, "the cut-off text was not validated")
            time.sleep(0.01)
        self.assertEqual(self.plan(self.mnt), before, "a cut-off text became the plan")
        # The same text with its trailer is accepted; a wrong count is not.
        with self.assertRaises(OSError) as cm:
            self.write_manifest(self.mnt, "#begin\n" + "d.bin\n" * 1000 + "#end 999\n")
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.assertIn("line 1002", self.control_read(self.mnt, "errors"))
        self.assertEqual(self.plan(self.mnt), before)
        self.write_manifest(self.mnt, "#begin\n" + "d.bin\n" * 1000 + "#end 1000\n")
        self.assertEqual(self.entries(), 1000)

    def test_write_offsets_and_truncation(self):
        self.write_manifest(self.mnt, "a.bin\n")
        fd = os.open(self.manifest, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, b"b.bin\n")
            for off in (0, 3, 100):  # a rewrite, a rewrite inside a line, a hole
                with self.assertRaises(OSError, msg=f"pwrite at {off}") as cm:
                    os.pwrite(fd, b"d.bin\n", off)
                self.assertEqual(cm.exception.errno, errno.ESPIPE)
            self.assertEqual(os.pwrite(fd, b"d.bin\n", 6), 6)  # exactly where the text ends
            with self.assertRaises(OSError) as cm:
                os.ftruncate(fd, 3)
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            os.truncate(self.manifest, 0)  # by path: no writer, changes nothing
        finally:
            os.close(fd)
        self.assertEqual(self.entries(), 2)
        # ftruncate(fd, 0) discards what the descriptor wrote: the text starts over.
        fd = os.open(self.manifest, os.O_WRONLY | os.O_TRUNC)
        try:
            with self.assertRaises(OSError) as cm:  # a missing file: refused at the write
                os.write(fd, b"missing.bin\n")
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, b"b.bin\nd.bin\nb.bin\n")
        finally:
            os.close(fd)
        self.assertEqual(self.entries(), 3)
        self.assertEqual(self.control_read(self.mnt, "errors"), "")

    def test_control_bytes_are_escaped_in_errors(self):
        self.write_manifest(self.mnt, "a.bin\n")
        with self.assertRaises(OSError):
            self.write_manifest(self.mnt, b"a.bin\n\x1b[2J\x07bad\\name\xff\xc3\xa9\n")
        report = self.control_read(self.mnt, "errors")
        self.assertIn("line 2", report)
        self.assertIn("\\x1b[2J\\x07bad\\\\name\\xff\u00e9", report)
        self.assertFalse(any(ord(c) < 0x20 and c != "\n" for c in report), repr(report))
        self.assertEqual(self.entries(), 1)


class ManifestCheckAheadTest(ClairfsCase):
    """A long text's paths are checked by the writes that bring them: the write carrying a bad
    path fails and leaves the plan as it was, and an accepted text is planned whole, through
    dup'ed closes."""

    FILES = 12_000

    @classmethod
    def setUpClass(cls):
        cls.ds = os.path.join(cls.class_tmpdir("ahead"), "ds")
        for d in range(20):
            os.makedirs(os.path.join(cls.ds, f"d{d}"))
        for i in range(cls.FILES):
            tu.write_file(os.path.join(cls.ds, cls.name(i)), b"a" * (i % 7))
        os.makedirs(os.path.join(cls.ds, "sub"))

    @staticmethod
    def name(i):
        return f"d{i % 20}/f{i}"

    def setUp(self):
        super().setUp()
        self.mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(self.mnt)
        self.mount(self.ds, self.mnt)
        self.manifest = os.path.join(self.mnt, ".clairfs", "manifest")

    def write_in_pieces(self, lines, dup_close_at=None):
        """Writes lines in 64 KiB pieces; a dup'ed descriptor is closed after the piece that
        holds line dup_close_at (its validation of the partial text is ignored here)."""
        data = "".join(line + "\n" for line in lines).encode()
        cut = len("".join(line + "\n" for line in lines[:dup_close_at])) if dup_close_at else -1
        fd = os.open(self.manifest, os.O_WRONLY | os.O_TRUNC)
        try:
            for at in range(0, len(data), 65536):
                os.write(fd, data[at:at + 65536])
                if at <= cut < at + 65536:
                    try:
                        os.close(os.dup(fd))
                    except OSError:
                        pass  # the text so far may end mid-line
        finally:
            os.close(fd)

    def test_errors_by_line_and_the_plan_as_without_it(self):
        names = [self.name(i) for i in range(self.FILES)]
        self.write_manifest(self.mnt, "d0/f0\n")
        before = self.plan(self.mnt)
        for bad_line, bad_path in ((200, "sub"), (9_500, "d3/missing")):
            bad = names[:bad_line - 1] + [bad_path] + names[bad_line - 1:]
            with self.assertRaises(OSError) as cm:
                self.write_in_pieces(bad, dup_close_at=5_000)
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            self.assertEqual(self.plan(self.mnt), before)
            report = self.control_read(self.mnt, "errors")
            self.assertIn(f"1 error\nline {bad_line}: '{bad_path}'", report)
            self.assertIn("refused at write()", report)

        good = ["#stream ahead"] + names + ["d5/../d5/f5", "d7//f7"] + names[:100]
        self.write_in_pieces(good, dup_close_at=5_000)
        plan = self.plan(self.mnt)
        self.assertEqual(self.control_read(self.mnt, "errors"), "")
        self.assertEqual(plan["files"], self.FILES, plan)  # the default stream reads d0/f0 too
        stream = next(s for s in plan["streams"] if s["name"] == "ahead")
        self.assertEqual(stream["entries"], self.FILES + 102, stream)
        with open(os.path.join(self.mnt, "d5", "f5"), "rb") as f:
            self.assertEqual(f.read(), b"a" * 5)
