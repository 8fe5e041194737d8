"""Issue 15, item 1: clairfs mounts like every FUSE file system. -o before and after the
paths, config keys as -o key=value, config= as fstab and mount(8) pass it, -o ro keeping
registration working, auto_unmount, and exit codes that say why a start failed."""
import os
import shutil
import signal
import subprocess
import time

import harness
from harness import ClairfsCase, config, write_config
from test_lifecycle import clairfs_pids, run_clairfs, small_dataset

MOUNT_FUSE = shutil.which("mount.fuse3", path="/usr/sbin:/sbin:/usr/bin:/bin")


def ram_only_config(base, name="cfg.yaml", **extra):
    return write_config(os.path.join(base, name), config(**extra))


class OptionsAnywhereTest(ClairfsCase):
    """-o before the dataset does not swallow it; config keys given as -o win over the file,
    in the order given; a list element is set by its index."""

    def test_o_before_and_after_the_paths(self):
        base = self.tmpdir("opts")
        ds = small_dataset(base, n=8)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        cfg = ram_only_config(base)
        # harness.Daemon puts extra_args before the dataset: -o first, then the paths, then
        # more -o after them.
        d = harness.Daemon(self.id(), base, ds, mnt, cfg,
                           ["-o", "cache.staging.capacity=8MiB,cache.tiers.0.capacity=48MiB",
                            "-o", "cache.staging.capacity=12MiB,cache.staging.threads=auto"])
        d.argv += ["-o", "fuse.threads=3", "-olog_level=warn"]
        self.addCleanup(d.stop)
        d.start()
        stats = self.stats(mnt)
        self.assertEqual(stats["prefetch"]["staging_capacity"], 12 << 20, "the last -o wins")
        # A static window (the most it has), the threads left to the tuner (the file's 2
        # overridden by auto).
        self.assertEqual(stats["prefetch"]["staging_max_capacity"], 12 << 20)
        self.assertIn(stats["prefetch"]["tuner_state"], ("threads", "capacity", "stable"))
        self.assertTrue(1 <= stats["prefetch"]["staging_threads"] <= 32, stats["prefetch"])
        self.assertEqual([t["capacity"] for t in stats["tiers"]], [48 << 20], stats["tiers"])
        with open(os.path.join(mnt, "class1", "img001.jpg"), "rb") as f:
            with open(os.path.join(ds, "class1", "img001.jpg"), "rb") as g:
                self.assertEqual(f.read(), g.read())
        d.stop()
        log = harness.read_tail(d.log_path, 400)
        self.assertNotIn("[info]", log, "-o log_level=warn took no effect")

    def test_a_whole_list_as_one_value(self):
        base = self.tmpdir("list")
        ds = small_dataset(base, n=4)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        # No config file at all (-c /dev/null is empty YAML): the tiers come from -o alone;
        # the comma inside the value is escaped as for any FUSE option.
        d = harness.Daemon(self.id(), base, ds, mnt, "/dev/null",
                           ["-o", r"cache.tiers=[{kind: ram\, capacity: 40MiB}]"])
        self.addCleanup(d.stop)
        d.start()
        tiers = self.stats(mnt)["tiers"]
        self.assertEqual([(t["name"], t["capacity"]) for t in tiers], [("ram", 40 << 20)])


