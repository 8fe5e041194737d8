"""Tests 1, 2, 3, 11: the mirrored namespace, the hidden control dir, EROFS, cp -r and du."""
import errno
import os
import subprocess

from harness import ClairfsCase, config
import treeutil as tu

STAT_FIELDS = ("dtype", "type", "mode", "size", "mtime_ns", "nlink", "uid", "gid", "target")
STATS_KEYS = {"file_reads", "bytes_read", "served", "backing_reads", "backing_bytes",
              "unplanned_file_reads", "prefetch", "ram_bytes", "ram_capacity", "stall_ns", "errors"}
PLAN_KEYS = {"epochs", "entries", "range_entries", "positions", "files", "chunked_files",
             "objects", "chunks", "bytes", "chunk_size", "tiers", "staging", "direct",
             "predicted_backing_bytes"}


def sampled(rel):
    """The entries the full comparison covers: all but 36 of every 37 files of 'many' (its
    listing is compared whole; a lookup and a read of each of its 100,000 files added most of
    the suite's time under the sanitizers, and tests nothing the sample does not)."""
    return not rel.startswith("many/") or hash_index(rel) % 37 == 0


def hash_index(rel):
    """A stable number of a 'many' file's name (its digits)."""
    digits = "".join(c for c in os.path.basename(rel) if c.isdigit())
    return int(digits) if digits else 0


def expected_view(snap, outside):
    """The original's snapshot as the mount should show it: outside symlinks hidden."""
    return {rel: e for rel, e in snap.items() if rel not in outside}


class NamespaceTest(ClairfsCase):
    """Test 1: a large odd tree mounted at a separate mountpoint mirrors the original."""

    @classmethod
    def setUpClass(cls):
        cls.base = cls.class_tmpdir("ns")
        cls.ds, cls.outside = tu.build_odd_tree(cls.base, many=100_000, hardlink=True)
        cls.orig = tu.snapshot(cls.ds, keep=sampled)
        cls.orig_hashes = tu.hashes(cls.ds, cls.orig)

    def test_namespace_equality(self):
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        self.mount(self.ds, mnt)
        expected = expected_view(self.orig, set(self.outside))
        actual = tu.snapshot(mnt, keep=sampled)
        with self.subTest("listing, types and stat fields"):
            problems = tu.diff(expected, actual, STAT_FIELDS)
            self.assertEqual(problems, [], "mount differs from the original:\n" +
                             "\n".join(problems))
        with self.subTest("outside symlinks hidden"):
            for rel in self.outside:
                parent = os.path.join(mnt, os.path.dirname(rel))
                self.assertNotIn(os.path.basename(rel), os.listdir(parent), rel)
                with self.assertRaises(OSError, msg=f"lstat {rel}") as cm:
                    os.lstat(os.path.join(mnt, rel))
                self.assertEqual(cm.exception.errno, errno.ENOENT, rel)
        with self.subTest("100k-entry directory"):
            names = sorted(os.listdir(os.path.join(mnt, "many")))
            self.assertEqual(len(names), 100_000)
            self.assertEqual(names, sorted(os.listdir(os.path.join(self.ds, "many"))))
        with self.subTest("inside symlinks resolve within the mount"):
            with open(os.path.join(mnt, "links", "rel_file"), "rb") as f:
                self.assertEqual(f.read(), b"hello clairfs\n")
            self.assertEqual(sorted(os.listdir(os.path.join(mnt, "links", "rel_dir"))),
                             sorted(os.listdir(os.path.join(self.ds, "sub"))))
        with self.subTest("file contents (sha256)"):
            got = tu.hashes(mnt, {r: e for r, e in expected.items()})
            problems = tu.diff(self.orig_hashes, got)
            self.assertEqual(problems, [], "contents differ:\n" + "\n".join(problems))


class SmallTreeCase(ClairfsCase):
    """A small odd tree shared by a class; each test mounts it afresh."""

    @classmethod
    def setUpClass(cls):
        cls.base = cls.class_tmpdir("small")
        cls.ds, cls.outside = tu.build_odd_tree(cls.base, many=300)
        cls.orig = tu.snapshot(cls.ds)
        cls.orig_hashes = tu.hashes(cls.ds, cls.orig)

    def mount_small(self, cfg=None):
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        self.mount(self.ds, mnt, cfg=cfg)
        return mnt


