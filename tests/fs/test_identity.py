"""A node of the mount is bound to the object it was looked up as, and a changed file is never
served stale, by the daemon or by the kernel's caches: reused inode numbers, renames over a
file, rewrites that keep size and mtime (RAM tier, SSD tier, SSD tier after a remount), files
that grow or shrink while cached, and FIFOs, directories or symlinks swapped in for a file.

Every scenario first makes the kernel remember the old node (attributes, pages) and the daemon
cache the old contents, then changes the dataset behind the mount's back."""
import errno
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import harness
from harness import ClairfsCase, config, wait_for
import treeutil as tu

DEADLINE = 20.0  # seconds for the prefetch to fill a tier, or a probe to finish


def rewrite_keep_mtime(path, data):
    """Rewrites path in place (same inode) and puts its mtime back, as `touch -r` would."""
    st = os.stat(path)
    tu.write_file(path, data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)


# Run in a child process so that a hang in the mount cannot hang the suite: opens path without
# blocking on a FIFO and reads it, printing what happened as JSON.
PROBE = r"""
import json, os, sys
out = {}
try:
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
    try:
        out["data"] = os.read(fd, 1 << 20).hex()
    finally:
        os.close(fd)
except OSError as e:
    out["errno"] = e.errno
print(json.dumps(out))
"""


class IdentityCase(ClairfsCase):
    """Node identity as per_open mode guarantees it: every open revalidates the name at once.
    In none mode (the default) a change made behind the mount is seen when the backing watch
    drops the kernel's entry, moments later, or as ESTALE at a read that reaches the daemon:
    test_no_open covers that; here a test names none explicitly to run in it."""

    def setUp(self):
        super().setUp()
        self.rng = random.Random(self.id())

    def mount(self, dataset, mountpoint=None, cfg=None, **kw):
        cfg = cfg if cfg is not None else config()
        cfg["fuse"].setdefault("open_mode", "per_open")
        return super().mount(dataset, mountpoint, cfg=cfg, **kw)

    def dataset(self, files, base=None):
        base = base or self.tmpdir("id")
        ds = os.path.join(base, "ds")
        os.makedirs(ds)
        for rel, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(ds, rel)), exist_ok=True)
            tu.write_file(os.path.join(ds, rel), data)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        return ds, mnt

    def read(self, mnt, rel):
        with open(os.path.join(mnt, rel), "rb") as f:
            return f.read()

    def assert_bytes(self, got, want, what):
        self.assertEqual(len(got), len(want), f"{what}: {len(got)} bytes, want {len(want)}")
        self.assertTrue(got == want, f"{what}: wrong bytes")

    def plan_and_fill(self, mnt, rels, tier=0):
        """Registers a plan of rels and waits until tier `tier` fetched all of them."""
        self.write_manifest(mnt, "#epoch\n" + "\n".join(rels) + "\n")
        plan = self.plan(mnt)
        self.assertEqual(plan["files"], len(rels), plan)
        self.assertEqual(plan["tiers"][tier]["objects"], len(rels), plan)
        wait_for(lambda: self.stats(mnt)["tiers"][tier]["fetched"] >= len(rels), DEADLINE,
                 f"the prefetch to fill tier {tier}")

    def served(self, mnt, kind):
        return self.stats(mnt)["served"][kind]