class ExitCodeTest(ClairfsCase):
    """A start that fails says why in its exit status (clairfs(1)) and leaves nothing."""

    def test_exit_codes(self):
        base = self.tmpdir("exit")
        ds = small_dataset(base, n=4)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        good = ram_only_config(base)
        cases = [
            ("unknown flag", ["--no-such-flag", ds, mnt], 64, "no-such-flag"),
            ("no dataset", ["-c", good], 64, "DATASET"),
            ("config= without a value", ["-o", "config=", ds, mnt], 64, "config"),
            ("two config files", ["-c", good, "-o", "config=/other.yaml", ds, mnt], 64,
             "two config files"),
            ("missing config file", ["-o", "config=" + os.path.join(base, "none.yaml"), ds, mnt],
             78, "No such file"),
            ("unknown -o key", ["-c", good, "-o", "cache.nope=1", ds, mnt], 78, "cache.nope"),
            ("index past the list", ["-c", good, "-o", "cache.tiers.3.capacity=1GiB", ds, mnt],
             78, "1 element"),
            ("bad -o value", ["-c", good, "-o", "cache.staging.capacity=lots", ds, mnt], 78,
             "cache.staging.capacity"),
            ("missing dataset", ["-c", good, os.path.join(base, "nope"), mnt], 66, "nope"),
            ("missing mountpoint", ["-c", good, ds, os.path.join(base, "nomnt")], 66, "nomnt"),
        ]
        for name, argv, code, needle in cases:
            with self.subTest(case=name):
                rc, err, _ = run_clairfs(self, base, argv, mnt, True)
                self.assertEqual(rc, code, f"{name}: stderr {err!r}")
                self.assertIn(needle, err, name)
                self.assertFalse(harness.is_fuse_mounted(mnt), name)
                self.assertEqual(clairfs_pids(mnt), [], name)

    def test_busy_mountpoint_and_locked_cache(self):
        base = self.tmpdir("busy")
        ds = small_dataset(base, n=4)
        mnt = os.path.join(base, "mnt")
        other = os.path.join(base, "other")
        os.mkdir(mnt)
        os.mkdir(other)
        cache_dir = os.path.join(base, "ssd")
        cfg = config()
        cfg["cache"]["tiers"].append({"kind": "ssd", "capacity": "64MiB", "dir": cache_dir})
        cfg_path = write_config(os.path.join(base, "ssd.yaml"), cfg)
        self.mount(ds, mnt, cfg=cfg)
        # The same mountpoint: a live clairfs is there.
        rc, err, _ = run_clairfs(self, base, ["-c", cfg_path, ds, mnt], os.path.join(base, "x"),
                                 True)
        self.assertEqual(rc, 32, err)
        self.assertIn("already mounted", err)
        # Another mountpoint, the same SSD cache directory: locked by the first daemon.
        rc, err, _ = run_clairfs(self, base, ["-c", cfg_path, ds, other], other, True)
        self.assertEqual(rc, 75, err)
        self.assertIn("in use by another clairfs", err)
        self.assertFalse(harness.is_fuse_mounted(other))
        self.assertTrue(harness.is_fuse_mounted(mnt), "the first daemon was disturbed")


