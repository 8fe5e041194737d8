"""Issue 14 items 8 and 9 on real mounts: a FIFO swapped in for a planned file, and a stalled
backing store below part of the dataset. Neither may hang a reader or the daemon."""
import errno
import os
import signal
import subprocess
import threading
import time

import harness
from harness import ClairfsCase, config, is_fuse_mounted


def data_of(i):
    return bytes((i * 31 + k) % 251 for k in range(20_000 + i * 1000))


def try_open_read(path, result, flags=os.O_RDONLY):
    """Opens and reads path, storing the bytes or the OSError in result["value"]."""
    try:
        fd = os.open(path, flags)
        try:
            result["value"] = os.read(fd, 1 << 20)
        finally:
            os.close(fd)
    except OSError as e:
        result["value"] = e


def in_thread(fn, *args):
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


class BackingFaultTest(ClairfsCase):

    def unmount_and_wait_exit(self, daemon, limit):
        """fusermount3 -u the daemon's mount; returns seconds until the daemon exited."""
        start = time.monotonic()
        subprocess.run(["fusermount3", "-u", daemon.mountpoint], timeout=20, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            daemon.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.fail(f"daemon still running {limit}s after fusermount3 -u")
        return time.monotonic() - start

    def test_fifo_swapped_in_for_planned_file(self):
        ds = self.tmpdir("ds")
        names = [f"f{i}" for i in range(8)]
        for i, n in enumerate(names):
            with open(os.path.join(ds, n), "wb") as f:
                f.write(data_of(i))
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        d = self.mount(ds, mnt)
        self.write_manifest(mnt, "\n".join(names) + "\n")
        for n in names:  # the kernel now knows each as a regular file
            os.stat(os.path.join(mnt, n))
        for n in ("f3", "f5"):
            os.unlink(os.path.join(ds, n))
            os.mkfifo(os.path.join(ds, n))
        # Before the fix, open() of the FIFO blocked a FUSE thread (and the daemon's stop) for
        # good. Now the stale node is refused (ESTALE), the kernel looks the name up again and
        # opens a FIFO of its own, as on the original: O_NONBLOCK so that its open does not
        # wait for a writer, as a native one would.
        results = [{} for _ in range(4)]
        threads = [in_thread(try_open_read, os.path.join(mnt, n), r, os.O_RDONLY | os.O_NONBLOCK)
                   for n, r in zip(("f3", "f5", "f3", "f5"), results)]
        for t in threads:
            t.join(timeout=10)
        self.assertFalse(any(t.is_alive() for t in threads), "open of a swapped-in FIFO hung")
        for r in results:  # nothing of the old file
            v = r["value"]
            if isinstance(v, OSError):
                # ESTALE: in no-open mode a read racing the backing watch (before it made the
                # kernel drop the old name) reaches the stale node (docs/architecture.md).
                self.assertIn(v.errno, (errno.EAGAIN, errno.EINVAL, errno.ESTALE), v)
            else:
                self.assertEqual(v, b"")
        for i, n in enumerate(names):
            if n in ("f3", "f5"):
                continue
            with open(os.path.join(mnt, n), "rb") as f:
                self.assertEqual(f.read(), data_of(i), n)
        took = self.unmount_and_wait_exit(d, 10)
        self.assertEqual(d.proc.returncode, 0)
        self.assertLess(took, 10)

    def test_stalled_backend_fails_at_deadline_others_served(self):
        base = self.tmpdir("stall")
        ds, src, mnt = (os.path.join(base, x) for x in ("ds", "src", "mnt"))
        for p in (ds, src, mnt, os.path.join(ds, "slow")):
            os.mkdir(p)
        with open(os.path.join(ds, "a"), "wb") as f:
            f.write(data_of(1))
        with open(os.path.join(src, "x"), "wb") as f:
            f.write(data_of(2))
        # Daemon A serves ds/slow; stopped, every access below ds/slow blocks in the kernel.
        lower = self.mount(src, os.path.join(ds, "slow"))
        self.addCleanup(os.kill, lower.proc.pid, signal.SIGCONT)  # runs before A's unmount
        cfg = config()
        cfg["cache"]["backing_timeout"] = 1
        d = self.mount(ds, mnt, cfg=cfg)
        harness.stop_process(lower.proc.pid)

        stuck = {}
        start = time.monotonic()
        t = in_thread(try_open_read, os.path.join(mnt, "slow", "x"), stuck)
        # Another file is served while that one is stuck.
        with open(os.path.join(mnt, "a"), "rb") as f:
            self.assertEqual(f.read(), data_of(1))
        t.join(timeout=15)
        took = time.monotonic() - start
        self.assertFalse(t.is_alive(), "a read below the stalled store hung")
        self.assertIsInstance(stuck["value"], OSError)
        self.assertEqual(stuck["value"].errno, errno.ETIMEDOUT, stuck["value"])
        self.assertLess(took, 1 + 5)
        self.assertGreaterEqual(self.stats(mnt)["errors"]["backing_timeout"], 1)
        # The daemon stops at once although one of its I/O threads is still stuck.
        self.unmount_and_wait_exit(d, 10)
        self.assertEqual(d.proc.returncode, 0)
        self.assertFalse(is_fuse_mounted(mnt))
