"""The SSD tier: placement across RAM and SSD, reuse across remounts, freshness, corruption
detection and recovery after a daemon killed with -9."""
import errno
import os
import random
import signal
import stat
import subprocess
import sys
import time

import harness
from harness import ClairfsCase, config
import treeutil as tu

NFILES = 600
EPOCHS = 3


def make_dataset(ds, nfiles, lo, hi, seed):
    rng = random.Random(seed)
    files = {}
    for i in range(nfiles):
        rel = f"c{i % 8}/f{i:04d}.bin"
        files[rel] = rng.randbytes(rng.randint(lo, hi))
        os.makedirs(os.path.join(ds, os.path.dirname(rel)), exist_ok=True)
        tu.write_file(os.path.join(ds, rel), files[rel])
    names = sorted(files)
    epochs = []
    for _ in range(EPOCHS):
        rng.shuffle(names)
        epochs.append(list(names))
    return files, epochs


def manifest_text(epochs):
    return "".join("#epoch\n" + "\n".join(e) + "\n" for e in epochs)


def ssd_config(ssd_dir, ram, ssd, staging="2MiB"):
    cfg = config(staging=staging, keep_cache=False)  # every read reaches the daemon
    cfg["cache"]["tiers"] = [{"kind": "ram", "capacity": ram, "threads": 2},
                             {"kind": "ssd", "capacity": ssd, "threads": 2, "dir": ssd_dir}]
    return cfg


