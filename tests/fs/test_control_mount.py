"""The control files' own mount (docs/control-interface.md, "Visibility"):
`.clairfs` is a symlink to it, hidden from the root's listing; `fusermount3 -u MNT` alone
removes both mounts; a killed daemon's stale control mount does not block the next start;
another user reads stats but may not write the manifest."""
import errno
import json
import os
import signal
import subprocess

import harness
from harness import ClairfsCase
import test_access
import treeutil as tu

CONTROL_TYPE = "fuse.clairfs-control"
NAMES = {"manifest", "stats", "plan", "errors", "metrics", "batch"}  # batch: batch.enabled (default)


def control_layers(path):
    """How many control mounts are stacked at path."""
    return sum(1 for m, t, _ in harness.fuse_mounts() if m == path and t == CONTROL_TYPE)


def watcher_pids(mnt):
    """The fusermount3 processes watching the control mount of mnt (auto_unmount)."""
    tag = ("clairfs-control:" + os.path.abspath(mnt)).encode()
    pids = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"fusermount3" and any(tag in a for a in argv):
            pids.append(int(pid))
    return pids


class ControlMountTest(ClairfsCase):
    def setup_mount(self):
        base = self.tmpdir("ctl")
        os.chmod(base, 0o755)  # other users must reach the mountpoint
        ds = os.path.join(base, "ds")
        os.makedirs(os.path.join(ds, "a"))
        tu.write_file(os.path.join(ds, "a", "f"), b"x" * 1000)
        mnt = os.path.join(base, "m")
        os.mkdir(mnt)
        d = self.mount(ds, mnt)
        ctl = os.readlink(os.path.join(mnt, ".clairfs"))
        # Whatever happens in the test, no control mount stays behind.
        self.addCleanup(lambda: control_layers(ctl) and harness.unmount(ctl))
        return ds, mnt, d, ctl

    def test_link_to_the_control_mount_hidden_from_the_listing(self):
        ds, mnt, _, ctl = self.setup_mount()
        link = os.path.join(mnt, ".clairfs")
        self.assertTrue(os.path.islink(link))
        self.assertTrue(os.path.isabs(ctl), ctl)
        self.assertEqual(control_layers(ctl), 1, harness.fuse_mounts())
        self.assertTrue(os.path.isdir(link))
        self.assertEqual(set(os.listdir(link)), NAMES)
        self.assertEqual(sorted(os.listdir(mnt)), ["a"])
        self.assertFalse([p for p, _, _ in os.walk(mnt) if ".clairfs" in p])
        # `mount` names the main mount the control files belong to.
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            sources = [harness.unescape_mountinfo(line.partition(" - ")[2].split()[1])
                       for line in f
                       if harness.unescape_mountinfo(line.split()[4]) == ctl]
        self.assertEqual(sources, ["clairfs-control:" + os.path.abspath(mnt)])
        # The manifest through the link: accepted, and the plan shows it.
        self.write_manifest(mnt, "a/f\n")
        self.assertEqual(self.plan(mnt)["files"], 1)
        with self.assertRaises(OSError) as cm:
            self.write_manifest(mnt, "a/missing\n")
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.assertIn("a/missing", self.control_read(mnt, "errors"))

    def test_fusermount_of_the_mount_removes_both(self):
        _, mnt, d, ctl = self.setup_mount()
        r = subprocess.run(["fusermount3", "-u", mnt], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(d.proc.wait(timeout=15), 0, harness.read_tail(d.log_path))
        self.assertFalse(harness.is_fuse_mounted(mnt))
        self.assertEqual(control_layers(ctl), 0, harness.fuse_mounts())
        self.assertFalse(os.path.exists(ctl), "the control mount's directory is left behind")

    def test_stop_with_a_writer_holding_the_manifest_open(self):
        _, mnt, d, ctl = self.setup_mount()
        fd = os.open(os.path.join(mnt, ".clairfs", "manifest"), os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, b"a/f\n")
            r = subprocess.run(["fusermount3", "-u", mnt], capture_output=True, text=True,
                               timeout=20)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(d.proc.wait(timeout=15), 0, harness.read_tail(d.log_path))
            self.assertEqual(control_layers(ctl), 0, harness.fuse_mounts())
            with self.assertRaises(OSError):  # the connection is gone
                os.write(fd, b"a/f\n")
        finally:
            try:
                os.close(fd)
            except OSError:
                pass

    def test_restart_after_sigkill(self):
        ds, mnt, d, ctl = self.setup_mount()
        cfg_path = d.argv[d.argv.index("-c") + 1]
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(timeout=10)
        # The control mount's auto_unmount watcher takes it away; the main mount stays stale.
        harness.wait_for(lambda: control_layers(ctl) == 0, 10, "the control mount to go")
        self.restart_over_stale(ds, mnt, cfg_path, ctl)

    def test_restart_after_sigkill_of_the_daemon_and_its_watcher(self):
        ds, mnt, d, ctl = self.setup_mount()
        cfg_path = d.argv[d.argv.index("-c") + 1]
        watchers = watcher_pids(mnt)
        self.assertEqual(len(watchers), 1, watchers)
        os.kill(watchers[0], signal.SIGKILL)
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(timeout=10)
        harness.wait_for(lambda: not harness.pid_alive(watchers[0]), 10, "the watcher to die")
        self.assertEqual(control_layers(ctl), 1)  # stale
        d2 = self.restart_over_stale(ds, mnt, cfg_path, ctl)
        self.assertIn("detached the stale control mount", harness.read_tail(d2.log_path))

    def restart_over_stale(self, ds, mnt, cfg_path, ctl):
        d2 = harness.Daemon(self.id(), self.tmpdir("d2"), ds, mnt, cfg_path)
        self.addCleanup(d2.stop)
        d2.start_over_stale()
        harness.wait_for(lambda: "serving" in harness.read_tail(d2.log_path), 5, "'serving'")
        self.assertEqual(os.readlink(os.path.join(mnt, ".clairfs")), ctl)
        self.assertEqual(control_layers(ctl), 1, harness.fuse_mounts())
        self.assertIn("file_reads", json.loads(self.control_read(mnt, "stats")))
        d2.stop()
        self.assertEqual(control_layers(ctl), 0, harness.fuse_mounts())
        return d2

    def test_other_user_reads_stats_but_not_writes_the_manifest(self):
        if test_access.usable():
            self.skipTest(test_access.usable())
        _, mnt, _, _ = self.setup_mount()
        self.write_manifest(mnt, "a/f\n")
        stats = json.loads(test_access.read_as(test_access.USER,
                                               os.path.join(mnt, ".clairfs", "stats")))
        self.assertIn("file_reads", stats)
        self.assertEqual(test_access.write_manifest_as(test_access.USER, mnt, "a/f\n"),
                         test_access.DENIED)
        self.assertEqual(self.plan(mnt)["files"], 1)
