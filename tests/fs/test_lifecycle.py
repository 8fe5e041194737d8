"""Tests 8, 9, 10: mounting over the dataset, start-up errors, daemon mode; hostile path
names, an unopenable log file and out-of-range values."""
import errno
import os
import random
import signal
import subprocess
import time

import harness
from harness import ClairfsCase, config, write_config
import treeutil as tu

FIELDS = ("type", "mode", "size", "mtime_ns", "nlink", "uid", "gid", "target")


def small_dataset(base, n=40):
    rng = random.Random(8)
    ds = os.path.join(base, "ds")
    for i in range(n):
        rel = os.path.join(f"class{i % 4}", f"img{i:03d}.jpg")
        os.makedirs(os.path.dirname(os.path.join(ds, rel)), exist_ok=True)
        tu.write_file(os.path.join(ds, rel), rng.randbytes(rng.randint(1, 100_000)))
    os.symlink("class0/img000.jpg", os.path.join(ds, "first"))
    return ds


def clairfs_pids(mountpoint):
    out = subprocess.run(["pgrep", "-f", mountpoint], capture_output=True, text=True)
    pids = []
    for tok in out.stdout.split():
        try:
            exe = os.readlink(f"/proc/{tok}/exe")
        except OSError:
            continue
        if os.path.realpath(exe) == os.path.realpath(harness.BIN):
            pids.append(int(tok))
    return pids


def run_clairfs(case, base, argv, mnt, foreground):
    """Runs clairfs to its end (10 s at most); returns (exit status or None, stderr, seconds)."""
    out_path = os.path.join(base, f"out-{time.monotonic_ns()}.txt")
    args = [harness.BIN] + (["-f"] if foreground else []) + argv
    start = time.monotonic()
    with open(out_path, "wb") as out:
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=out, start_new_session=True)
        harness.register_proc(p)
        harness.register_mount(mnt)
        case.addCleanup(harness.release_mount, mnt)
        case.addCleanup(harness.release_proc, p, 0)
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = None
        harness.release_mount(mnt)   # so that the next case starts clean
        harness.release_proc(p, 0)
    elapsed = time.monotonic() - start
    with open(out_path, "rb") as f:
        err = f.read().decode("utf-8", "replace")
    return rc, err, elapsed


class MountOverDatasetTest(ClairfsCase):
    """Test 8: clairfs DATASET without MOUNTPOINT mounts over the dataset path itself."""

    def test_mount_over_dataset(self):
        base = self.tmpdir("over")
        ds = small_dataset(base)
        before = tu.snapshot(ds)
        before_hashes = tu.hashes(ds, before)
        d = self.mount(ds, None, workdir=base)
        self.assertTrue(harness.is_fuse_mounted(ds))
        self.assertTrue(os.path.ismount(ds))
        self.assertEqual(tu.diff(before, tu.snapshot(ds), FIELDS), [])
        self.assertEqual(tu.diff(before_hashes, tu.hashes(ds, before)), [])
        stats = self.stats(ds)
        self.assertGreaterEqual(stats["file_reads"], len(before_hashes), stats)
        proc = d.proc
        d.stop()
        self.assertFalse(harness.is_fuse_mounted(ds))
        self.assertEqual(proc.returncode, 0, "daemon exit status after fusermount3 -u")
        self.assertEqual(tu.diff(before, tu.snapshot(ds), FIELDS), [])
        self.assertEqual(tu.diff(before_hashes, tu.hashes(ds, before)), [])


class StartupErrorTest(ClairfsCase):
    """Test 9: bad start-up input exits non-zero quickly, says why, leaves no mount."""

    def run_clairfs(self, base, argv, mnt, foreground):
        return run_clairfs(self, base, argv, mnt, foreground)

    def test_startup_errors(self):
        base = self.tmpdir("err")
        ds = small_dataset(base, n=4)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        good = write_config(os.path.join(base, "good.yaml"), config())
        unknown = write_config(os.path.join(base, "unknown.yaml"),
                               "fuse:\n  threads: 2\n  treads: 4\n")
        unknown_top = write_config(os.path.join(base, "unknown_top.yaml"),
                                   "cachee:\n  demand_threads: 2\n")
        bad_unit = config()
        bad_unit["cache"]["tiers"][0]["capacity"] = "12XB"
        bad_unit = write_config(os.path.join(base, "bad_unit.yaml"), bad_unit)
        missing_ds = os.path.join(base, "nope_dataset")
        # Exit status: 66 for a dataset that is not there, 78 for a configuration error
        # (daemon/command_line.h).
        cases = [
            ("nonexistent dataset", ["-c", good, missing_ds, mnt], ["nope_dataset"], 66),
            ("unknown key", ["-c", unknown, ds, mnt], ["treads"], 78),
            ("unknown top-level key", ["-c", unknown_top, ds, mnt], ["cachee"], 78),
            ("bad size unit", ["-c", bad_unit, ds, mnt], ["capacity"], 78),
            ("missing config file", ["-c", os.path.join(base, "none.yaml"), ds, mnt],
             ["none.yaml", "No such file"], 78),
        ]
        for name, argv, needles, code in cases:
            for fg in (True, False):
                with self.subTest(case=name, foreground=fg):
                    rc, err, elapsed = self.run_clairfs(base, argv, mnt, fg)
                    self.assertIsNotNone(rc, f"{name}: still running after 10s; stderr {err!r}")
                    self.assertEqual(rc, code, f"{name}: stderr {err!r}")
                    self.assertLess(elapsed, 5.0, name)
                    for needle in needles:
                        self.assertIn(needle, err, f"{name}: stderr does not name it")
                    self.assertFalse(harness.is_fuse_mounted(mnt), f"{name}: left a mount")
                    self.assertFalse(harness.is_fuse_mounted(ds), f"{name}: mounted over ds")
                    self.assertEqual(clairfs_pids(mnt), [], f"{name}: left a process")


