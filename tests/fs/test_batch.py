"""Issue 40: the batch path (docs/batch-path.md) on a real mount. A client finds the socket
through `<mount>/.clairfs/batch`, reads a batch and gets exactly the files' bytes (per-sample
errors for the rest), counted in stats; batch.enabled: false leaves the file out; as root, another
user gets what the mount would give it (EACCES for a 0600 file, the bytes of a 0644 one)."""
import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
import unittest

import harness
from batchutil import Client
from harness import ClairfsCase, config

HERE = os.path.dirname(os.path.abspath(__file__))
USER = 64125  # ids without accounts: setpriv needs none
GROUP = 64126


def batch_as(uid, sock, paths, groups=()):
    """What a batch read of paths gives uid (with supplementary groups) through sock."""
    r = subprocess.run(harness.setpriv(uid, groups) + [sys.executable, "-I", "-S",
                                                       os.path.join(HERE, "batchutil.py"), sock,
                                                       *paths],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"batch child as uid {uid} failed: {r.stderr}")
    return json.loads(r.stdout)


class BatchTest(ClairfsCase):
    def setUp(self):
        super().setUp()
        base = self.tmpdir("batch")
        os.chmod(base, 0o755)  # another user must reach the dataset and the mountpoint
        self.ds = os.path.join(base, "ds")
        self.mnt = os.path.join(base, "m")
        os.mkdir(self.ds, 0o755)
        os.mkdir(self.mnt, 0o755)
        self.files = {}
        for i in range(40):
            rel = f"d{i % 4}/f{i}.bin"
            self.put(rel, os.urandom(1000 + 997 * i))

    def put(self, rel, data, mode=0o644):
        path = os.path.join(self.ds, rel)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        self.files[rel] = data
        return path

    def socket_path(self):
        text = self.control_read(self.mnt, "batch")
        self.assertTrue(text.endswith("\n"), text)
        path = text[:-1]
        self.assertTrue(os.path.isabs(path), path)
        self.assertTrue(stat.S_ISSOCK(os.lstat(path).st_mode), path)
        return path

    def test_batch_reads_the_files(self):
        self.mount(self.ds, self.mnt)
        sock = self.socket_path()
        self.assertIn("batch", os.listdir(os.path.join(self.mnt, ".clairfs")))
        c = Client(sock)
        self.addCleanup(c.close)
        names = sorted(self.files)
        got = c.read(names)
        self.assertEqual([e for e, _ in got], [0] * len(names))
        for name, (_, data) in zip(names, got):
            self.assertEqual(data, self.files[name], name)
            with open(os.path.join(self.mnt, name), "rb") as f:
                self.assertEqual(data, f.read(), name)
        os.symlink("f0.bin", os.path.join(self.ds, "d0", "link"))
        errs = [e for e, _ in c.read(["missing", "../x", "d0/link", "d0", ".clairfs/stats",
                                      ("d1/f1.bin", 10, 20)])]
        self.assertEqual(errs, [errno.ENOENT, errno.EINVAL, errno.ELOOP, errno.EINVAL,
                                errno.ELOOP, 0])
        s = self.stats(self.mnt)["batch"]
        self.assertGreaterEqual(s["connections"], 1)
        self.assertEqual(s["requests"], 2)
        self.assertEqual(s["samples"], len(names) + 1)
        self.assertEqual(s["errors"], 5)
        self.assertEqual(s["bytes"], sum(map(len, self.files.values())) + 20)
        metrics = self.control_read(self.mnt, "metrics")
        self.assertIn(f"clairfs_batch_samples_total {len(names) + 1}", metrics)

    def test_planned_reads_take_the_stats_made_ahead_and_see_a_change(self):
        """A batch reader reaches no kernel node, yet its directories are watched (as a LOOKUP
        has them watched), so the versions of a planned epoch come from the stats made ahead
        instead of a stat each; a file rewritten on this node is still read new."""
        names = sorted(self.files)
        self.mount(self.ds, self.mnt)
        self.write_manifest(self.mnt, "".join("#epoch\n" + "".join(n + "\n" for n in names)
                                              for _ in range(4)))
        c = Client(self.socket_path())
        self.addCleanup(c.close)
        got = c.read(names)  # epoch 1: the directories are watched from here on
        self.assertEqual([d for _, d in got], [self.files[n] for n in names])
        used = self.stats(self.mnt)["stat_ahead"]["used"]
        got = c.read(names)  # epoch 2
        self.assertEqual([d for _, d in got], [self.files[n] for n in names])
        gained = self.stats(self.mnt)["stat_ahead"]["used"] - used
        self.assertGreaterEqual(gained, len(names) // 2,
                                f"versions from stats made ahead: {self.stats(self.mnt)}")
        new = os.urandom(5000)
        self.put(names[3], new)
        got = c.read(names)  # epoch 3
        self.assertEqual(got[3], (0, new))

    def test_stop_with_clients_connected(self):
        """An unmount with a client idle and one mid-frame: the daemon stops within its grace,
        the socket goes with it, and the clients see the connection end."""
        d = self.mount(self.ds, self.mnt)
        sock = self.socket_path()
        idle = Client(sock)
        self.addCleanup(idle.close)
        half = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(half.close)
        half.connect(sock)
        half.sendall(b"CFB1")  # a header begun, never finished
        proc = d.proc
        t0 = time.monotonic()
        harness.unmount(self.mnt)
        proc.wait(timeout=10)
        self.assertLess(time.monotonic() - t0, 5.0)
        self.assertEqual(proc.returncode, 0)
        self.assertFalse(os.path.exists(sock))
        with self.assertRaises(OSError):
            idle.read(["d0/f0.bin"])

    def test_a_socket_that_cannot_be_made_leaves_the_mount_serving(self):
        """Something else at the socket's path (here a directory): the batch path is off, said
        in the log, `.clairfs/batch` absent, and the mount serves as ever."""
        d = self.mount(self.ds, self.mnt)
        sock = self.socket_path()
        d.stop()
        os.mkdir(sock)
        self.addCleanup(os.rmdir, sock)
        d = self.mount(self.ds, self.mnt)
        self.assertFalse(os.path.exists(os.path.join(self.mnt, ".clairfs", "batch")))
        with open(os.path.join(self.mnt, "d0/f0.bin"), "rb") as f:
            self.assertEqual(f.read(), self.files["d0/f0.bin"])
        with open(d.log_path) as f:
            self.assertIn("the batch path is off", f.read())

    def test_disabled_leaves_the_control_file_out(self):
        self.mount(self.ds, self.mnt, cfg=config(batch={"enabled": False}))
        self.assertNotIn("batch", os.listdir(os.path.join(self.mnt, ".clairfs")))
        self.assertFalse(os.path.exists(os.path.join(self.mnt, ".clairfs", "batch")))

    @unittest.skipIf(os.geteuid() != 0 or shutil.which("setpriv") is None,
                     "needs root and setpriv (another user played by a child)")
    def test_another_user_gets_what_the_mount_gives_it(self):
        self.put("open/shared.bin", b"shared bytes", 0o644)
        self.put("open/private.bin", b"private bytes", 0o600)
        self.put("open/group.bin", b"members", 0o640)
        self.mount(self.ds, self.mnt)
        sock = self.socket_path()
        self.assertEqual(stat.S_IMODE(os.lstat(sock).st_mode), 0o666)  # root: allow_other
        got = batch_as(USER, sock, ["open/shared.bin", "open/private.bin"])
        self.assertEqual(got[0], [0, b"shared bytes".hex()])
        self.assertEqual(got[1], [errno.EACCES, ""])
        self.assertEqual(self.stats(self.mnt)["batch"]["denied"], 1)
        # A group's file: its members (a supplementary group, as the kernel names it at
        # connect) read it, others are refused.
        os.chown(os.path.join(self.ds, "open/group.bin"), 0, GROUP)
        self.assertEqual(batch_as(USER, sock, ["open/group.bin"], groups=[GROUP]),
                         [[0, b"members".hex()]])
        self.assertEqual(batch_as(USER, sock, ["open/group.bin"]), [[errno.EACCES, ""]])
        # Root itself (the daemon's user) reads both.
        c = Client(sock)
        self.addCleanup(c.close)
        self.assertEqual(c.read(["open/private.bin"]), [(0, b"private bytes")])


if __name__ == "__main__":
    unittest.main()