class SsdTierTest(ClairfsCase):
    @classmethod
    def setUpClass(cls):
        cls.base = cls.class_tmpdir("ssd")
        cls.ds = os.path.join(cls.base, "ds")
        cls.files, cls.epochs = make_dataset(cls.ds, NFILES, 40_000, 100_000, seed=4242)
        cls.total = sum(len(d) for d in cls.files.values())

    # ------------------------------------------------------------------ helpers
    def new_mnt(self):
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        return mnt

    def read_check(self, mnt, rel, expected):
        with open(os.path.join(mnt, rel), "rb") as f:
            data = f.read()
        self.assertEqual(len(data), len(expected), rel)
        self.assertTrue(data == expected, f"{rel}: wrong bytes")

    def read_epochs(self, mnt, epochs, files=None):
        files = files or self.files
        for epoch in epochs:
            for rel in epoch:
                self.read_check(mnt, rel, files[rel])

    def wait_prefetch(self, mnt, target, limit=20.0):
        """Polls stats until prefetch.fetches reaches target or stops growing; the last stats."""
        return harness.wait_progress(lambda: self.stats(mnt), lambda st: st["prefetch"]["fetches"],
                                     target, limit, interval=0.1)

    def mount_planned(self, mnt, cfg, epochs=None):
        d = self.mount(self.ds, mnt, cfg=cfg)
        self.write_manifest(mnt, manifest_text(epochs or self.epochs))
        plan = self.plan(mnt)
        self.assertEqual([t["name"] for t in plan["tiers"]], ["ram", "ssd"], plan)
        return d, plan

    def populate(self, ssd_dir, ram="8MiB", ssd="64MiB"):
        """A first mount that fills the SSD tier and reads every epoch; returns its plan."""
        mnt = self.new_mnt()
        d, plan = self.mount_planned(mnt, ssd_config(ssd_dir, ram, ssd))
        self.wait_prefetch(mnt, plan["tiers"][0]["objects"] + plan["tiers"][1]["objects"])
        self.read_epochs(mnt, self.epochs)
        st = self.stats(mnt)
        self.assertGreater(st["tiers"][1]["fetched"], 0, st)
        d.stop()
        return mnt, plan

    # ------------------------------------------------------------------ tests
    def test_placement_and_service(self):
        ssd_dir = os.path.join(self.tmpdir("ssdc"), "db")
        mnt = self.new_mnt()
        _, plan = self.mount_planned(mnt, ssd_config(ssd_dir, "8MiB", "64MiB"))
        ram, ssd = plan["tiers"]
        self.assertEqual((plan["files"], plan["bytes"]), (NFILES, self.total), plan)
        self.assertEqual((ram["capacity"], ssd["capacity"]), (8 << 20, 64 << 20), plan)
        self.assertTrue(0 < ram["bytes"] <= ram["capacity"] and ram["objects"] > 0, plan)
        self.assertTrue(0 < ssd["bytes"] <= ssd["capacity"] and ssd["objects"] > 0, plan)
        self.assertEqual(ram["objects"] + ssd["objects"] + plan["staging"]["objects"], NFILES, plan)
        st = self.wait_prefetch(mnt, ram["objects"] + ssd["objects"])
        print(f"\n  ssd: plan ram {ram['objects']} ssd {ssd['objects']} staging "
              f"{plan['staging']['objects']}; prefetched {st['prefetch']['fetches']}",
              file=sys.stderr)
        self.read_epochs(mnt, self.epochs[:1])
        after1 = self.stats(mnt)
        self.read_epochs(mnt, self.epochs[1:])
        after3 = self.stats(mnt)
        opens = after3["file_reads"] - after1["file_reads"]
        self.assertEqual(opens, (EPOCHS - 1) * NFILES, after3)
        tiered = sum(after3["served"][k] - after1["served"][k] for k in ("ram", "ssd"))
        self.assertGreaterEqual(tiered / opens, 0.95, f"from tiers {tiered}/{opens}; {after3}")
        self.assertGreater(after3["served"]["ssd"], 0, after3)
        self.assertLessEqual(after3["ssd_bytes"], after3["ssd_capacity"], after3)
        self.assertLessEqual(after3["ram_bytes"], after3["ram_capacity"], after3)
        self.assertEqual(after3["ssd_capacity"], 64 << 20, after3)
        self.assertEqual([t["name"] for t in after3["tiers"]], ["ram", "ssd"], after3)
        self.assertEqual(after3["errors"]["checksum"], 0, after3)

    def test_remount_reuses_ssd(self):
        ssd_dir = os.path.join(self.tmpdir("ssdc"), "db")
        mnt, plan1 = self.populate(ssd_dir)
        _, plan = self.mount_planned(mnt, ssd_config(ssd_dir, "8MiB", "64MiB"))
        self.assertEqual(plan["tiers"], plan1["tiers"], plan)
        self.wait_prefetch(mnt, plan["tiers"][0]["objects"])
        self.read_epochs(mnt, self.epochs)
        st = self.stats(mnt)
        print(f"\n  ssd remount: backing_reads {st['backing_reads']}, tiers {st['tiers']}",
              file=sys.stderr)
        limit = plan["tiers"][0]["objects"] + plan["staging"]["objects"] * EPOCHS
        self.assertLessEqual(st["backing_reads"], limit, st)
        self.assertEqual(st["tiers"][1]["fetched"], 0, st)   # nothing refetched into the SSD
        self.assertGreater(st["served"]["ssd"], 0, st)
        self.assertEqual(st["errors"]["checksum"], 0, st)

    def test_modified_file_is_served_fresh(self):
        ssd_dir = os.path.join(self.tmpdir("ssdc"), "db")
        last = self.epochs[0][-1]   # referenced last: placed on the SSD, not in RAM
        mnt, _ = self.populate(ssd_dir)
        path = os.path.join(self.ds, last)
        old, st = self.files[last], os.stat(path)
        new = bytes(b ^ 0xFF for b in old)
        self.addCleanup(self.restore, path, old, st)
        tu.write_file(path, new)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 7_000_000_000))
        _, plan = self.mount_planned(mnt, ssd_config(ssd_dir, "8MiB", "64MiB"))
        self.read_check(mnt, last, new)   # at once: racing the prefetch
        st = self.wait_prefetch(mnt, plan["tiers"][0]["objects"] + 1)
        self.read_check(mnt, last, new)   # after the prefetch refreshed the tiers
        self.read_check(mnt, self.epochs[0][-2], self.files[self.epochs[0][-2]])
        self.assertEqual(st["errors"]["checksum"], 0, st)

    @staticmethod
    def restore(path, data, st):
        tu.write_file(path, data)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    def test_corrupt_blob_is_detected(self):
        ssd_dir = os.path.join(self.tmpdir("ssdc"), "db")
        mnt, _ = self.populate(ssd_dir)
        blobs = [os.path.join(ssd_dir, n) for n in os.listdir(ssd_dir) if n.endswith(".blob")]
        if not blobs:
            # The values may still sit in the write-ahead log only; a reopen flushes them.
            self.mount(self.ds, mnt, cfg=ssd_config(ssd_dir, "8MiB", "64MiB")).stop()
            blobs = [os.path.join(ssd_dir, n) for n in os.listdir(ssd_dir) if n.endswith(".blob")]
        self.assertTrue(blobs, f"no .blob files in {ssd_dir}: {os.listdir(ssd_dir)}")
        contents = {b: bytearray(open(b, "rb").read()) for b in blobs}
        flipped = []
        for rel in reversed(self.epochs[0]):   # the last referenced files are on the SSD
            head = self.files[rel][:64]
            for b, buf in contents.items():
                off = buf.find(head)
                if off >= 0:
                    buf[off + 5] ^= 0x5A
                    flipped.append(rel)
                    break
            if len(flipped) == 5:
                break
        self.assertEqual(len(flipped), 5, f"found only {flipped} in the blob files")
        for b, buf in contents.items():
            with open(b, "wb") as f:
                f.write(buf)
        self.mount_planned(mnt, ssd_config(ssd_dir, "8MiB", "64MiB"))
        self.read_epochs(mnt, self.epochs)
        st = self.stats(mnt)
        print(f"\n  ssd corrupt: flipped {len(flipped)}; errors {st['errors']}", file=sys.stderr)
        self.assertGreaterEqual(st["errors"]["checksum"], 1, st)

    def start_over_stale(self, ds, mnt, cfg_path):
        """Starts a daemon on a mountpoint a killed daemon left stale (mount() refuses to)."""
        d = harness.Daemon(self.id(), self.tmpdir("d2"), ds, mnt, cfg_path)
        self.addCleanup(d.stop)
        return d.start_over_stale()

    def test_kill9_during_prefetch_then_remount(self):
        base = self.tmpdir("big")
        ds = os.path.join(base, "ds")
        files, epochs = make_dataset(ds, 2000, 45_000, 55_000, seed=99)
        ssd_dir = os.path.join(base, "db")
        mnt = self.new_mnt()
        workdir = self.tmpdir("d1")
        d = self.mount(ds, mnt, cfg=ssd_config(ssd_dir, "4MiB", "256MiB"),
                       workdir=workdir)
        cfg_path = d.argv[d.argv.index("-c") + 1]
        self.write_manifest(mnt, manifest_text(epochs))
        planned = self.plan(mnt)["tiers"]
        total = planned[0]["objects"] + planned[1]["objects"]
        # Killed as soon as a quarter of the prefetch is seen done (not after a fixed time,
        # which a fast machine spends finishing it all): the SSD tier holds part of the data.
        deadline = time.monotonic() + 30
        while True:
            st = self.stats(mnt)
            if st["prefetch"]["fetches"] >= total // 4 or time.monotonic() > deadline:
                break
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(timeout=10)
        print(f"\n  ssd kill: fetched {st['prefetch']['fetches']} of "
              f"{planned[0]['objects'] + planned[1]['objects']} before SIGKILL", file=sys.stderr)
        self.assertGreaterEqual(st["prefetch"]["fetches"], total // 4,
                                "a quarter of the prefetch was not done in 30 s")
        self.assertLess(st["prefetch"]["fetches"], total,
                        "the prefetch finished before the kill: make the dataset larger")
        # Stale: what needs the daemon fails with ENOTCONN (os.stat of the root may still
        # succeed from the kernel's attribute cache, attr_timeout 3600 s).
        with self.assertRaises(OSError) as cm:
            os.statvfs(mnt)
        self.assertEqual(cm.exception.errno, errno.ENOTCONN)

        self.start_over_stale(ds, mnt, cfg_path)
        layers = [m for m, _, _ in harness.fuse_mounts() if m == os.path.abspath(mnt)]
        self.write_manifest(mnt, manifest_text(epochs))
        for rel in epochs[0]:
            self.read_check(mnt, rel, files[rel])
        st2 = self.stats(mnt)
        print(f"  ssd kill: second mount backing_reads {st2['backing_reads']}, "
              f"tiers {st2['tiers']}", file=sys.stderr)
        self.assertLess(st2["backing_reads"], len(files), st2)
        self.assertEqual(st2["errors"]["checksum"], 0, st2)
        # The stale mount was detached, not buried under the new one.
        self.assertEqual(len(layers), 1, f"FUSE mounts stacked at {mnt}: {layers}")