class InodeReuseTest(IdentityCase):
    def disk_tmpdir(self):
        """A directory on a disk file system: tmpfs never reuses inode numbers."""
        d = tempfile.mkdtemp(prefix=f"{harness.RUN_PREFIX}reuse-", dir="/var/tmp")
        with harness._lock:
            harness._tmpdirs.append(d)
        self.addCleanup(harness.remove_tmpdir, d)
        return d

    def test_reused_inode_number_is_a_new_node(self):
        victim, replacement = self.rng.randbytes(5000), self.rng.randbytes(7000)
        ds, mnt = self.dataset({"d/victim": victim, "d/other": b"o" * 100},
                               base=self.disk_tmpdir())
        self.mount(ds, mnt)
        self.plan_and_fill(mnt, ["d/victim"])  # cached: the daemon keeps no descriptor open
        # An open descriptor keeps the kernel's node of d/victim.
        fd = os.open(os.path.join(mnt, "d/victim"), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        self.assert_bytes(os.pread(fd, 1 << 20, 0), victim, "victim")
        old_ino = os.stat(os.path.join(ds, "d/victim")).st_ino
        os.unlink(os.path.join(ds, "d/victim"))
        reused = None
        for k in range(500):
            rel = f"d/new{k:03d}"
            tu.write_file(os.path.join(ds, rel), f"file {k} ".encode() * (50 + k))
            if os.stat(os.path.join(ds, rel)).st_ino == old_ino:
                reused = rel
                break
        if reused is None:
            self.skipTest("the file system did not reuse the inode number in 500 creations")
        tu.write_file(os.path.join(ds, "d/victim"), replacement)  # another file at the old name
        k = int(reused[-3:])
        want = f"file {k} ".encode() * (50 + k)
        self.assert_bytes(self.read(mnt, reused), want, f"{reused} (inode reused)")
        self.assertEqual(os.stat(os.path.join(mnt, reused)).st_size, len(want))
        self.assert_bytes(self.read(mnt, "d/victim"), replacement, "d/victim (recreated)")
        self.assert_bytes(os.pread(fd, 1 << 20, 0), victim, "descriptor opened before")


class RenameOverTest(IdentityCase):
    def check_rename_over(self, mnt, ds, a, b, old_a, new_a):
        os.stat(os.path.join(mnt, b))  # the kernel knows b's node too
        fd = os.open(os.path.join(mnt, a), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        self.assert_bytes(os.pread(fd, 1 << 20, 0), old_a, f"{a} before")
        os.rename(os.path.join(ds, b), os.path.join(ds, a))  # mv b a, behind the mount's back
        self.assert_bytes(self.read(mnt, a), new_a, f"{a} after the rename")
        st = os.stat(os.path.join(mnt, a))
        self.assertEqual((st.st_size, st.st_ino), (len(new_a), os.stat(os.path.join(ds, a)).st_ino))
        self.assert_bytes(os.pread(fd, 1 << 20, 0), old_a, f"{a} through the old descriptor")

    def test_rename_over_planned_and_unplanned(self):
        files = {f"{d}/{n}": self.rng.randbytes(3000 if n == "a" else 9000)
                 for d in ("planned", "unplanned") for n in ("a", "b")}
        ds, mnt = self.dataset(files)
        # The OPEN's ESTALE makes the kernel look the name up again at once: per_open only
        # (none mode: test_no_open.test_a_changed_file_is_never_served_from_a_tier).
        self.mount(ds, mnt, cfg=config(open_mode="per_open"))
        self.plan_and_fill(mnt, ["planned/a", "planned/b"])
        for d in ("planned", "unplanned"):
            with self.subTest(d):
                self.check_rename_over(mnt, ds, f"{d}/a", f"{d}/b", files[f"{d}/a"],
                                       files[f"{d}/b"])
        self.assertGreater(self.served(mnt, "ram"), 0)
        self.assertGreater(self.stats(mnt)["errors"]["stale_node"], 0)

    def test_stat_after_rename_over_retries_with_a_fresh_lookup(self):
        # Attributes are never cached: stat() asks the daemon, which finds that the old node's
        # path names another file (ESTALE); the kernel looks the name up again.
        files = {"a": self.rng.randbytes(3000), "b": self.rng.randbytes(9000)}
        ds, mnt = self.dataset(files)
        cfg = config()
        cfg["fuse"]["attr_timeout"] = 0
        self.mount(ds, mnt, cfg=cfg)
        self.assertEqual(os.stat(os.path.join(mnt, "a")).st_size, 3000)
        os.rename(os.path.join(ds, "b"), os.path.join(ds, "a"))
        st = os.stat(os.path.join(mnt, "a"))
        self.assertEqual((st.st_size, st.st_ino), (9000, os.stat(os.path.join(ds, "a")).st_ino))
        self.assert_bytes(self.read(mnt, "a"), files["b"], "a after the rename")


class HardLinkTest(IdentityCase):
    def test_link_outlives_the_first_name(self):
        data = self.rng.randbytes(6000)
        ds, mnt = self.dataset({"a": data, "other": b"x"})
        os.link(os.path.join(ds, "a"), os.path.join(ds, "b"))
        self.mount(ds, mnt)
        fd = os.open(os.path.join(mnt, "a"), os.O_RDONLY)  # keeps the node first named "a"
        self.addCleanup(os.close, fd)
        self.assert_bytes(self.read(mnt, "b"), data, "b")  # a real hard link: one node
        self.assertEqual(os.stat(os.path.join(mnt, "a")).st_ino,
                         os.stat(os.path.join(mnt, "b")).st_ino)
        os.unlink(os.path.join(ds, "a"))
        # The node's own path is gone: b is looked up again and still reads the file.
        self.assert_bytes(self.read(mnt, "b"), data, "b after a was removed")
        with self.assertRaises(FileNotFoundError):
            self.read(mnt, "a")
        self.assert_bytes(os.pread(fd, 1 << 20, 0), data, "descriptor opened as a")


class RewriteTest(IdentityCase):
    """Rewrites that keep size and mtime: only ctime tells the versions apart."""

    def test_cp_p_rewrite_from_ram_tier(self):
        size = 40_000
        files = {"f.bin": self.rng.randbytes(size), "g.bin": self.rng.randbytes(size)}
        ds, mnt = self.dataset(files)
        self.mount(ds, mnt)
        self.plan_and_fill(mnt, ["f.bin", "g.bin"])
        self.assert_bytes(self.read(mnt, "f.bin"), files["f.bin"], "f.bin")  # pages cached
        self.assertEqual(self.served(mnt, "ram"), 1)
        src = os.path.join(self.tmpdir("src"), "new.bin")
        new = self.rng.randbytes(size)
        tu.write_file(src, new)
        st = os.stat(os.path.join(ds, "f.bin"))
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
        subprocess.run(["cp", "-p", src, os.path.join(ds, "f.bin")], check=True, timeout=30)
        after = os.stat(os.path.join(ds, "f.bin"))
        self.assertEqual((after.st_ino, after.st_size, after.st_mtime_ns),
                         (st.st_ino, st.st_size, st.st_mtime_ns))
        self.assert_bytes(self.read(mnt, "f.bin"), new, "f.bin after cp -p")
        self.assert_bytes(self.read(mnt, "g.bin"), files["g.bin"], "g.bin")
        self.assertGreaterEqual(self.served(mnt, "ram"), 2)  # g.bin still from the tier

    def ssd_cfg(self, ssd_dir):
        cfg = config(staging="1MiB")
        cfg["cache"]["tiers"] = [{"kind": "ssd", "capacity": "64MiB", "threads": 2,
                                  "dir": ssd_dir}]
        return cfg

    def test_touch_r_rewrite_from_ssd_tier(self):
        size = 30_000
        files = {"f.bin": self.rng.randbytes(size), "g.bin": self.rng.randbytes(size)}
        ds, mnt = self.dataset(files)
        ssd_dir = os.path.join(self.tmpdir("ssd"), "db")
        self.mount(ds, mnt, cfg=self.ssd_cfg(ssd_dir))
        self.plan_and_fill(mnt, ["f.bin", "g.bin"])
        self.assert_bytes(self.read(mnt, "f.bin"), files["f.bin"], "f.bin")
        self.assertEqual(self.served(mnt, "ssd"), 1)
        ref = os.path.join(self.tmpdir("ref"), "ref")
        tu.write_file(ref, b"")
        shutil.copystat(os.path.join(ds, "f.bin"), ref)
        new = self.rng.randbytes(size)
        tu.write_file(os.path.join(ds, "f.bin"), new)
        subprocess.run(["touch", "-r", ref, os.path.join(ds, "f.bin")], check=True, timeout=30)
        self.assertEqual(os.stat(os.path.join(ds, "f.bin")).st_mtime_ns, os.stat(ref).st_mtime_ns)
        self.assert_bytes(self.read(mnt, "f.bin"), new, "f.bin after touch -r")
        self.assert_bytes(self.read(mnt, "g.bin"), files["g.bin"], "g.bin")
        self.assertGreaterEqual(self.served(mnt, "ssd"), 2)

    def test_rewrite_from_ssd_tier_after_remount(self):
        size = 30_000
        files = {"f.bin": self.rng.randbytes(size), "g.bin": self.rng.randbytes(size)}
        ds, mnt = self.dataset(files)
        ssd_dir = os.path.join(self.tmpdir("ssd"), "db")
        d = self.mount(ds, mnt, cfg=self.ssd_cfg(ssd_dir))
        self.plan_and_fill(mnt, ["f.bin", "g.bin"])
        d.stop()
        new = self.rng.randbytes(size)
        rewrite_keep_mtime(os.path.join(ds, "f.bin"), new)
        self.mount(ds, mnt, cfg=self.ssd_cfg(ssd_dir))
        self.write_manifest(mnt, "#epoch\nf.bin\ng.bin\n")
        # g.bin is served from what the first mount stored; f.bin never is.
        self.assert_bytes(self.read(mnt, "g.bin"), files["g.bin"], "g.bin")
        self.assertEqual(self.served(mnt, "ssd"), 1, self.stats(mnt))
        self.assert_bytes(self.read(mnt, "f.bin"), new, "f.bin after the remount")
        self.assert_bytes(self.read(mnt, "f.bin"), new, "f.bin read again")


class SizeChangeTest(IdentityCase):
    def test_grow_and_shrink_while_cached(self):
        files = {"grow.bin": self.rng.randbytes(20_000), "shrink.bin": self.rng.randbytes(90_000)}
        ds, mnt = self.dataset(files)
        self.mount(ds, mnt)
        self.plan_and_fill(mnt, sorted(files))
        for rel, data in files.items():  # the kernel caches attributes and pages
            self.assert_bytes(self.read(mnt, rel), data, rel)
            self.assertEqual(os.stat(os.path.join(mnt, rel)).st_size, len(data))
        new = {"grow.bin": self.rng.randbytes(150_000), "shrink.bin": self.rng.randbytes(7_000)}
        for rel, data in new.items():
            rewrite_keep_mtime(os.path.join(ds, rel), data)
        for rel, data in new.items():
            with self.subTest(rel):
                self.assert_bytes(self.read(mnt, rel), data, rel)
                self.assertEqual(os.stat(os.path.join(mnt, rel)).st_size, len(data))
                with open(os.path.join(mnt, rel), "rb") as f:  # and again, from the page cache
                    self.assert_bytes(f.read(), data, f"{rel} read again")


class SwappedTypeTest(IdentityCase):
    def probe(self, path):
        r = subprocess.run([sys.executable, "-c", PROBE, path], capture_output=True,
                           timeout=DEADLINE)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def unblock_fifo(self, path):
        """Opens the FIFO for writing once, so a reader stuck opening it gets unstuck."""
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass

    def test_fifo_dir_symlink_swapped_in(self):
        for mode in ("per_open", "none"):
            with self.subTest(mode):
                self.check_swapped_in(mode)

    def check_swapped_in(self, mode):
        names = ["fifo.bin", "dir.bin", "link.bin", "kept.bin"]
        files = {n: self.rng.randbytes(10_000) for n in names}
        ds, mnt = self.dataset(files, base=self.tmpdir(mode))
        d = self.mount(ds, mnt, cfg=config(open_mode=mode))
        self.plan_and_fill(mnt, names)
        for n in names:
            self.assert_bytes(self.read(mnt, n), files[n], n)
        fifo = os.path.join(ds, "fifo.bin")
        os.unlink(fifo)
        os.mkfifo(fifo)
        self.addCleanup(self.unblock_fifo, fifo)
        os.unlink(os.path.join(ds, "dir.bin"))
        os.mkdir(os.path.join(ds, "dir.bin"))
        os.unlink(os.path.join(ds, "link.bin"))
        os.symlink("missing-target", os.path.join(ds, "link.bin"))

        try:
            got = self.probe(os.path.join(mnt, "fifo.bin"))
        except subprocess.TimeoutExpired:
            self.fail("opening a file replaced by a FIFO hangs")
        # The kernel now knows a FIFO of its own: it yields no byte of the old file.
        self.assertEqual(got.get("data", ""), "", got)
        got = self.probe(os.path.join(mnt, "dir.bin"))
        self.assertEqual(got, {"errno": errno.EISDIR})
        got = self.probe(os.path.join(mnt, "link.bin"))
        self.assertEqual(got, {"errno": errno.ENOENT})
        self.assertTrue(os.path.isdir(os.path.join(mnt, "dir.bin")))
        self.assertEqual(os.readlink(os.path.join(mnt, "link.bin")), "missing-target")

        self.assertIsNone(d.proc.poll(), "the daemon died")
        self.assert_bytes(self.read(mnt, "kept.bin"), files["kept.bin"], "kept.bin")
        st = self.stats(mnt)
        if mode == "per_open":  # none: the backing watch may have dropped the names first
            self.assertGreaterEqual(st["errors"]["stale_node"], 3, st)
