"""clairfs.locality.LocalitySampler against torch's DistributedSampler, the cluster simulator's
copy of its assignment, and a real mount.

What it checks:
  - every global batch (the DataLoader batches of all ranks at one step) holds the same samples
    as DistributedSampler's, over many sizes, ranks per node, batch sizes, drop_last, shuffle;
  - every rank gets exactly its share of every batch, and len() is DistributedSampler's;
  - the order is a function of (seed, epoch): two samplers agree, register's fast path agrees
    with iteration, another epoch or seed gives another order;
  - ranks read what their node holds: at 128 samples per node and batch, under 5 % of a
    node's samples are held elsewhere (about 1 / sqrt(2 pi 128)); DistributedSampler 1 - 1/N;
  - the cluster simulator (CLUSTER_SCALE_BIN, --sampler locality) assigns every sample to the
    node this module does;
  - on a real mount, the sampler registers its rank's plan and the DataLoader reads right bytes.
"""
import json
import math
import os
import subprocess
import unittest

import harness

try:
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset, DistributedSampler

    import clairfs
    from clairfs import locality
    from clairfs.locality import LocalitySampler
    TORCH_MISSING = None
except ImportError as e:
    TORCH_MISSING = f"torch or numpy not importable: {e}"
    Dataset = object


class Indices(Dataset):
    """Sample i is i; .samples names a path per sample (for registering)."""

    def __init__(self, n, root="/nowhere"):
        self.samples = [(os.path.join(root, f"f{i:05d}.bin"), i) for i in range(n)]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return i


