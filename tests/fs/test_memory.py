"""The daemon's memory stays within its configured budget (RAM tier + staging window) plus a
small overhead, while 4 readers go through a dataset several times larger than that budget."""
import hashlib
import os
import random
import sys
import threading
import time

from harness import ClairfsCase, config
import treeutil as tu

NFILES = 1500
RAM = 32 << 20
STAGING = 8 << 20
# Allowed above the budget: open handles (4 readers x a file), the plan, thread stacks and
# allocator slack. The measured figure is printed and recorded in docs/benchmarks.md.
OVERHEAD = 24 << 20


def vm(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


class MemoryBudgetTest(ClairfsCase):
    def test_rss_within_budget(self):
        if os.environ.get("CLAIRFS_SANITIZED"):
            self.skipTest("RSS is not meaningful under sanitizers (shadow memory, quarantine)")
        rng = random.Random(5)
        ds = os.path.join(self.tmpdir("mem"), "ds")
        digests = {}
        for i in range(NFILES):
            rel = f"c{i % 10}/f{i:05d}.bin"
            data = rng.randbytes(rng.randint(60_000, 140_000))
            os.makedirs(os.path.dirname(os.path.join(ds, rel)), exist_ok=True)
            tu.write_file(os.path.join(ds, rel), data)
            digests[rel] = hashlib.sha256(data).digest()
        total = sum(os.path.getsize(os.path.join(ds, r)) for r in digests)
        self.assertGreater(total, 3 * (RAM + STAGING))
        names = sorted(digests)
        epochs = []
        for _ in range(2):
            rng.shuffle(names)
            epochs.append(list(names))

        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        d = self.mount(ds, mnt, cfg=config(ram=str(RAM), staging=str(STAGING)))
        pid = d.proc.pid
        base = vm(pid, "VmRSS")
        self.write_manifest(mnt, "".join("#epoch\n" + "\n".join(e) + "\n" for e in epochs))
        peak = [vm(pid, "VmRSS")]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], vm(pid, "VmRSS"))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        bad = []
        try:
            for epoch in epochs:
                it = iter(epoch)
                lock = threading.Lock()

                def reader():
                    while True:
                        with lock:
                            rel = next(it, None)
                        if rel is None:
                            return
                        with open(os.path.join(mnt, rel), "rb") as f:
                            if hashlib.sha256(f.read()).digest() != digests[rel]:
                                bad.append(rel)

                threads = [threading.Thread(target=reader) for _ in range(4)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                for rel in epoch:  # every read of the next epoch reaches the daemon too
                    fd = os.open(os.path.join(mnt, rel), os.O_RDONLY)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    os.close(fd)
        finally:
            stop.set()
            sampler.join()
        self.assertEqual(bad, [])
        hwm = vm(pid, "VmHWM")
        stats = self.stats(mnt)
        growth = max(peak[0], hwm) - base
        print(f"\n  memory: dataset {total >> 20} MiB, budget {(RAM + STAGING) >> 20} MiB, "
              f"RSS {base >> 20} MiB at mount, peak growth {growth / (1 << 20):.1f} MiB "
              f"(overhead {(growth - RAM - STAGING) / (1 << 20):.1f} MiB); served {stats['served']}",
              file=sys.stderr)
        self.assertLessEqual(stats["ram_bytes"], RAM)
        self.assertLessEqual(growth, RAM + STAGING + OVERHEAD,
                             f"peak RSS grew by {growth >> 20} MiB; stats {stats}")
        self.assertEqual(stats["file_reads"], 2 * NFILES)