class SsdFullDiskTest(ClairfsCase):
    """A cache file system that runs full: the SSD tier switches off, the daemon goes on."""

    def small_fs(self, size="32m"):
        d = os.path.join(self.tmpdir("full"), "fs")
        os.mkdir(d, 0o700)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", d],
                           capture_output=True, timeout=20)
        if r.returncode != 0:
            self.skipTest(f"cannot mount a tmpfs: {r.stderr.decode(errors='replace')}")
        self.addCleanup(subprocess.run, ["umount", "-l", d], timeout=20)
        return d

    def test_full_cache_fs_degrades(self):
        base = self.tmpdir("fullds")
        ds = os.path.join(base, "ds")
        files, epochs = make_dataset(ds, 800, 80_000, 120_000, seed=7)   # ~80 MB
        ssd_dir = os.path.join(self.small_fs(), "db")
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        cfg = ssd_config(ssd_dir, "4MiB", "30MiB")
        d = self.mount(ds, mnt, cfg=cfg)
        self.write_manifest(mnt, manifest_text(epochs))
        for epoch in epochs[:2]:
            for rel in epoch:
                with open(os.path.join(mnt, rel), "rb") as f:
                    self.assertTrue(f.read() == files[rel], f"{rel}: wrong bytes")
        self.assertIsNone(d.proc.poll(), harness.read_tail(d.log_path))
        st = self.stats(mnt)
        print(f"\n  ssd full: tiers {st['tiers']} errors {st['errors']}", file=sys.stderr)
        ssd = st["tiers"][1]
        self.assertEqual(ssd["name"], "ssd", st)
        self.assertEqual(ssd["state"], "off", st)   # 32 MiB never come back free here
        self.assertEqual(ssd["disabled"], 1, st)
        self.assertGreaterEqual(ssd["io_errors"], 1, st)
        self.assertEqual(st["errors"]["checksum"], 0, st)
        self.assertIn("ssd tier switched off", harness.read_tail(d.log_path))


