"""Issue 25 item 1: a change made where no watch of this node sees it (another node of a
network file system) reaches every read within the documented bounds (docs/reliability.md,
"What is seen when"). The "network file system" is a FUSE passthrough (tests/fault/faultfs.cc,
no kernel caching of its own) whose underlying directory the test changes directly: inotify on
the passthrough's mount sees none of it, as on NFS.

- a planned file rewritten (same size, same mtime) or chmod 600: seen by its next planned read
  within 1.5 x fuse.stat_max_age plus one batch (fs/fresh/revalidate.h, Check);
- what the plan does not name (read past the plan, a listing, a deleted file): within
  fuse.revalidate_interval (the sweep);
- fuse.immutable: neither runs (the counters stay 0), as documented.
Runs as root; another user is played with setpriv."""
import errno
import os
import subprocess
import sys
import time
import unittest

import harness
from harness import ClairfsCase, config

FAULTFS = os.environ.get("FAULTFS_BIN") or os.path.join(harness.REPO, "build", "tests", "faultfs")
NOBODY = 65534
PLANNED_BOUND = 2.0  # seconds: stat_max_age 1 s -> 1.5 s plus a batch (docs/reliability.md)
FILE_SIZE = 64 * 1024

# Run as another user: prints the first bytes' length or "ERRNO n". No stat before the open.
CHILD = r"""
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
    try:
        sys.stdout.write(str(len(os.read(fd, 1 << 16))))
    finally:
        os.close(fd)
except OSError as e:
    sys.stdout.write("ERRNO %d" % e.errno)
"""


def read_as(uid, path):
    r = subprocess.run(harness.setpriv(uid) + [sys.executable, "-I", "-S", "-c", CHILD, path],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"child failed: {r.stderr}")
    return r.stdout


