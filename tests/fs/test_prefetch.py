"""Test 7: with a registered plan, reads are served from the RAM tier and the staging window."""
import os
import random
import sys
import time

from harness import ClairfsCase, config
import treeutil as tu

NFILES = 600


class PrefetchTest(ClairfsCase):
    @classmethod
    def setUpClass(cls):
        rng = random.Random(77)
        cls.base = cls.class_tmpdir("pf")
        cls.ds = os.path.join(cls.base, "ds")
        cls.files = {}
        for i in range(NFILES):
            rel = f"d{i % 6}/f{i:03d}.bin"
            cls.files[rel] = rng.randbytes(rng.randint(20_000, 60_000))
        cls.files_unplanned = {"extra/unplanned.bin": rng.randbytes(30_000)}
        for rel, data in {**cls.files, **cls.files_unplanned}.items():
            os.makedirs(os.path.dirname(os.path.join(cls.ds, rel)), exist_ok=True)
            tu.write_file(os.path.join(cls.ds, rel), data)
        cls.total = sum(len(d) for d in cls.files.values())
        names = sorted(cls.files)
        cls.epochs = []
        for _ in range(2):
            rng.shuffle(names)
            cls.epochs.append(list(names))

    def read_check(self, mnt, rel, expected):
        with open(os.path.join(mnt, rel), "rb") as f:
            data = f.read()
        self.assertEqual(len(data), len(expected), rel)
        self.assertTrue(data == expected, f"{rel}: wrong bytes")
        return len(data)

    def test_prefetch_serves_reads(self):
        ram = self.total // 2
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        # keep_cache off: every read reaches the daemon, so bytes_read is exact.
        self.mount(self.ds, mnt, cfg=config(ram=str(ram), staging="2MiB", keep_cache=False))
        with open(os.path.join(mnt, ".clairfs", "manifest"), "w") as f:
            for i, epoch in enumerate(self.epochs):
                f.write("#epoch\n" + "\n".join(epoch) + "\n")
        plan = self.plan(mnt)
        self.assertEqual((plan["epochs"], plan["entries"], plan["files"], plan["bytes"]),
                         (2, 2 * NFILES, NFILES, self.total), plan)
        tier = plan["tiers"][0]
        self.assertEqual(tier["capacity"], ram, plan)
        self.assertTrue(0 < tier["bytes"] <= ram, plan)
        self.assertGreaterEqual(tier["objects"], NFILES // 3, plan)
        time.sleep(1.5)

        start = time.monotonic()
        read = 0
        for epoch in self.epochs:
            for rel in epoch:
                read += self.read_check(mnt, rel, self.files[rel])
        elapsed = time.monotonic() - start
        stats = self.stats(mnt)
        served = stats["served"]
        print(f"\n  prefetch: {2 * NFILES} reads in {elapsed:.2f}s; served {served}; "
              f"stall_ns {stats.get('stall_ns')}", file=sys.stderr)
        self.assertEqual(stats["file_reads"], 2 * NFILES, stats)
        self.assertEqual(stats["unplanned_file_reads"], 0, stats)
        self.assert_bytes_read(stats["bytes_read"], read,
                               stats["read_requests"] - stats["file_reads"], stats)
        self.assertEqual(read, 2 * self.total)
        ratio = (served["ram"] + served["staging"]) / max(1, stats["file_reads"])
        self.assertGreaterEqual(ratio, 0.95, f"served from tiers: {ratio:.3f}; stats {stats}")
        self.assertEqual(stats["prefetch"]["planned_files"], NFILES, stats)
        # Every planned file came from the original at least once, no entry more than once;
        # the RAM tier kept within its capacity.
        self.assertGreaterEqual(stats["backing_bytes"], self.total, stats)
        self.assertLessEqual(stats["backing_bytes"], 2 * self.total, stats)
        self.assertLessEqual(stats["ram_bytes"], ram, stats)

        rel, data = next(iter(self.files_unplanned.items()))
        self.read_check(mnt, rel, data)
        after = self.stats(mnt)
        self.assertEqual(after["unplanned_file_reads"], stats["unplanned_file_reads"] + 1, after)
        self.assertGreater(after["served"]["backing"], served["backing"], after)
        self.assertEqual(after["file_reads"], stats["file_reads"] + 1, after)
        self.assert_bytes_read(after["bytes_read"] - stats["bytes_read"], len(data),
                               after["read_requests"] - stats["read_requests"] - 1, after)