class ControlDirTest(SmallTreeCase):
    """Test 2: .clairfs is hidden from listings yet reachable by path."""

    def test_control_dir_hidden_but_reachable(self):
        mnt = self.mount_small(config(ram="48MiB", staging="3MiB"))
        self.assertNotIn(".clairfs", os.listdir(mnt))
        st = os.stat(os.path.join(mnt, ".clairfs"))
        self.assertTrue(os.path.isdir(os.path.join(mnt, ".clairfs")), oct(st.st_mode))
        self.assertLessEqual({"manifest", "stats", "plan", "errors", "metrics"},
                             set(os.listdir(os.path.join(mnt, ".clairfs"))))
        for name in ("manifest", "stats", "plan", "errors", "metrics"):
            self.assertTrue(os.path.isfile(os.path.join(mnt, ".clairfs", name)), name)

        stats = self.stats(mnt)
        self.assertLessEqual(STATS_KEYS, set(stats), f"stats keys: {sorted(stats)}")
        self.assertLessEqual({"ram", "staging", "backing"}, set(stats["served"]))
        self.assertLessEqual({"planned_files", "fetches", "staging_fetches", "epoch", "position"},
                             set(stats["prefetch"]))
        self.assertIsInstance(stats["errors"], dict)
        for k in STATS_KEYS - {"served", "prefetch", "errors"}:
            self.assertIsInstance(stats[k], int, k)
        self.assertEqual(stats["ram_capacity"], 48 * 1024 * 1024)

        plan = self.plan(mnt)
        self.assertLessEqual(PLAN_KEYS, set(plan), f"plan keys: {sorted(plan)}")
        self.assertEqual((plan["epochs"], plan["entries"], plan["files"]), (0, 0, 0))
        self.assertIsInstance(plan["tiers"], list)
        self.assertEqual(self.control_read(mnt, "errors"), "")
        # With a plan, one configured tier, described in full.
        with open(os.path.join(mnt, ".clairfs", "manifest"), "w") as f:
            f.write("plain.txt\nsub/a.dat\n")
        plan = self.plan(mnt)
        self.assertEqual((plan["epochs"], plan["entries"], plan["files"], plan["bytes"]),
                         (1, 2, 2, 14 + 5000), plan)
        self.assertEqual(len(plan["tiers"]), 1, plan["tiers"])
        self.assertLessEqual({"name", "objects", "bytes", "capacity"}, set(plan["tiers"][0]))
        self.assertEqual(plan["tiers"][0]["capacity"], 48 * 1024 * 1024)
        self.assertEqual((plan["tiers"][0]["objects"], plan["tiers"][0]["bytes"]), (2, 5014), plan)
        self.assertLessEqual({"objects", "bytes"}, set(plan["staging"]))
        self.assertLessEqual({"objects", "bytes"}, set(plan["direct"]))
        self.assertEqual(self.stats(mnt)["prefetch"]["planned_files"], 2)

        # The counters count: one open and read of a dataset file shows up.
        with open(os.path.join(mnt, "sub", "a.dat"), "rb") as f:
            n = len(f.read())
        after = self.stats(mnt)
        self.assertEqual(after["file_reads"] - stats["file_reads"], 1)
        self.assert_bytes_read(after["bytes_read"] - stats["bytes_read"], n,
                               after["read_requests"] - stats["read_requests"] - 1, after)

        walked = [os.path.join(d, x) for d, ds, fs in os.walk(mnt) for x in ds + fs]
        self.assertFalse([p for p in walked if ".clairfs" in p], "os.walk shows .clairfs")
        out = subprocess.run(["find", mnt], capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        found = out.stdout.decode("utf-8", "surrogateescape").splitlines()
        self.assertFalse([p for p in found if ".clairfs" in p], "find shows .clairfs")
        self.assertEqual(len(found), len(self.orig) - len(self.outside))


class ReadOnlyTest(SmallTreeCase):
    """Test 3: every mutation of the dataset fails with EROFS and changes nothing."""

    def test_mutations_fail_with_erofs(self):
        mnt = self.mount_small()
        p = lambda *rel: os.path.join(mnt, *rel)  # noqa: E731
        ops = {
            "open r+": lambda: open(p("plain.txt"), "r+").close(),
            "open O_WRONLY": lambda: os.close(os.open(p("plain.txt"), os.O_WRONLY)),
            "open O_RDWR|O_TRUNC": lambda: os.close(os.open(p("big.bin"),
                                                            os.O_RDWR | os.O_TRUNC)),
            "create": lambda: os.close(os.open(p("new.txt"), os.O_WRONLY | os.O_CREAT, 0o644)),
            "create in subdir": lambda: open(p("sub", "new.txt"), "w").close(),
            "mkfifo": lambda: os.mkfifo(p("fifo")),
            "mkdir": lambda: os.mkdir(p("newdir")),
            "mkdir in subdir": lambda: os.mkdir(p("sub", "newdir")),
            "rmdir": lambda: os.rmdir(p("emptydir")),
            "unlink": lambda: os.unlink(p("plain.txt")),
            "unlink symlink": lambda: os.unlink(p("links", "rel_file")),
            "rename file": lambda: os.rename(p("plain.txt"), p("renamed.txt")),
            "rename dir": lambda: os.rename(p("sub"), p("sub2")),
            "chmod": lambda: os.chmod(p("plain.txt"), 0o600),
            "chmod dir": lambda: os.chmod(p("sub"), 0o700),
            "chown": lambda: os.chown(p("plain.txt"), 4321, 4321),
            "truncate": lambda: os.truncate(p("plain.txt"), 0),
            "utime": lambda: os.utime(p("plain.txt"), (0, 0)),
            "symlink": lambda: os.symlink("plain.txt", p("newlink")),
            "link": lambda: os.link(p("plain.txt"), p("hardlink")),
        }
        if hasattr(os, "setxattr"):
            ops["setxattr"] = lambda: os.setxattr(p("plain.txt"), "user.clairfs", b"1")
        for name, op in ops.items():
            with self.subTest(op=name):
                with self.assertRaises(OSError, msg=name) as cm:
                    op()
                self.assertEqual(cm.exception.errno, errno.EROFS,
                                 f"{name}: {cm.exception!r}")
        self.assertEqual(tu.diff(self.orig, tu.snapshot(self.ds), STAT_FIELDS), [])
        self.assertEqual(tu.diff(self.orig_hashes, tu.hashes(self.ds, self.orig)), [])
        self.assertEqual(tu.sha256_file(p("plain.txt")), self.orig_hashes["plain.txt"])


class CopyAndDuTest(SmallTreeCase):
    """Test 11: cp -r and du -sb of the mount match the original."""

    @staticmethod
    def du(path):
        out = subprocess.run(["du", "-sb", path], capture_output=True, timeout=60, check=True)
        return int(out.stdout.split()[0])

    def compare_copy(self, copy_root, expected, expected_hashes):
        got = tu.snapshot(copy_root)
        got.pop(".")
        exp = {r: e for r, e in expected.items() if r != "."}
        # Directory sizes are the copy's own (it lacks the hidden symlinks): not compared.
        for snap in (exp, got):
            snap.update({r: dict(e, size=0) for r, e in snap.items() if e["type"] == "d"})
        problems = tu.diff(exp, got, ("type", "size", "target"))
        self.assertEqual(problems, [], "copy differs:\n" + "\n".join(problems))
        problems = tu.diff(expected_hashes, tu.hashes(copy_root, got))
        self.assertEqual(problems, [], "copied contents differ:\n" + "\n".join(problems))

    def test_cp_r_and_du(self):
        mnt = self.mount_small()
        dest = self.tmpdir("cp")
        out = subprocess.run(["cp", "-r", os.path.join(mnt, "sub"), os.path.join(dest, "sub")],
                             capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        sub = {os.path.relpath(r, "sub"): e for r, e in self.orig.items()
               if r == "sub" or r.startswith("sub/")}
        sub_hashes = {os.path.relpath(r, "sub"): h for r, h in self.orig_hashes.items()
                      if r.startswith("sub/")}
        self.compare_copy(os.path.join(dest, "sub"), sub, sub_hashes)

        out = subprocess.run(["cp", "-r", mnt, os.path.join(dest, "all")],
                             capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertFalse(os.path.exists(os.path.join(dest, "all", ".clairfs")))
        self.compare_copy(os.path.join(dest, "all"),
                          expected_view(self.orig, set(self.outside)), self.orig_hashes)

        self.assertEqual(self.du(os.path.join(mnt, "sub")), self.du(os.path.join(self.ds, "sub")))
        hidden = sum(os.lstat(os.path.join(self.ds, r)).st_size for r in self.outside)
        self.assertEqual(self.du(mnt), self.du(self.ds) - hidden)