class SsdDirLockTest(ClairfsCase):
    """One daemon per cache directory, also when both daemonize."""

    def test_two_daemonized_starts_on_one_cache_dir(self):
        base = self.tmpdir("lock")
        ds = os.path.join(base, "ds")
        files, _ = make_dataset(ds, 20, 1000, 2000, seed=3)
        ssd_dir = os.path.join(base, "cache", "db")
        mnts = [os.path.join(base, m) for m in ("m1", "m2")]
        for m in mnts:
            os.mkdir(m)
        cfg = harness.write_config(os.path.join(base, "c.yaml"),
                                   ssd_config(ssd_dir, "4MiB", "16MiB"))
        # Both at once: the old check ran after the fork, so both daemonized and exited 0.
        starts = []
        for m in mnts:
            harness.register_mount(m)
            starts.append(subprocess.Popen([harness.BIN, "-c", cfg, ds, m],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE))
        results = [(p.wait(timeout=30), p.stderr.read().decode(errors="replace")) for p in starts]
        for p in starts:
            p.stdout.close()
            p.stderr.close()
        pid = 0
        if os.path.exists(os.path.join(ssd_dir, "clairfs.lock")):
            with open(os.path.join(ssd_dir, "clairfs.lock")) as f:
                pid = int(f.read().strip() or 0)   # the daemon (the child), not its parent
        if pid > 0:
            harness.register_proc(pid)
            self.addCleanup(harness.release_proc, pid)
        for m in mnts:
            self.addCleanup(harness.release_mount, m)   # first: the daemon exits on unmount
        ok = [i for i, (rc, _) in enumerate(results) if rc == 0]
        self.assertEqual(len(ok), 1, f"exactly one daemon may use the directory: {results}")
        winner, loser = ok[0], 1 - ok[0]
        rc, message = results[loser]
        self.assertNotEqual(rc, 0, message)
        self.assertIn(f"SSD cache directory '{ssd_dir}' is in use by another clairfs", message)
        self.assertIn("(pid ", message)   # the winner's parent or, once forked, the daemon
        self.assertFalse(harness.is_fuse_mounted(mnts[loser]))
        self.assertTrue(pid > 0 and harness.pid_alive(pid), pid)
        rel = sorted(files)[0]
        with open(os.path.join(mnts[winner], rel), "rb") as f:
            self.assertEqual(f.read(), files[rel])
        self.assertEqual(stat.S_IMODE(os.stat(ssd_dir).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(ssd_dir)).st_mode), 0o700)