def data_for(name, version):
    block = f"{name}:{version}:".encode()
    return (block * (FILE_SIZE // len(block) + 1))[:FILE_SIZE]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def read_polled(path):
    """read(), or None for ESTALE: a poll that overlaps the moment the old version's pages
    are dropped may have copied old pages already, and gets the error rather than a mix
    (docs/reliability.md, "In-place rewrites under readers"). Reads after it are clean."""
    try:
        return read(path)
    except OSError as e:
        if e.errno != errno.ESTALE:
            raise
        return None


class FreshnessBase(ClairfsCase):
    """The "network file system" and the daemon over it. layout() names the files: planned
    (read by the plan) and unplanned; their bytes are data_for(rel, 1), their modes 0644."""

    def layout(self):
        return [f"d/f{i:02d}" for i in range(10)], ["x/u0", "x/u1", "x/u2"]

    def setUp(self):
        super().setUp()
        if not os.access(FAULTFS, os.X_OK):
            self.skipTest(f"faultfs is not built ({FAULTFS})")
        if subprocess.run(["which", "setpriv"], capture_output=True).returncode != 0:
            self.skipTest("setpriv is missing")
        self.work = self.tmpdir("fresh")
        os.chmod(self.work, 0o755)
        self.src = os.path.join(self.work, "src")  # the other node's view: changed directly
        self.planned, self.unplanned = self.layout()
        for rel in self.planned + self.unplanned:
            os.makedirs(os.path.dirname(os.path.join(self.src, rel)), exist_ok=True)
            with open(os.path.join(self.src, rel), "wb") as f:
                f.write(self.data_for(rel, 1))
            os.chmod(os.path.join(self.src, rel), 0o644)
        for d, _, _ in os.walk(self.src):
            os.chmod(d, 0o755)
        self.backend = os.path.join(self.work, "backend")
        os.mkdir(self.backend)
        rules = os.path.join(self.work, "rules")
        open(rules, "w").close()
        log = open(os.path.join(self.work, "faultfs.log"), "wb")
        self.addCleanup(log.close)
        p = subprocess.Popen([FAULTFS, "-f", f"--rules={rules}", "-o",
                              "max_threads=16,fsname=faultfs", self.src, self.backend],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        harness.register_proc(p)
        harness.register_mount(self.backend)

        def stop_backend():
            harness.release_mount(self.backend)
            harness.release_proc(p, grace=5)
        self.addCleanup(stop_backend)  # runs after the clairfs daemon's stop (LIFO)
        harness.wait_for(lambda: harness.is_fuse_mounted(self.backend) or p.poll() is not None,
                         10, "faultfs to mount")
        self.assertIsNone(p.poll(), "faultfs exited")

    def start(self, **fuse):
        cfg = config(ram="16MiB", staging="4MiB")
        cfg["fuse"].update(fuse)
        self.mnt = os.path.join(self.work, "mnt")
        os.makedirs(self.mnt, exist_ok=True)
        self.mount(self.backend, self.mnt, cfg=cfg)
        return self.mnt

    def at(self, rel):
        return os.path.join(self.mnt, rel)

    def data_for(self, rel, version):
        return data_for(rel, version)

    def until(self, cond, limit, what):
        """Seconds until cond() held (polled), or fails after limit seconds."""
        t0 = time.monotonic()
        harness.wait_for(cond, limit, what)
        return time.monotonic() - t0


class Freshness(FreshnessBase):
    def plan_two_epochs_and_read_the_first(self):
        text = "".join("#epoch\n" + "\n".join(self.planned) + "\n" for _ in range(2))
        self.write_manifest(self.mnt, text)
        for rel in self.planned:  # epoch 1: the kernel keeps names, attributes and pages
            self.assertEqual(read(self.at(rel)), data_for(rel, 1), rel)
            self.assertEqual(read_as(NOBODY, self.at(rel)), str(FILE_SIZE), rel)

    def test_planned_file_rewritten_elsewhere_is_read_new_within_the_bound(self):
        self.start(revalidate_interval=3600)  # the sweep cannot explain what is seen
        self.plan_two_epochs_and_read_the_first()
        rel = self.planned[3]
        before = self.stats(self.mnt)
        harness.rewrite_in_place(os.path.join(self.src, rel), data_for(rel, 2))
        changed = time.monotonic()
        seen = self.until(lambda: read_polled(self.at(rel)) == data_for(rel, 2), 10,
                          "the planned read to see the rewrite")
        print(f"\n  planned rewrite seen after {seen:.2f} s", file=sys.stderr)
        self.assertLessEqual(seen, PLANNED_BOUND)
        # Whatever the polling did, a read PLANNED_BOUND after the change sees it.
        harness.wait_for(lambda: time.monotonic() - changed >= PLANNED_BOUND, 5, "the bound")
        self.assertEqual(read(self.at(rel)), data_for(rel, 2))
        self.assertEqual(read(self.at(self.planned[4])), data_for(self.planned[4], 1))
        after = self.stats(self.mnt)
        fresh = after["fresh"]
        # The check ahead found the change and dropped the kernel's pages; or the kernel let
        # them go on its own (memory pressure on a loaded machine), and a read reached the
        # daemon, which checks the version of every read it serves.
        self.assertTrue(fresh["invalidated"] >= 1 or
                        after["read_requests"] > before["read_requests"], (before, after))
        self.assertGreater(fresh["checked"], 0, fresh)

    def test_planned_file_revoked_elsewhere_is_refused_within_the_bound(self):
        self.start(revalidate_interval=3600)
        self.plan_two_epochs_and_read_the_first()
        rel = self.planned[5]
        os.chmod(os.path.join(self.src, rel), 0o600)
        seen = self.until(lambda: read_as(NOBODY, self.at(rel)) == f"ERRNO {errno.EACCES}", 10,
                          "another user to be refused")
        print(f"\n  planned revocation seen after {seen:.2f} s", file=sys.stderr)
        self.assertLessEqual(seen, PLANNED_BOUND + 0.5)  # + one setpriv'd reader's start
        self.assertEqual(read(self.at(rel)), data_for(rel, 1))  # the owner (root) still reads
        self.assertEqual(read_as(NOBODY, self.at(self.planned[6])), str(FILE_SIZE))

    def test_unplanned_changes_deletions_and_listings_are_seen_within_the_sweep(self):
        interval = 2.0
        self.start(revalidate_interval=interval)
        for rel in self.unplanned:  # no plan names them: only the sweep can tell
            self.assertEqual(read(self.at(rel)), data_for(rel, 1))
            self.assertEqual(read_as(NOBODY, self.at(rel)), str(FILE_SIZE))
        self.assertEqual(sorted(os.listdir(self.at("x"))), ["u0", "u1", "u2"])
        harness.rewrite_in_place(os.path.join(self.src, "x/u0"), data_for("x/u0", 2))
        os.unlink(os.path.join(self.src, "x/u1"))
        os.chmod(os.path.join(self.src, "x/u2"), 0o600)
        with open(os.path.join(self.src, "x/new"), "wb") as f:
            f.write(b"new")

        def all_seen():
            try:
                if read(self.at("x/u0")) != data_for("x/u0", 2):
                    return False
            except OSError:
                return False
            return (not os.path.exists(self.at("x/u1")) and
                    sorted(os.listdir(self.at("x"))) == ["new", "u0", "u2"] and
                    read_as(NOBODY, self.at("x/u2")) == f"ERRNO {errno.EACCES}")
        seen = self.until(all_seen, interval + 8, "the sweep to show every change")
        print(f"\n  unplanned changes seen after {seen:.2f} s (interval {interval} s)",
              file=sys.stderr)
        self.assertLessEqual(seen, interval + 1.0)
        fresh = self.stats(self.mnt)["fresh"]
        self.assertGreater(fresh["swept"], 0, fresh)
        self.assertGreaterEqual(fresh["rounds"], 1, fresh)
        self.assertGreaterEqual(fresh["invalidated"], 2, fresh)  # u0, u2 (and x's listing)
        self.assertGreaterEqual(fresh["entries"], 1, fresh)      # u1
        self.assertIn("clairfs_fresh_swept_total", self.control_read(self.mnt, "metrics"))

    def test_per_open_reads_at_the_next_open_and_stat_follows_within_the_sweep(self):
        interval = 2.0
        self.start(open_mode="per_open", revalidate_interval=interval)
        rel = "x/u0"
        self.assertEqual(read(self.at(rel)), data_for(rel, 1))
        self.assertEqual(os.stat(self.at(rel)).st_size, FILE_SIZE)
        with open(os.path.join(self.src, rel), "ab") as f:  # grows elsewhere
            f.write(b"tail")
        # Every open reaches the daemon, which binds the current version (close-to-open).
        self.assertEqual(read(self.at(rel)), data_for(rel, 1) + b"tail")
        self.assertEqual(os.stat(self.at("x/u1")).st_mode & 0o777, 0o644)  # now cached
        os.chmod(os.path.join(self.src, "x/u1"), 0o600)
        # A stat answered from the kernel's attributes follows within the sweep.
        seen = self.until(lambda: os.stat(self.at("x/u1")).st_mode & 0o777 == 0o600,
                          interval + 8, "stat to show the new mode")
        self.assertLessEqual(seen, interval + 1.0)
        self.assertGreaterEqual(self.stats(self.mnt)["fresh"]["swept"], 1)

    def test_immutable_turns_the_sweep_and_the_checks_ahead_off(self):
        self.start(immutable=True, revalidate_interval=0.2, stat_max_age=0.1)
        self.plan_two_epochs_and_read_the_first()
        rel = self.planned[2]
        harness.rewrite_in_place(os.path.join(self.src, rel), data_for(rel, 2))
        # Longer than several sweeps and checks would take: nothing runs, so nothing is told
        # and the kernel keeps serving what it holds (the documented trade-off).
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            fresh = self.stats(self.mnt)["fresh"]
            self.assertEqual(fresh, {k: 0 for k in fresh}, fresh)
            time.sleep(0.1)
        # The kernel keeps serving what it holds. (Should it have let a page go, its READ
        # reaches the daemon, which binds the file as it is now and refuses pages of two
        # versions in one read(): ESTALE, never a mix; seen once on a loaded machine.)
        got = read_polled(self.at(rel))
        self.assertTrue(got is None or got == data_for(rel, 1),
                        "neither the version the kernel held nor ESTALE")


if __name__ == "__main__":
    unittest.main()
