"""What clairfs can observe when the kernel serves reads from its page cache, that the
daemon holds no descriptor per file, and its signals: SIGHUP reopens the log, SIGTERM, SIGINT
and fusermount3 -u stop it within a few seconds, also with I/O stuck in the backing store."""
import os
import resource
import signal
import subprocess
import sys
import threading
import time

import harness
from harness import ClairfsCase, config, wait_for
import treeutil as tu


def put(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tu.write_file(path, data)


class PageCacheSignalsTest(ClairfsCase):
    def test_open_is_seen_when_reads_are_not(self):
        ds = os.path.join(self.tmpdir("sig"), "ds")
        files = {f"f{i}.bin": os.urandom(50_000 + i) for i in range(20)}
        for rel, data in files.items():
            put(os.path.join(ds, rel), data)
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        # per_open: the subject is what an OPEN tells the daemon (none mode: test_no_open).
        self.mount(ds, mnt, cfg=config(keep_cache=True, open_mode="per_open"))
        names = sorted(files)
        self.write_manifest(mnt, "#epoch\n" + "\n".join(names) + "\n#epoch\n" + "\n".join(names) + "\n")
        for epoch in range(2):
            for rel in names:
                with open(os.path.join(mnt, rel), "rb") as f:
                    self.assertEqual(f.read(), files[rel])
            if epoch == 0:
                first = self.stats(mnt)
        stats = self.stats(mnt)
        total = sum(len(d) for d in files.values())
        # Every open reaches the daemon, so the plan advances through both epochs ...
        self.assertEqual(stats["file_reads"], 40, stats)
        self.assertEqual(stats["prefetch"]["position"], 40, stats)
        self.assertEqual(stats["prefetch"]["epoch"], 2, stats)
        # ... but the second epoch's bytes came from the page cache without a read() call.
        self.assertEqual(first["bytes_read"], total, first)
        self.assertEqual(stats["bytes_read"], total, stats)


class NoDescriptorPerFileTest(ClairfsCase):
    NFILES = 5000

    def test_many_files_under_a_small_descriptor_limit(self):
        ds = os.path.join(self.tmpdir("fd"), "ds")
        for i in range(self.NFILES):
            put(os.path.join(ds, f"d{i % 50:02d}", f"f{i:05d}"), b"%d\n" % i)
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # inherited by the daemon
        try:
            d = self.mount(ds, mnt, cfg=config())
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        with open(f"/proc/{d.proc.pid}/limits") as f:
            limit = next(line for line in f if line.startswith("Max open files"))
        self.assertEqual(int(limit.split()[3]), 256, limit)
        names = sorted(f"d{i % 50:02d}/f{i:05d}" for i in range(self.NFILES))
        self.write_manifest(mnt, "\n".join(names) + "\n")
        seen = sorted(os.path.relpath(os.path.join(r, n), mnt)
                      for r, _, ns in os.walk(mnt) for n in ns)
        self.assertEqual(seen, names)
        held = [open(os.path.join(mnt, n), "rb") for n in names[:100]]
        try:
            for rel in names:
                with open(os.path.join(mnt, rel), "rb") as f:
                    self.assertEqual(f.read(), b"%d\n" % int(rel[-5:]))
        finally:
            for f in held:
                f.close()
        fds = len(os.listdir(f"/proc/{d.proc.pid}/fd"))
        self.assertLess(fds, 64, f"daemon holds {fds} descriptors")
        stats = self.stats(mnt)
        # No-open mode (the default): the held opens reach no daemon; each file's read does.
        self.assertEqual(stats["file_reads"], self.NFILES, stats)
        self.assertEqual(stats["errors"]["fetch"], 0, stats)


# ---------------------------------------------------------------------------- process life

STOP_GRACE = 5.0  # the daemon's kStopGrace (daemon/serve.cc)


def blocked_in_fuse_request(pid):
    """True when a thread of pid waits for the answer to a FUSE request (the stalled mount)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                if f.read().strip() == "request_wait_answer":
                    return True
        except OSError:
            pass
    return False




class SighupTest(ClairfsCase):
    """SIGHUP reopens log.file (logrotate renames it first); without a file it is logged."""

    def test_sighup_reopens_the_log_file(self):
        base = self.tmpdir("hup")
        ds = os.path.join(base, "ds")
        put(os.path.join(ds, "a"), b"alpha")
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        log = os.path.join(base, "clairfs.log")
        d = self.mount(ds, mnt, cfg=config(log_file=log))
        # The mount is visible a moment before the daemon logs that it serves: wait for that
        # line, so that it is in the file renamed below.
        wait_for(lambda: "serving" in harness.read_tail(log), 10, "the serving line")
        os.rename(log, log + ".1")
        os.kill(d.proc.pid, signal.SIGHUP)
        wait_for(lambda: os.path.exists(log), 5, "the reopened log file")
        wait_for(lambda: "reopened the log file" in harness.read_tail(log), 5, "the reopen line")
        with open(os.path.join(mnt, "a"), "rb") as f:
            self.assertEqual(f.read(), b"alpha")
        self.assertIn("serving", harness.read_tail(log + ".1"))
        self.assertIsNone(d.proc.poll(), "SIGHUP stopped the daemon")
        proc = d.proc
        d.stop()
        self.assertEqual(proc.returncode, 0)
        self.assertIn("clairfs stopped", harness.read_tail(log))

    def test_sighup_without_a_log_file(self):
        base = self.tmpdir("hup2")
        ds = os.path.join(base, "ds")
        put(os.path.join(ds, "a"), b"alpha")
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        d = self.mount(ds, mnt, cfg=config())
        os.kill(d.proc.pid, signal.SIGHUP)
        wait_for(lambda: "SIGHUP received" in harness.read_tail(d.log_path), 5, "the SIGHUP line")
        with open(os.path.join(mnt, "a"), "rb") as f:
            self.assertEqual(f.read(), b"alpha")
        self.assertIsNone(d.proc.poll(), "SIGHUP stopped the daemon")


class StopTest(ClairfsCase):
    """A daemon asked to stop exits within a few seconds, also with I/O stuck in its backing
    store: clairfs B serves the mount of clairfs A, whose daemon is SIGSTOP'd."""

    def test_sigterm_and_sigint_stop_cleanly(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(signal=sig.name):
                base = self.tmpdir("term")
                ds = os.path.join(base, "ds")
                put(os.path.join(ds, "a"), b"alpha")
                mnt = os.path.join(base, "mnt")
                os.mkdir(mnt)
                d = self.mount(ds, mnt, cfg=config())
                start = time.monotonic()
                os.kill(d.proc.pid, sig)
                rc = d.proc.wait(timeout=STOP_GRACE + 5)
                self.assertLess(time.monotonic() - start, STOP_GRACE)
                self.assertEqual(rc, 0, harness.read_tail(d.log_path))
                self.assertFalse(harness.is_fuse_mounted(mnt))
                self.assertIn("clairfs stopped", harness.read_tail(d.log_path))

    def stalled_pair(self, names):
        base = self.tmpdir("stall")
        data = os.path.join(base, "D")
        files = {n: os.urandom(100_000) for n in names}
        for n, b in files.items():
            put(os.path.join(data, n), b)
        mnt_a, mnt_b = os.path.join(base, "A"), os.path.join(base, "B")
        os.mkdir(mnt_a)
        os.mkdir(mnt_b)
        a = self.mount(data, mnt_a, cfg=config())
        cfg_b = config()
        cfg_b["cache"]["fetch_timeout"] = 60  # longer than the stop's grace
        b = self.mount(mnt_a, mnt_b, cfg=cfg_b)
        # Registered after the mounts, so it runs before their cleanups.
        self.addCleanup(self.resume, a)
        return a, b, mnt_a, mnt_b, files

    def resume(self, a):
        if a.proc is not None and a.proc.poll() is None:
            os.kill(a.proc.pid, signal.SIGCONT)

    def assert_gone_soon(self, b, mnt_b, start):
        try:
            rc = b.proc.wait(timeout=STOP_GRACE + 5)
        except subprocess.TimeoutExpired:
            self.fail(f"daemon still running {STOP_GRACE + 5}s after the stop; log:\n"
                      f"{harness.read_tail(b.log_path)}")
        elapsed = time.monotonic() - start
        log = harness.read_tail(b.log_path)
        print(f"\n  stop with a stuck backend: exit {rc} after {elapsed:.2f}s", file=sys.stderr)
        self.assertLess(elapsed, STOP_GRACE + 3, log)
        # 1 with the stop's own deadline; 0 if a per-read deadline of the backing store freed
        # the stuck thread first.
        self.assertIn(rc, (0, 1), log)
        if rc == 1:
            self.assertIn("did not end within", log)
        self.assertFalse(harness.is_fuse_mounted(mnt_b), f"mount left behind; log:\n{log}")

    def test_sigterm_with_a_read_stuck_in_the_backing_store(self):
        a, b, mnt_a, mnt_b, files = self.stalled_pair(["f0", "f1"])
        os.stat(os.path.join(mnt_b, "f0"))  # the lookup is cached; the open will reach A
        harness.stop_process(a.proc.pid)
        outcome = {}

        def reader():
            try:
                with open(os.path.join(mnt_b, "f0"), "rb") as f:
                    outcome["data"] = f.read()
            except OSError as e:
                outcome["error"] = e

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        self.addCleanup(t.join, 20)
        wait_for(lambda: blocked_in_fuse_request(b.proc.pid), 10, "B to block on A")
        start = time.monotonic()
        os.kill(b.proc.pid, signal.SIGTERM)
        self.assert_gone_soon(b, mnt_b, start)
        t.join(10)
        self.assertFalse(t.is_alive(), "the reader is still blocked after the daemon left")
        self.assertIn("error", outcome, "the read succeeded from a stalled backend")

    def test_unmount_with_a_prefetch_stuck_in_the_backing_store(self):
        names = [f"f{i}" for i in range(8)]
        a, b, mnt_a, mnt_b, files = self.stalled_pair(names)
        for n in names:  # attributes cached in A's kernel mount: the manifest check needs no A
            os.stat(os.path.join(mnt_a, n))
        harness.stop_process(a.proc.pid)
        self.write_manifest(mnt_b, "\n".join(names) + "\n")
        wait_for(lambda: blocked_in_fuse_request(b.proc.pid), 10, "B's prefetch to block on A")
        start = time.monotonic()
        r = subprocess.run(["fusermount3", "-u", mnt_b], capture_output=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_gone_soon(b, mnt_b, start)