class FstabMountTest(ClairfsCase):
    """What `mount -t fuse.clairfs` (an fstab line) runs: mount.fuse3 with the type's program,
    the options as one -o after the paths, config= among them, ro added by the line."""

    def mount_helper(self, base, ds, mnt, options):
        if MOUNT_FUSE is None:
            self.skipTest("mount.fuse3 not installed")
        # mount(8) runs /sbin/mount.fuse3 SOURCE DIR -t clairfs -o OPTIONS, which runs the
        # program "clairfs" found on PATH: the one under test.
        env = dict(os.environ, PATH=os.path.dirname(harness.BIN) + ":/usr/sbin:/usr/bin:/sbin:/bin")
        harness.register_mount(mnt)
        self.addCleanup(self.kill_leftovers, mnt)
        self.addCleanup(harness.release_mount, mnt)
        r = subprocess.run([MOUNT_FUSE, ds, mnt, "-t", "clairfs", "-o", options],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                           timeout=30)
        return r

    def kill_leftovers(self, mnt):
        for pid in clairfs_pids(mnt):
            harness.release_proc(pid, grace=0)

    def test_fstab_line_with_config_and_ro(self):
        base = self.tmpdir("fstab")
        ds = small_dataset(base, n=8)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        log = os.path.join(base, "daemon.log")
        cfg = ram_only_config(base, log_file=log)
        r = self.mount_helper(base, ds, mnt,
                              f"ro,config={cfg},allow_other,cache.staging.capacity=4MiB")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(harness.is_fuse_mounted(mnt))
        pids = clairfs_pids(mnt)
        self.assertEqual(len(pids), 1, pids)
        self.assertEqual(self.stats(mnt)["prefetch"]["staging_capacity"], 4 << 20)
        # Registration works: the manifest is on the control files' own mount.
        self.write_manifest(mnt, "class0/img000.jpg\nclass1/img001.jpg\n")
        harness.wait_for(lambda: self.stats(mnt)["prefetch"]["planned_files"] == 2, 10,
                         "the plan written through a mount with -o ro")
        # The data is read-only all the same.
        with self.assertRaises(OSError):
            open(os.path.join(mnt, "class0", "img000.jpg"), "r+b").close()
        with open(log) as f:
            text = f.read()
        self.assertIn(f"configuration: {cfg}", text)
        self.assertIn("-o ro: the dataset is always mounted read-only", text)
        r = subprocess.run(["fusermount3", "-u", mnt], capture_output=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        harness.wait_for(lambda: not any(harness.pid_alive(p) for p in pids), 10,
                         "the daemon to exit after fusermount3 -u")

    def test_mount_t_fuse_clairfs(self):
        """The real mount(8), when the clairfs on its PATH is the one under test (as after
        tools/setup.sh); the helper test above covers the rest."""
        installed = shutil.which("clairfs", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                                 "/usr/bin:/sbin:/bin")
        if not installed or not os.path.samefile(installed, harness.BIN) and \
                not same_bytes(installed, harness.BIN):
            self.skipTest("the clairfs mount(8) finds is not the build under test")
        base = self.tmpdir("mountt")
        ds = small_dataset(base, n=4)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        cfg = ram_only_config(base)
        harness.register_mount(mnt)
        self.addCleanup(self.kill_leftovers, mnt)
        self.addCleanup(harness.release_mount, mnt)
        r = subprocess.run(["mount", "-t", "fuse.clairfs", "-o", f"config={cfg},noauto,nofail",
                            ds, mnt], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(harness.is_fuse_mounted(mnt))
        self.assertIn("planned_files", self.control_read(mnt, "stats"))
        r = subprocess.run(["umount", mnt], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)


def same_bytes(a, b):
    with open(a, "rb") as f, open(b, "rb") as g:
        return f.read() == g.read()


class AutoUnmountTest(ClairfsCase):
    """-o auto_unmount: a killed daemon's mount goes away by itself."""

    def test_killed_daemon_is_unmounted(self):
        base = self.tmpdir("auto")
        ds = small_dataset(base, n=4)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        d = self.mount(ds, mnt, extra_args=["-o", "auto_unmount"], workdir=base)
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(timeout=10)
        harness.wait_for(lambda: not harness.is_fuse_mounted(mnt), 10,
                         "auto_unmount to remove the mount of the killed daemon")
        self.assertFalse(os.path.ismount(mnt))


class ClusterOptInTest(ClairfsCase):
    """Cluster mode only when asked for: an inherited MPI environment leaves a plain start a
    plain daemon; --cluster without a launcher is refused."""

    def test_inherited_mpi_environment_is_ignored(self):
        base = self.tmpdir("mpienv")
        ds = small_dataset(base, n=4)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        log = os.path.join(base, "daemon.log")
        env = dict(os.environ, PMI_SIZE="2", PMI_RANK="1", MPI_LOCALNRANKS="2")
        with open(log, "wb") as out:
            p = subprocess.Popen([harness.BIN, "-f", "-c", ram_only_config(base), ds, mnt],
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 env=env, start_new_session=True)
        harness.register_proc(p)
        harness.register_mount(mnt)
        self.addCleanup(harness.release_proc, p)
        self.addCleanup(harness.release_mount, mnt)
        harness.wait_for(lambda: harness.is_fuse_mounted(mnt) or p.poll() is not None, 20,
                         "the mount")
        self.assertIsNone(p.poll(), harness.read_tail(log))
        self.assertNotIn("cluster", self.plan(mnt), "a plain start joined a cluster")
        with open(os.path.join(mnt, "class0", "img000.jpg"), "rb") as f:
            self.assertTrue(f.read())
        harness.release_mount(mnt)
        self.assertEqual(p.wait(timeout=20), 0)
        self.assertIn("cluster mode is off", harness.read_tail(log))

    def test_cluster_without_a_launcher_is_refused(self):
        base = self.tmpdir("nompi")
        ds = small_dataset(base, n=4)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        for argv in (["--cluster"], ["-o", "cluster.enabled=true"]):
            with self.subTest(argv=argv):
                rc, err, _ = run_clairfs(self, base, argv + ["-c", ram_only_config(base), ds, mnt],
                                         mnt, True)
                self.assertEqual(rc, 64, err)
                self.assertIn("needs an MPI launcher", err)
                self.assertFalse(harness.is_fuse_mounted(mnt))
