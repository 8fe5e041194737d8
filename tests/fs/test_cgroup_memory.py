"""The daemon inside a real memory cgroup (a Slurm job with --mem, a Kubernetes pod): a RAM tier
the cgroup cannot hold is refused at start (exit 78, the limit named); capacities left to the
default are sized to the limit; and a planned epoch twice the limit, read by a reader in the
same cgroup, finishes with every byte right, the daemon alive and no OOM kill
(docs/reliability.md, "Memory limits"). Skipped where no memory cgroup can be made."""
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import harness
from harness import ClairfsCase, write_config
from cgrouputil import MemoryCgroup, write_uncached_dataset

LIMIT = 256 << 20
EPOCH = 520 << 20  # bytes of files in the planned epoch: about twice the limit
HERE = os.path.dirname(os.path.abspath(__file__))


def status_bytes(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cgroup_config(ram=None, staging=None):
    """A RAM tier only (no SSD tier: this is about memory); capacities omitted when None."""
    tier = {"kind": "ram", "threads": 2}
    if ram is not None:
        tier["capacity"] = ram
    staging_cfg = {"threads": 2}
    if staging is not None:
        staging_cfg["capacity"] = staging
    return {
        "fuse": {"threads": 4},
        "cache": {"tiers": [tier], "staging": staging_cfg, "demand_threads": 2,
                  "fetch_timeout": 30},
        "log": {"level": "info"},
    }


class CgroupMemoryTest(ClairfsCase):
    def cgroup(self, limit=LIMIT):
        if os.environ.get("CLAIRFS_SANITIZED"):
            self.skipTest("sanitizer shadow memory does not fit a memory limit")
        cg = MemoryCgroup.create(limit)
        if cg is None:
            self.skipTest(f"no memory cgroup can be made here: {MemoryCgroup.why()}")
        self.addCleanup(lambda: self.assertTrue(cg.remove(), f"cgroup {cg.path} not removed"))
        return cg

    def disk_tmpdir(self):
        """On a disk file system: its page cache is charged to the cgroup that reads it (a
        tmpfs file's pages stay charged to its writer)."""
        d = tempfile.mkdtemp(prefix="clairfs-cg-", dir="/var/tmp")
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def small_tree(self):
        """(work, ds, mnt): a work directory, a dataset of one empty directory, a mountpoint."""
        work = self.tmpdir("cg")
        ds = os.path.join(work, "ds")
        os.makedirs(os.path.join(ds, "a"))
        mnt = os.path.join(work, "mnt")
        os.mkdir(mnt)
        return work, ds, mnt

    def test_ram_tier_the_cgroup_cannot_hold_is_refused(self):
        cg = self.cgroup()
        work, ds, mnt = self.small_tree()
        cfg = write_config(os.path.join(work, "cfg.yaml"), cgroup_config(ram="1GiB"))
        r = subprocess.run([harness.BIN, "-f", "-c", cfg, ds, mnt], preexec_fn=cg.enter,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        err = r.stderr.decode(errors="replace")
        self.assertFalse(harness.is_fuse_mounted(mnt))
        self.assertEqual(r.returncode, 78, err)
        self.assertIn("'cache.tiers[0].capacity'", err)
        self.assertIn("the memory limit of the daemon's cgroup (256.0 MiB", err)
        limit_file = "memory.limit_in_bytes" if cg.version == 1 else "memory.max"
        self.assertIn(os.path.join(cg.path, limit_file), err)
        self.assertIn("of RAM tiers fit", err)
        self.assertEqual(cg.oom_kills(), 0)
        print(f"\n  refused: {err.strip()}", file=sys.stderr)

    def test_default_capacities_are_sized_to_the_cgroup(self):
        cg = self.cgroup()
        _, ds, mnt = self.small_tree()
        d = self.mount(ds, mnt, cfg=cgroup_config(), preexec_fn=cg.enter)
        self.assertIn(d.proc.pid, cg.pids())
        stats = self.stats(mnt)
        ram = stats["tiers"][0]["capacity"]
        log = harness.read_tail(d.log_path)
        self.assertIn("cache.tiers[0].capacity sized to", log)
        self.assertIn("cache.staging.capacity sized to", log)
        self.assertIn("the memory limit of the daemon's cgroup (256.0 MiB", log)
        # Within half the usable limit (the other half is the job's).
        self.assertGreater(ram, 0)
        self.assertLess(ram + (16 << 20), (LIMIT - (16 << 20)) // 2)

    def read_in_cgroup(self, cg, d, mnt, names, head=0):
        """Reads names through mnt with 4 threads in a process inside cg, sampling the daemon's
        RSS and the group's anonymous memory. Returns ({name: sha256 hex}, figures)."""
        pid = d.proc.pid
        listing = os.path.join(self.tmpdir("cgl"), "list")
        with open(listing, "w") as f:
            f.write("".join(os.path.join(mnt, r) + "\n" for r in names))
        peak = {"rss": 0, "anon": 0}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak["rss"] = max(peak["rss"], status_bytes(pid, "VmRSS"))
                peak["anon"] = max(peak["anon"], cg.anon())
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        t1 = time.monotonic()
        try:
            argv = [sys.executable, os.path.join(HERE, "read_hashes.py"), listing, "4"]
            if head:
                argv.append(str(head))
            reader = subprocess.Popen(argv, preexec_fn=cg.enter, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                out, err = reader.communicate(timeout=harness.TEST_TIMEOUT - 40)
            except subprocess.TimeoutExpired:
                reader.kill()
                reader.communicate(timeout=10)
                raise
        finally:
            stop.set()
            sampler.join()
        peak["took"] = time.monotonic() - t1
        self.assertEqual(reader.returncode, 0, err.decode(errors="replace")[-2000:])
        got = {}
        for line in out.decode(errors="surrogateescape").splitlines():
            h, _, path = line.partition(" ")
            got[os.path.relpath(path, mnt)] = h
        peak["hwm"] = status_bytes(pid, "VmHWM")
        return got, peak

    def check_alive(self, cg, d, mnt, what, total, names, peak):
        kills = cg.oom_kills()
        alive = d.proc.poll() is None
        stats = self.stats(mnt) if alive else {}
        print(f"\n  {what}: cgroup v{cg.version} limit {LIMIT >> 20} MiB, {total / 1e6:.0f} MB in "
              f"{len(names)} files read in {peak['took']:.1f} s; daemon peak RSS "
              f"{peak['hwm'] / (1 << 20):.1f} MiB (sampled {peak['rss'] / (1 << 20):.1f}); "
              f"cgroup peak usage {(cg.peak() or 0) / (1 << 20):.1f} MiB, peak anon "
              f"{peak['anon'] / (1 << 20):.1f} MiB, limit hits {cg.limit_hits()}, OOM kills "
              f"{kills}; served {stats.get('served')}", file=sys.stderr)
        self.assertTrue(alive, "the daemon died:\n" + harness.read_tail(d.log_path))
        self.assertEqual(kills, 0)
        # The daemon stayed within what the capacity check promised: the limit less headroom.
        self.assertLess(peak["hwm"], LIMIT - (16 << 20))

    def mount_in_cgroup(self, cg, ds):
        mnt = os.path.join(self.tmpdir("cgm"), "m")
        os.mkdir(mnt)
        # The tightest explicit configuration the check accepts for 256 MiB: 64 + 32 MiB of
        # cache, 96 MiB of the daemon's own, 16 MiB headroom; the reader shares the rest.
        d = self.mount(ds, mnt, cfg=cgroup_config(ram="64MiB", staging="32MiB"),
                       preexec_fn=cg.enter)
        self.assertIn(d.proc.pid, cg.pids())
        return d, mnt

    def test_epoch_larger_than_the_cgroup_is_read_without_oom(self):
        cg = self.cgroup()
        ds = os.path.join(self.disk_tmpdir(), "ds")
        digests = write_uncached_dataset(ds, EPOCH)
        total = sum(os.path.getsize(os.path.join(ds, r)) for r in digests)
        d, mnt = self.mount_in_cgroup(cg, ds)
        names = sorted(digests)
        random.Random(7).shuffle(names)
        self.write_manifest(mnt, "\n".join(names) + "\n")
        got, peak = self.read_in_cgroup(cg, d, mnt, names)
        wrong = [r for r in names if got.get(r) != digests[r]]
        self.check_alive(cg, d, mnt, "planned epoch", total, names, peak)
        self.assertEqual(wrong[:5], [], f"{len(wrong)} files read wrong or not at all")
        self.assertEqual(len(got), len(names))

    def test_files_read_only_at_their_start_do_not_pile_up(self):
        """A reader of headers (the first 4 KiB of each file) never reaches a file's end, so
        in no-open mode the daemon keeps each file's contents bound for its next READ
        (fs/core/node_reads.h): bounded in bytes, else they fill the cgroup."""
        cg = self.cgroup()
        ds = os.path.join(self.disk_tmpdir(), "ds")
        digests = write_uncached_dataset(ds, EPOCH, seed=26)
        heads = {}
        for rel in digests:
            with open(os.path.join(ds, rel), "rb") as f:
                heads[rel] = hashlib.sha256(f.read(4096)).hexdigest()
        total = sum(os.path.getsize(os.path.join(ds, r)) for r in digests)
        d, mnt = self.mount_in_cgroup(cg, ds)
        names = sorted(digests)
        random.Random(8).shuffle(names)
        self.write_manifest(mnt, "\n".join(names) + "\n")
        got, peak = self.read_in_cgroup(cg, d, mnt, names, head=4096)
        wrong = [r for r in names if got.get(r) != heads[r]]
        self.check_alive(cg, d, mnt, "headers of a planned epoch", total, names, peak)
        self.assertEqual(wrong[:5], [], f"{len(wrong)} files read wrong or not at all")