def global_batches(samplers, batch_size, dataset):
    """Per step, the sorted samples of every rank's DataLoader batch at that step."""
    loaders = [list(DataLoader(dataset, batch_size=batch_size, sampler=s)) for s in samplers]
    steps = {len(x) for x in loaders}
    assert len(steps) == 1, steps
    return [sorted(i for x in loaders for i in x[k].tolist()) for k in range(steps.pop())]


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING)
class LocalitySamplerTest(unittest.TestCase):
    CASES = [  # n, num_replicas, ranks_per_node, batch_size, drop_last, shuffle
        (1000, 4, 1, 8, False, True), (1003, 6, 2, 7, False, True), (1003, 6, 3, 5, True, True),
        (10, 4, 2, 3, False, True), (5, 8, 1, 2, False, True), (97, 8, 4, 4, True, True),
        (500, 4, 2, 16, False, False), (64, 2, 1, 64, False, True)]

    def samplers(self, cls, n, world, rpn, b, drop_last, shuffle, seed=3, epoch=0, **kw):
        ds = Indices(n)
        extra = dict(batch_size=b, ranks_per_node=rpn) if cls is LocalitySampler else {}
        out = [cls(ds, world, r, shuffle=shuffle, seed=seed, drop_last=drop_last, **extra, **kw)
               for r in range(world)]
        for s in out:
            s.set_epoch(epoch)
        return ds, out

    def test_every_global_batch_is_distributed_samplers(self):
        for case in self.CASES:
            n, world, rpn, b, drop_last, shuffle = case
            for epoch in (0, 1):
                ds, mine = self.samplers(LocalitySampler, *case, epoch=epoch)
                _, theirs = self.samplers(DistributedSampler, *case, epoch=epoch)
                self.assertEqual(global_batches(mine, b, ds), global_batches(theirs, b, ds),
                                 f"{case} epoch {epoch}")

    def test_every_rank_gets_its_exact_share(self):
        for case in self.CASES:
            n, world, rpn, b, drop_last, shuffle = case
            _, mine = self.samplers(LocalitySampler, *case)
            _, theirs = self.samplers(DistributedSampler, *case)
            lists = [list(s) for s in mine]
            for s, lst, d in zip(mine, lists, theirs):
                self.assertEqual(len(s), len(d), case)
                self.assertEqual(len(lst), len(d), case)
            # Batch by batch, each rank has as many as DistributedSampler gives it.
            for k in range(0, len(lists[0]), b):
                self.assertEqual({len(lst[k:k + b]) for lst in lists}, {len(lists[0][k:k + b])})

    def test_the_order_is_reproducible_from_the_seed(self):
        case = (1003, 6, 2, 7, False, True)
        _, a = self.samplers(LocalitySampler, *case, epoch=2)
        _, b = self.samplers(LocalitySampler, *case, epoch=2)
        self.assertEqual([list(s) for s in a], [list(s) for s in b])
        # What register computes (the fast path, on copies) is what iteration yields.
        orders = clairfs.sampler_orders(a[1], 3, first_epoch=1)
        for k, e in enumerate((1, 2, 3)):
            a[1].set_epoch(e)
            self.assertEqual(orders[k], list(a[1]))
        _, c = self.samplers(LocalitySampler, *case, epoch=3)
        self.assertNotEqual(list(b[0]), list(c[0]))
        _, d = self.samplers(LocalitySampler, *case, seed=4, epoch=2)
        self.assertNotEqual(list(b[0]), list(d[0]))

    def test_ranks_read_what_their_node_holds(self):
        n, nodes, rpn, b = 20000, 8, 4, 32  # 128 samples per node and batch
        ds, mine = self.samplers(LocalitySampler, n, nodes * rpn, rpn, b, False, True)
        order, rank, held = mine[0].epoch_assignment()
        away = float(np.mean(rank // rpn != held))
        expect = math.sqrt((nodes - 1) / nodes) / math.sqrt(2 * math.pi * b * rpn)
        print(f"\n    8 nodes x 4 ranks, 32 per rank: {away:.4f} held elsewhere "
              f"(about {expect:.4f})", end="")
        self.assertLess(away, 0.05)
        self.assertLess(abs(away - expect), 0.01)
        for s in mine[::rpn]:  # every node alike
            self.assertLess(s.peer_fraction(), 0.05)
        # DistributedSampler's ranks: a node holds 1/N of what it reads.
        _, theirs = self.samplers(DistributedSampler, n, nodes * rpn, rpn, b, False, True)
        node_of = {i: r // rpn for r, s in enumerate(theirs) for i in s}
        idx = np.array(sorted(node_of), dtype=np.int64)
        there = np.array([node_of[i] for i in idx]) != locality.holders(idx, nodes)
        self.assertGreater(float(np.mean(there)), 0.8)

    def test_arguments(self):
        ds = Indices(10)
        with self.assertRaises(TypeError):
            LocalitySampler(ds, 4, 0)  # batch_size is required
        with self.assertRaisesRegex(ValueError, "multiple of ranks_per_node"):
            LocalitySampler(ds, 6, 0, batch_size=2, ranks_per_node=4)
        with self.assertRaisesRegex(ValueError, "batch_size"):
            LocalitySampler(ds, 4, 0, batch_size=0, ranks_per_node=1)
        old = os.environ.get("LOCAL_WORLD_SIZE")
        os.environ["LOCAL_WORLD_SIZE"] = "2"
        try:
            self.assertEqual(LocalitySampler(ds, 4, 3, batch_size=2).node, 1)
        finally:
            if old is None:
                del os.environ["LOCAL_WORLD_SIZE"]
            else:
                os.environ["LOCAL_WORLD_SIZE"] = old

    @unittest.skipUnless(os.environ.get("CLUSTER_SCALE_BIN"), "CLUSTER_SCALE_BIN not set")
    def test_the_simulator_assigns_as_the_sampler(self):
        for nodes, rpn, b, files in ((6, 2, 7, 1003), (16, 1, 32, 5000), (5, 3, 4, 61)):
            r = subprocess.run([os.environ["CLUSTER_SCALE_BIN"], "--nodes", str(nodes),
                                "--files", str(files), "--epochs", "1", "--sampler", "locality",
                                "--ranks-per-node", str(rpn), "--batch", str(b),
                                "--print-assignment"], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = json.loads(r.stdout.splitlines()[-1])
            order = np.array(got["order"], dtype=np.int64)
            rank, held = locality.assign(order, nodes * rpn, rpn, b)
            self.assertEqual((rank // rpn).tolist(), got["node"], (nodes, rpn, b))
            self.assertEqual(int(np.count_nonzero(rank // rpn != held)), got["away"])


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING)
class LocalitySamplerMountTest(harness.ClairfsCase):
    FILES = 203

    def test_it_registers_its_plan_and_reads_right_bytes(self):
        data = os.path.join(self.tmpdir("loc"), "data")
        os.makedirs(data)
        for i in range(self.FILES):
            with open(os.path.join(data, f"f{i:05d}.bin"), "wb") as f:
                f.write(bytes([i % 251]) * (500 + i))
        self.mount(data)

        class Files(Indices):
            def __getitem__(self, i):
                with open(self.samples[i][0], "rb") as f:
                    return int(f.read() == bytes([i % 251]) * (500 + i))

        ds = Files(self.FILES, data)
        # Two ranks of one node, each registering its own stream for 2 epochs.
        samplers = [LocalitySampler(ds, 4, r, seed=5, batch_size=8, ranks_per_node=2,
                                    mount=data, epochs=2, stream=f"rank{r}") for r in (0, 1)]
        streams = {s["name"]: s for s in clairfs.plan(data)["streams"]}
        for r, s in enumerate(samplers):
            self.assertEqual(streams[f"rank{r}"]["entries"], 2 * len(s))
        for epoch in (0, 1):
            for s in samplers:
                s.set_epoch(epoch)
                got = [x for batch in DataLoader(ds, batch_size=8, sampler=s) for x in batch]
                self.assertEqual(len(got), len(s))
                self.assertTrue(all(int(x) == 1 for x in got), "a wrong byte")


if __name__ == "__main__":
    unittest.main()
