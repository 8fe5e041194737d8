"""Warm restarts: with RAM and SSD tiers, the SSD tier also keeps copies of the RAM tier's
objects (cache.keep_copies), so that a remount on the same SSD directory, registering the same
manifest, reads (almost) nothing from the backing store: at most 1% of the dataset."""
import os
import subprocess
import sys
import time

import harness
from harness import ClairfsCase, config
from test_ssd import make_dataset, manifest_text  # the SSD tests' dataset

NFILES = 400


class WarmRestartTest(ClairfsCase):
    @classmethod
    def setUpClass(cls):
        cls.base = cls.class_tmpdir("warm")
        cls.ds = os.path.join(cls.base, "ds")
        cls.files, cls.epochs = make_dataset(cls.ds, NFILES, 40_000, 100_000, seed=1515)
        cls.total = sum(len(d) for d in cls.files.values())

    def cfg(self, ssd_dir, keep):
        # RAM holds about a fifth of the dataset, the SSD the rest and room for the copies;
        # keep_cache off: every read reaches the daemon.
        cfg = config(staging="2MiB", keep_cache=False)
        cfg["cache"]["tiers"] = [{"kind": "ram", "capacity": "6MiB", "threads": 2},
                                 {"kind": "ssd", "capacity": "64MiB", "threads": 2,
                                  "dir": ssd_dir}]
        cfg["cache"]["keep_copies"] = keep
        return cfg

    def read_epoch(self, mnt, epoch):
        for rel in epoch:
            with open(os.path.join(mnt, rel), "rb") as f:
                data = f.read()
            self.assertEqual(len(data), len(self.files[rel]), rel)
            self.assertTrue(data == self.files[rel], f"{rel}: wrong bytes")

    def unmount(self, d, mnt):
        """fusermount3 -u, then the daemon must exit by itself, with status 0."""
        r = subprocess.run(["fusermount3", "-u", mnt], capture_output=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        try:
            rc = d.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.fail(f"the daemon did not exit after the unmount:\n{harness.read_tail(d.log_path)}")
        log = harness.read_tail(d.log_path)
        self.assertEqual(rc, 0, log)
        d.stop()   # bookkeeping: nothing is mounted or running any more
        return log

    def wait_stats(self, mnt, pred, what, timeout=30.0):
        """Polls stats until pred(stats) holds; fails after timeout seconds."""
        deadline = time.monotonic() + timeout
        st = self.stats(mnt)
        while not pred(st):
            if time.monotonic() > deadline:
                self.fail(f"timed out after {timeout}s waiting for {what}: {st}")
            time.sleep(0.05)
            st = self.stats(mnt)
        return st

    def first_mount(self, mnt, cfg):
        """Registers the manifest, waits until the tiers (and kept copies) are filled, reads
        one epoch and unmounts; returns the plan."""
        d = self.mount(self.ds, mnt, cfg=cfg)
        self.write_manifest(mnt, manifest_text(self.epochs))
        plan = self.plan(mnt)
        ram, ssd = plan["tiers"]
        self.assertEqual(plan["staging"]["objects"], 0, plan)   # the tiers hold everything
        self.assertTrue(0 < ram["bytes"] and ram["bytes"] < self.total, plan)
        tiered = ram["objects"] + ssd["objects"]
        self.wait_stats(mnt, lambda st: st["prefetch"]["fetches"] >= tiered,
                        "the tier fill")
        self.wait_stats(mnt, lambda st: st["kept"]["written"] >= ssd["kept_objects"]
                        and st["kept"]["pending"] == 0, "the kept copies")
        self.read_epoch(mnt, self.epochs[0])
        st = self.stats(mnt)
        self.assertEqual(st["backing_bytes"], self.total, st)   # each byte left the store once
        self.unmount(d, mnt)
        return plan

    def second_mount(self, mnt, cfg):
        """Mounts again on the same SSD directory, registers the same manifest, reads an
        epoch at once (racing the RAM fill); returns the stats."""
        d = self.mount(self.ds, mnt, cfg=cfg)
        self.write_manifest(mnt, manifest_text(self.epochs))
        self.read_epoch(mnt, self.epochs[0])
        st = self.stats(mnt)
        self.unmount(d, mnt)
        return st

    def test_remount_rereads_at_most_one_percent(self):
        ssd_dir = os.path.join(self.tmpdir("ssdc"), "db")
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        cfg = self.cfg(ssd_dir, True)
        plan = self.first_mount(mnt, cfg)
        ram, ssd = plan["tiers"]
        self.assertEqual(ssd["kept_objects"], ram["objects"], plan)   # room for every copy
        self.assertEqual(ssd["kept_bytes"], ram["bytes"], plan)
        st = self.second_mount(mnt, cfg)
        share = st["backing_bytes"] / self.total
        print(f"\n  warm restart (keep_copies true): second mount read {st['backing_bytes']} of "
              f"{self.total} bytes from the backing store ({100 * share:.2f} %); RAM tier "
              f"{ram['bytes']} bytes ({100 * ram['bytes'] / self.total:.1f} %); served "
              f"{st['served']}", file=sys.stderr)
        self.assertLessEqual(st["backing_bytes"], 0.01 * self.total, st)
        self.assertEqual(st["served"]["backing"], 0, st)
        self.assertEqual(st["tiers"][1]["fetched"], 0, st)   # nothing refetched into the SSD
        self.assertEqual(st["errors"]["checksum"], 0, st)
        self.assertEqual(st["errors"]["stale"], 0, st)

    def test_without_kept_copies_the_ram_share_is_read_again(self):
        """The behaviour before warm restarts (cache.keep_copies false), for comparison."""
        ssd_dir = os.path.join(self.tmpdir("ssdc"), "db")
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        cfg = self.cfg(ssd_dir, False)
        plan = self.first_mount(mnt, cfg)
        ram, ssd = plan["tiers"]
        self.assertEqual(ssd["kept_objects"], 0, plan)
        st = self.second_mount(mnt, cfg)
        print(f"\n  warm restart (keep_copies false): second mount read {st['backing_bytes']} "
              f"of {self.total} bytes ({100 * st['backing_bytes'] / self.total:.2f} %); RAM "
              f"tier {ram['bytes']} bytes", file=sys.stderr)
        self.assertGreaterEqual(st["backing_bytes"], ram["bytes"], st)
        self.assertEqual(st["kept"]["queued"], 0, st)