class DaemonModeTest(ClairfsCase):
    """Test 10: without -f, clairfs returns 0 once mounted; fusermount3 -u ends the daemon."""

    def start_daemon(self, base, ds, cfg_extra=None):
        """Starts clairfs without -f; returns (mountpoint, daemon pids) once it returned 0."""
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        log = os.path.join(base, "daemon.log")
        cfg = config(log_file=log)
        cfg.update(cfg_extra or {})
        cfg_path = write_config(os.path.join(base, "cfg.yaml"), cfg)
        harness.register_mount(mnt)
        self.addCleanup(self.collect_log, log)
        self.addCleanup(self.kill_leftovers, mnt)
        self.addCleanup(harness.release_mount, mnt)
        out_path = os.path.join(base, "stderr.txt")
        with open(out_path, "wb") as out:
            try:
                rc = subprocess.run([harness.BIN, "-c", cfg_path, ds, mnt],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    timeout=20).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        mounted = harness.is_fuse_mounted(mnt)
        with open(out_path, "rb") as f:
            err = f.read().decode("utf-8", "replace")
        self.assertEqual(rc, 0, f"stderr: {err!r}")
        self.assertTrue(mounted, "not mounted when clairfs returned")
        self.assertTrue(os.path.ismount(mnt))
        pids = clairfs_pids(mnt)
        self.assertEqual(len(pids), 1, f"daemon processes for {mnt}: {pids}")
        for pid in pids:
            harness.register_proc(pid)
        return mnt, pids

    def stop_daemon(self, mnt, pids):
        r = subprocess.run(["fusermount3", "-u", mnt], capture_output=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(harness.pid_alive(p) for p in pids):
            time.sleep(0.05)
        self.assertFalse([p for p in pids if harness.pid_alive(p)],
                         "daemon still running 10s after fusermount3 -u")
        self.assertFalse(harness.is_fuse_mounted(mnt))

    def test_daemon_mode(self):
        base = self.tmpdir("dmn")
        ds = small_dataset(base, n=8)
        mnt, pids = self.start_daemon(base, ds)
        with open(os.path.join(mnt, "first"), "rb") as f:
            with open(os.path.join(ds, "first"), "rb") as g:
                self.assertEqual(f.read(), g.read())
        self.assertIn("file_reads", self.stats(mnt))
        self.stop_daemon(mnt, pids)

    def test_daemon_mode_with_ssd_tier(self):
        """RocksDB's threads must exist in the daemon, not only in the process that forked it:
        64 MiB through a 4 MiB RAM tier make the SSD tier flush its memtables."""
        base = self.tmpdir("dmn-ssd")
        ds = os.path.join(base, "data")
        os.mkdir(ds)
        names = [f"f{i:02d}" for i in range(64)]
        for i, n in enumerate(names):
            with open(os.path.join(ds, n), "wb") as f:
                f.write(bytes([i]) * (1 << 20))
        extra = {"cache": {"tiers": [{"kind": "ram", "capacity": "4MiB"},
                                     {"kind": "ssd", "capacity": "96MiB",
                                      "dir": os.path.join(base, "ssd")}],
                           "staging": {"capacity": "4MiB"}, "fetch_timeout": 20}}
        mnt, pids = self.start_daemon(base, ds, extra)
        self.write_manifest(mnt, "\n".join(names) + "\n")
        deadline = time.monotonic() + 60
        while self.stats(mnt)["tiers"][1]["bytes"] < 58 << 20:
            self.assertLess(time.monotonic(), deadline, f"SSD fill stalled: {self.stats(mnt)}")
            time.sleep(0.1)
        for i, n in enumerate(names):
            with open(os.path.join(mnt, n), "rb") as f:
                self.assertEqual(f.read(), bytes([i]) * (1 << 20), n)
        self.assertGreater(self.stats(mnt)["served"]["ssd"], 50)
        self.stop_daemon(mnt, pids)

    def kill_leftovers(self, mnt):
        for pid in clairfs_pids(mnt):
            harness.register_proc(pid)
            harness.release_proc(pid, grace=0)
        with harness._lock:
            harness._procs[:] = [p for p in harness._procs
                                 if not (isinstance(p, int) and not harness.pid_alive(p))]

    def collect_log(self, log):
        harness.LOGS.setdefault(self.id(), []).append(("daemon.log", harness.read_tail(log)))


class HostileNamesTest(ClairfsCase):
    """Item 6: paths reach neither a shell nor the FUSE option string unescaped. A dataset and a
    mountpoint named with a comma, a quote, a space and a backslash mount, serve, show the
    right fsname, and a killed daemon's stale mount there is detached by the next start."""

    NAME = "a,b 'c\\d"

    def test_hostile_names(self):
        base = self.tmpdir("names")
        ds = os.path.join(base, "ds " + self.NAME)
        mnt = os.path.join(base, "mnt " + self.NAME)
        os.makedirs(os.path.join(ds, "sub"))
        os.mkdir(mnt)
        payload = os.urandom(70_000)
        tu.write_file(os.path.join(ds, "sub", "f " + self.NAME), payload)
        d = self.mount(ds, mnt)
        with open(os.path.join(mnt, "sub", "f " + self.NAME), "rb") as f:
            self.assertEqual(f.read(), payload)
        self.assertEqual(self.fsname(mnt), "clairfs:" + ds)

        cfg_path = d.argv[d.argv.index("-c") + 1]
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(timeout=10)
        with self.assertRaises(OSError) as cm:
            os.statvfs(mnt)
        self.assertEqual(cm.exception.errno, errno.ENOTCONN)
        # The next start detaches the stale mount (it mounts its own in its place).
        d2 = harness.Daemon(self.id(), self.tmpdir("d2"), ds, mnt, cfg_path)
        self.addCleanup(d2.stop)
        d2.start_over_stale()
        harness.wait_for(lambda: "serving" in harness.read_tail(d2.log_path), 5, "'serving'")
        self.assertIn("detached the stale mount", harness.read_tail(d2.log_path))
        layers = [m for m, _, _ in harness.fuse_mounts() if m == os.path.abspath(mnt)]
        self.assertEqual(len(layers), 1, f"FUSE mounts stacked at {mnt}: {layers}")
        with open(os.path.join(mnt, "sub", "f " + self.NAME), "rb") as f:
            self.assertEqual(f.read(), payload)
        self.assertEqual(self.fsname(mnt), "clairfs:" + ds)

    @staticmethod
    def fsname(mnt):
        """The mount source field of mnt's line in /proc/self/mountinfo, unescaped."""
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if harness.unescape_mountinfo(left.split()[4]) == os.path.abspath(mnt):
                    source = harness.unescape_mountinfo(right.split()[1])
        return source


class LogAndRangeErrorTest(ClairfsCase):
    """Item 11: an unopenable log.file and out-of-range values end the start with the key, the
    reason and a non-zero status, no core dump, no mount."""

    def test_unopenable_log_file_and_out_of_range_values(self):
        base = self.tmpdir("logerr")
        ds = small_dataset(base, n=4)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        bad_log = write_config(os.path.join(base, "bad_log.yaml"),
                               config(log_file=os.path.join(base, "no", "such", "dir.log")))
        dir_log = write_config(os.path.join(base, "dir_log.yaml"), config(log_file=base))
        tiny = config()
        tiny["cache"]["fetch_timeout"] = 0.0001
        tiny = write_config(os.path.join(base, "tiny.yaml"), tiny)
        huge = config()
        huge["cache"]["fetch_timeout"] = 1e300
        huge = write_config(os.path.join(base, "huge.yaml"), huge)
        cases = [
            ("log.file in a missing directory", bad_log, ["log.file", "No such file"]),
            ("log.file is a directory", dir_log, ["log.file", "Is a directory"]),
            ("fetch_timeout 1e-4", tiny, ["cache.fetch_timeout", "0.0001", "0.01"]),
            ("fetch_timeout 1e300", huge, ["cache.fetch_timeout", "1e+300", "86400"]),
        ]
        for name, cfg_path, needles in cases:
            for fg in (True, False):
                with self.subTest(case=name, foreground=fg):
                    rc, err, _ = run_clairfs(self, base, ["-c", cfg_path, ds, mnt], mnt, fg)
                    # 78: a configuration error (not 134, an abort)
                    self.assertEqual(rc, 78, f"{name}: stderr {err!r}")
                    for needle in needles:
                        self.assertIn(needle, err, name)
                    self.assertNotIn("terminate called", err, name)
                    self.assertFalse(harness.is_fuse_mounted(mnt), name)
