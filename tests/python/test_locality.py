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
    node this module does, nodes numbered or named (several node sets);
  - holders keyed by node names (NodeRing): one node of K swapped for a new one moves the
    leaving node's samples and what the new one takes (about 1/K each, 2/(K + 1) in all), a
    node joining or leaving about 1/K; the names' order does not matter; every node's share
    of the ring is within 6 % of 1/K for K up to 1,024; the numbered form is what it was;
  - the node names come from nodes= or the environment (CLAIRFS_NODES, a Slurm job's
    SLURM_JOB_NODELIST expanded as `scontrol show hostnames` expands it), checked against the
    rank's node;
  - on a real mount, the sampler registers its rank's plan and the DataLoader reads right bytes.
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

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


# The variables the sampler takes the job's nodes from: a test sets them or runs without them.
NODE_VARS = ("CLAIRFS_NODES", "CLAIRFS_NODE", "SLURM_JOB_NODELIST", "SLURMD_NODENAME")


def without_node_vars():
    """A patch of os.environ without NODE_VARS (as the tests run outside a job)."""
    env = {k: v for k, v in os.environ.items() if k not in NODE_VARS}
    return mock.patch.dict(os.environ, env, clear=True)


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING)
class LocalitySamplerTest(unittest.TestCase):
    def setUp(self):
        patch = without_node_vars()
        patch.start()
        self.addCleanup(patch.stop)

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
        cases = [(6, 2, 7, 1003), (16, 1, 32, 5000), (5, 3, 4, 61),  # numbered
                 (["n1", "n2", "n3", "n4"], 1, 32, 5000), (["n0", "n1", "n2", "n3"], 2, 8, 3001),
                 ([f"gpu{i:03d}" for i in range(40, 0, -3)], 2, 5, 4000),
                 (["b", "a"], 3, 4, 61), (["x.example.org", "yé", "z-1", "w"], 1, 16, 2000)]
        for nodes, rpn, b, files in cases:
            names = None if isinstance(nodes, int) else nodes
            count = len(names) if names else nodes
            where = ["--node-names", ",".join(names)] if names else ["--nodes", str(nodes)]
            r = subprocess.run([os.environ["CLUSTER_SCALE_BIN"], *where,
                                "--files", str(files), "--epochs", "1", "--sampler", "locality",
                                "--ranks-per-node", str(rpn), "--batch", str(b),
                                "--print-assignment"], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = json.loads(r.stdout.splitlines()[-1])
            order = np.array(got["order"], dtype=np.int64)
            rank, held = locality.assign(order, count * rpn, rpn, b, names)
            self.assertEqual((rank // rpn).tolist(), got["node"], (nodes, rpn, b))
            self.assertEqual(int(np.count_nonzero(rank // rpn != held)), got["away"])


def held_by(indices, names):
    """The name of the node holding each index among `names`."""
    return np.array(names)[locality.holders(indices, names)]


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING)
class NodeNamesTest(unittest.TestCase):
    """Holders keyed by node names, and where the names come from."""
    N = 200_000

    def setUp(self):
        patch = without_node_vars()
        patch.start()
        self.addCleanup(patch.stop)

    def test_a_swap_moves_the_leaving_nodes_and_what_the_new_one_takes(self):
        idx = np.arange(self.N)
        for k in (2, 3, 4, 8, 16, 64):
            before = [f"n{i}" for i in range(k)]
            after = [f"n{i}" for i in range(1, k + 1)]  # n0 left, n{k} joined
            a, b = held_by(idx, before), held_by(idx, after)
            lost = float(np.mean(a == "n0"))  # the leaving node's: none of them stay put
            taken = float(np.mean((b == f"n{k}") & (a != "n0")))  # the new node's from others
            moved = float(np.mean(a != b))
            stay = 1 - moved  # a staying node holds it before and after
            print(f"\n    {k} nodes, one swapped: {moved:.4f} moved (2/(K+1) = "
                  f"{2 / (k + 1):.4f}); lost {lost:.4f}, taken {taken:.4f}", end="")
            self.assertLess(abs(lost - 1 / k), 0.05 / k + 0.005, k)
            self.assertLess(taken, 1 / k * (1 + 0.05) + 0.005, k)
            self.assertLess(abs(moved - 2 / (k + 1)), 0.05 * 2 / (k + 1) + 0.005, k)
            self.assertGreater(stay, 1 - 2 / k, k)
            # Numbered, the same swap gives every place another node: every sample moves.
            place = locality.holders(idx, k)
            self.assertTrue(np.all(np.array(before)[place] != np.array(after)[place]), k)

    def test_a_node_joining_or_leaving_moves_about_one_kth(self):
        idx = np.arange(self.N)
        for k in (4, 16, 100):
            names = [f"host-{i}" for i in range(k)]
            a = held_by(idx, names)
            joined = held_by(idx, names + ["host-new"])
            left = held_by(idx, names[:3] + names[4:])
            moved_join = float(np.mean(a != joined))
            moved_leave = float(np.mean(a != left))
            self.assertTrue(np.all(joined[a != joined] == "host-new"), k)  # only to it
            self.assertTrue(np.all(a[a != left] == "host-3"), k)  # only its own
            self.assertLess(abs(moved_join - 1 / (k + 1)), 0.06 / (k + 1) + 0.003, k)
            self.assertLess(abs(moved_leave - 1 / k), 0.06 / k + 0.003, k)

    def test_the_order_of_the_names_does_not_matter(self):
        idx = np.arange(20_000)
        names = ["c7", "a1", "b12", "gpu-0003", "gpu-0002"]
        want = held_by(idx, names)
        for perm in (names[::-1], sorted(names), names[2:] + names[:2]):
            self.assertTrue(np.array_equal(held_by(idx, perm), want), perm)
        # The sampler: the same sample goes to the same node's ranks whatever its place.
        ds = Indices(997)
        by_node = []
        for perm in (names, names[::-1]):
            s = [LocalitySampler(ds, 10, r, batch_size=4, ranks_per_node=2, nodes=perm,
                                 seed=2) for r in range(10)]
            by_node.append({perm[r // 2]: set() for r in range(10)})
            for r, x in enumerate(s):
                by_node[-1][perm[r // 2]].update(x.indices().tolist())
        away = sum(len(by_node[0][n] ^ by_node[1][n]) for n in names) / 2 / len(ds)
        self.assertLess(away, 0.15)  # only the overflow of full batches goes elsewhere

    def test_every_node_holds_about_one_kth(self):
        for k in (2, 4, 16, 128, 1024):
            ring = locality.NodeRing([f"node{i:04d}" for i in range(k)])
            pts = ring.points.astype(np.float64) / 2.0 ** 64
            arcs = np.diff(np.concatenate([[pts[-1] - 1.0], pts]))  # point p's arc ends at p
            share = np.bincount(ring.owner, weights=arcs, minlength=k) * k
            print(f"\n    {k} nodes: share x K in [{share.min():.3f}, {share.max():.3f}], "
                  f"std {share.std():.4f}", end="")
            self.assertLess(float(np.max(np.abs(share - 1))), 0.06, k)
            self.assertLess(float(share.std()), 0.025, k)
        # What 200,000 samples among 16 nodes give: the ring's share and a binomial spread.
        counts = np.bincount(locality.holders(np.arange(self.N), [f"n{i}" for i in range(16)]))
        self.assertLess(float(np.max(np.abs(counts * 16 / self.N - 1))), 0.08)

    def test_the_numbered_form_is_unchanged(self):
        self.assertEqual(locality.holders(np.arange(16), 5).tolist(),
                         [0, 0, 0, 3, 3, 3, 2, 2, 2, 3, 1, 3, 3, 0, 3, 1])
        order = locality.global_order(40, 4, 3, 0, True, False)
        want = [0, 1, 2, 0, 3, 2, 1, 3, 0, 2, 1, 3, 0, 2, 1, 0, 1, 0, 1, 3, 2, 3, 2, 3, 0, 2, 1,
                0, 3, 1, 0, 2, 3, 1, 2, 3, 2, 0, 3, 1]
        self.assertEqual(locality.assign(order, 4, 2, 3)[0].tolist(), want)
        ds = Indices(40)
        for r in range(4):
            a = LocalitySampler(ds, 4, r, seed=3, batch_size=3, ranks_per_node=2)
            b = LocalitySampler(ds, 4, r, seed=3, batch_size=3, ranks_per_node=2, nodes=2)
            self.assertIsNone(a.node_names)
            self.assertEqual(list(a), list(b))
            self.assertEqual(list(a), [i for i, x in zip(order, want) if x == r])

    def test_named_batches_are_distributed_samplers(self):
        names = ["w3", "w1", "w2"]
        ds = Indices(1003)
        mine = [LocalitySampler(ds, 6, r, seed=3, batch_size=7, ranks_per_node=2, nodes=names)
                for r in range(6)]
        theirs = [DistributedSampler(ds, 6, r, seed=3) for r in range(6)]
        self.assertEqual(global_batches(mine, 7, ds), global_batches(theirs, 7, ds))
        order, rank, held = mine[0].epoch_assignment()
        self.assertLess(float(np.mean(rank // 2 != held)), 0.2)  # 14 a node and batch

    def test_hostlists(self):
        cases = {"n[1-4]": ["n1", "n2", "n3", "n4"], "a,b": ["a", "b"],
                 "gpu[08-10,12]": ["gpu08", "gpu09", "gpu10", "gpu12"],
                 "r[1-2]n[3-4],x": ["r1n3", "r1n4", "r2n3", "r2n4", "x"],
                 "w[098-101]": ["w098", "w099", "w100", "w101"], "z": ["z"]}
        for expr, want in cases.items():
            self.assertEqual(locality.expand_hostlist(expr), want, expr)
        for bad in ("n[1-", "n]1[", "n[a-b]", "n[3-1]", ""):
            with self.assertRaises(ValueError, msg=bad):
                locality.expand_hostlist(bad)
        # Slurm's own expansion, where scontrol runs (it needs a configuration, not a cluster).
        with tempfile.TemporaryDirectory() as tmp:
            conf = os.path.join(tmp, "slurm.conf")
            with open(conf, "w") as f:
                f.write("ClusterName=t\nSlurmctldHost=localhost\nNodeName=x CPUs=1\n"
                        "PartitionName=p Nodes=x\n")
            try:
                r = subprocess.run(["scontrol", "show", "hostnames", ",".join(cases)],
                                   capture_output=True, text=True, timeout=30,
                                   env=dict(os.environ, SLURM_CONF=conf))
            except OSError:
                r = None
            if r is None or r.returncode != 0:
                self.skipTest("scontrol does not run here")
            self.assertEqual(r.stdout.split(), [n for want in cases.values() for n in want])

    def test_the_names_come_from_the_job(self):
        ds = Indices(100)
        env = {"SLURM_JOB_NODELIST": "n[1-3]", "SLURMD_NODENAME": "n2"}
        with mock.patch.dict(os.environ, env):
            self.assertEqual(locality.job_nodes(), (["n1", "n2", "n3"], "n2"))
            s = LocalitySampler(ds, 6, 2, batch_size=4, ranks_per_node=2)
            self.assertEqual(s.node_names, ["n1", "n2", "n3"])
            with self.assertRaisesRegex(ValueError, "numbered node by node"):
                LocalitySampler(ds, 6, 0, batch_size=4, ranks_per_node=2)  # rank 0 on n2
            with self.assertRaisesRegex(ValueError, "pass nodes="):
                LocalitySampler(ds, 8, 2, batch_size=4, ranks_per_node=2)  # 4 nodes, 3 named
            # nodes= wins over the environment.
            self.assertEqual(LocalitySampler(ds, 4, 0, batch_size=4, ranks_per_node=2,
                                             nodes=["a", "b"]).node_names, ["a", "b"])
        env = {"CLAIRFS_NODES": "h1,h0", "CLAIRFS_NODE": "h0", "SLURM_JOB_NODELIST": "n[1-3]"}
        with mock.patch.dict(os.environ, env):
            self.assertEqual(LocalitySampler(ds, 2, 1, batch_size=4, ranks_per_node=1)
                             .node_names, ["h1", "h0"])
        self.assertIsNone(locality.job_nodes({}))
        # Under torchrun without Slurm: the host names gathered over the process group.
        script = ("import socket, sys, torch.distributed as dist, clairfs.locality as L\n"
                  "dist.init_process_group('gloo', init_method='file://' + sys.argv[1], rank=0,"
                  " world_size=1)\n"
                  "assert L.gather_node_names(1) == [socket.gethostname()]\n"
                  "dist.destroy_process_group()\n")
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([sys.executable, "-c", script, os.path.join(tmp, "store")],
                               capture_output=True, text=True, timeout=120,
                               env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        self.assertEqual(r.returncode, 0, r.stderr)
        with self.assertRaisesRegex(ValueError, "twice"):
            LocalitySampler(ds, 2, 0, batch_size=4, ranks_per_node=1, nodes=["a", "a"])
        with self.assertRaisesRegex(ValueError, "3 node names"):
            LocalitySampler(ds, 2, 0, batch_size=4, ranks_per_node=1, nodes=["a", "b", "c"])
        with self.assertRaisesRegex(ValueError, "nodes 3"):
            LocalitySampler(ds, 2, 0, batch_size=4, ranks_per_node=1, nodes=3)


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
