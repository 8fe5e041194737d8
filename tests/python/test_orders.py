"""The orders clairfs.torch_order computes with tensor ops (its fast paths) against the orders
torch's own samplers and DataLoaders yield when iterated, over many configurations, and the
generator states they leave behind; then register_loader/register_dataset end to end into a
stand-in mount directory (a plain `.clairfs/` with a `plan` and a `manifest` file), decoded
with test_compact's reference decoder. No FUSE mount needed.

With CLAIRFS_BIG=1 also prints (no assertion) how long register_loader takes for 90 epochs of
an ImageNet-sized dataset (1,281,167 files), DistributedSampler and a seeded RandomSampler.
"""
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
import unittest

import clairfs
from test_compact import decode

try:
    import torch
    from torch.utils.data import (BatchSampler, DataLoader, Dataset, DistributedSampler,
                                  RandomSampler, SequentialSampler)
    from clairfs import torch_order
    TORCH_MISSING = None
except ImportError as e:
    TORCH_MISSING = f"torch not importable: {e}"


def iterate(sampler, epochs, first_epoch=0):
    """What the sampler itself yields, epoch after epoch (flattening batches)."""
    out = []
    for e in range(first_epoch, first_epoch + epochs):
        s = sampler
        while s is not None:  # as the training loop would: sampler.set_epoch(e)
            if hasattr(s, "set_epoch"):
                s.set_epoch(e)
            s = getattr(s, "sampler", None)
        out.append([i for x in sampler for i in (x if isinstance(x, list) else [x])])
    return out


def generators_of(sampler):
    gens = []
    while sampler is not None:
        g = getattr(sampler, "generator", None)
        if isinstance(g, torch.Generator):
            gens.append(g)
        sampler = getattr(sampler, "sampler", None)
    return gens


if TORCH_MISSING is None:
    class Indexes(Dataset):
        def __init__(self, n):
            self.n = n
            self.samples = [(f"/data/d{i % 3}/f{i}.bin", 0) for i in range(n)]

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return i


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING)
class FastOrderTest(unittest.TestCase):
    def check(self, make, epochs=3, first_epoch=0, fast=True):
        """sampler_orders(make()) equals iterating another make(), and the fast path (or not)
        was taken; the replay's generators end where iteration leaves the real ones."""
        sampler = make()
        before = [g.get_state() for g in generators_of(sampler)]
        orders = torch_order._orders(sampler, epochs, first_epoch, None)
        self.assertEqual(orders.entries is not None, fast, f"fast path taken: {not fast}")
        got = orders.lists()
        for g, s in zip(generators_of(sampler), before):
            self.assertTrue(torch.equal(g.get_state(), s), "computing the order moved a generator")
        want = iterate(sampler, epochs, first_epoch)
        self.assertEqual(got, want)
        if fast:
            self.assertEqual(orders.entries, sum(map(len, want)))
            replay = torch_order._Replay(make(), None, first_epoch)
            for _ in range(epochs):
                replay.next_epoch()
            clones = generators_of(replay._root)
            for g, c in zip(generators_of(sampler), clones):
                self.assertTrue(torch.equal(g.get_state(), c.get_state()),
                                "the fast path left the generator elsewhere than iteration")
        return got

    def test_distributed_sampler(self):
        n_configs = 0
        for n, replicas, shuffle, drop_last in itertools.product(
                (1, 2, 5, 7, 16, 33, 100), range(1, 9), (True, False), (False, True)):
            seed = (n * 31 + replicas) % 5 * 1000
            first = n % 4
            for rank in range(replicas):
                self.check(lambda: DistributedSampler(range(n), num_replicas=replicas, rank=rank,
                                                      shuffle=shuffle, seed=seed,
                                                      drop_last=drop_last),
                           epochs=3, first_epoch=first)
                n_configs += 1
        self.assertGreater(n_configs, 1000)

    def test_distributed_ranks_cover_the_padded_dataset(self):
        for n, r in ((10, 4), (3, 8), (1000, 7)):
            per_rank = [clairfs.sampler_orders(DistributedSampler(range(n), r, k, seed=9), 1)[0]
                        for k in range(r)]
            flat = sorted(i for o in per_rank for i in o)
            self.assertEqual(set(flat), set(range(n)))
            self.assertEqual(len(flat), -(-n // r) * r)

    def test_random_sampler(self):
        for n, num_samples, seed in itertools.product((1, 2, 3, 10, 97), (None, 1, 5, 10, 97, 194, 250),
                                                       (0, 1, 12345)):
            self.check(lambda: RandomSampler(range(n), num_samples=num_samples,
                                             generator=torch.Generator().manual_seed(seed)))

    def test_sequential_and_batch_samplers(self):
        for n in (1, 7, 64):
            self.check(lambda: SequentialSampler(range(n)))
            for bs, drop_last in itertools.product((1, 3, 8, 100), (False, True)):
                self.check(lambda: BatchSampler(SequentialSampler(range(n)), bs, drop_last))
                self.check(lambda: BatchSampler(
                    RandomSampler(range(n), generator=torch.Generator().manual_seed(n + bs)),
                    bs, drop_last))
                self.check(lambda: BatchSampler(
                    DistributedSampler(range(n), num_replicas=3, rank=1, seed=bs), bs, drop_last),
                    first_epoch=2)

    def test_other_samplers_are_iterated(self):
        class Reversed(DistributedSampler):  # a subclass may iterate as it likes
            def __iter__(self):
                return reversed(list(super().__iter__()))

        self.check(lambda: Reversed(range(20), num_replicas=2, rank=1, seed=4), fast=False)
        self.check(lambda: RandomSampler(range(20), replacement=True, num_samples=50,
                                         generator=torch.Generator().manual_seed(1)), fast=False)
        self.check(lambda: torch.utils.data.SubsetRandomSampler(
            [5, 1, 9, 3], generator=torch.Generator().manual_seed(2)), fast=False)
        self.check(lambda: BatchSampler(Reversed(range(9), num_replicas=1, rank=0), 4, True),
                   fast=False)

    def test_randperm_skip_matches_randperm(self):
        self.assertTrue(torch_order._skip_randperm_ok())
        for n in (1, 2, 5, 1000, 1281167):
            a, b = torch.Generator().manual_seed(n), torch.Generator().manual_seed(n)
            torch.randperm(n, generator=a)
            torch_order._discarded_randperm(n, b)
            self.assertTrue(torch.equal(a.get_state(), b.get_state()), n)

    def test_loaders(self):
        # What the DataLoader yields, batch after batch, against loader_orders: its own draw
        # from a shared generator moves the RandomSampler that shuffle=True builds.
        def loader_indices(loader, epochs, set_epoch=False):
            out = []
            for e in range(epochs):
                if set_epoch:
                    loader.sampler.set_epoch(e)
                out.append([int(i) for b in loader
                            for i in (b.tolist() if isinstance(b, torch.Tensor) else [b])])
            return out

        ds = Indexes(53)
        makers = [
            (lambda: DataLoader(ds, batch_size=8, shuffle=True,
                                generator=torch.Generator().manual_seed(3)), False),
            (lambda: DataLoader(ds, batch_size=8, drop_last=True, shuffle=True,
                                generator=torch.Generator().manual_seed(4)), False),
            (lambda: DataLoader(ds, batch_size=5, sampler=RandomSampler(
                ds, generator=torch.Generator().manual_seed(5))), False),
            (lambda: DataLoader(ds, batch_size=None), False),
            (lambda: DataLoader(ds, batch_size=4, drop_last=True, sampler=DistributedSampler(
                ds, num_replicas=4, rank=3, seed=6)), True),
        ]
        for make, set_epoch in makers:
            loader = make()
            orders = torch_order._orders(loader.batch_sampler or loader.sampler, 3, 0, loader)
            self.assertIsNotNone(orders.entries)
            got = clairfs.loader_orders(loader, 3)
            self.assertEqual(got, loader_indices(make(), 3, set_epoch))
            self.assertEqual(got, loader_indices(loader, 3, set_epoch))


def stand_in_mount(streams=True):
    """A directory that looks like a clairfs mount to the package: .clairfs/plan (with or
    without "streams") and .clairfs/manifest, a plain file the manifest lands in."""
    root = tempfile.mkdtemp(prefix="clairfs-py-")
    os.mkdir(os.path.join(root, ".clairfs"))
    with open(os.path.join(root, ".clairfs", "plan"), "w") as f:
        json.dump({"epochs": 0, **({"streams": []} if streams else {})}, f)
    open(os.path.join(root, ".clairfs", "manifest"), "wb").close()
    return root


def written(root):
    with open(os.path.join(root, ".clairfs", "manifest"), "rb") as f:
        return f.read()


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING)
class RegisterTest(unittest.TestCase):
    def setUp(self):
        self.root = stand_in_mount()
        self.ds = Indexes(40)
        self.ds.samples = [(os.path.join(self.root, rel), 0)
                           for rel in [f"d{i % 3}/f{i}.bin" for i in range(39)] + ["#odd/x.bin"]]

    def tearDown(self):
        shutil.rmtree(self.root)

    def test_register_loader_writes_the_compact_form_under_the_process_name(self):
        loader = DataLoader(self.ds, batch_size=6, shuffle=True,
                            generator=torch.Generator().manual_seed(1))
        n = clairfs.register_loader(self.root, loader, 3)
        stream, items, epochs = decode(written(self.root))
        self.assertEqual(stream, clairfs.default_stream_name())
        self.assertEqual(items, [f"d{i % 3}/f{i}.bin".encode() for i in range(39)] + [b"./#odd/x.bin"])
        self.assertEqual(epochs, clairfs.loader_orders(loader, 3))
        self.assertEqual(n, 120)
        # Explicit stream; a sampler the fast path does not model (spooled, same result).
        sampler = torch.utils.data.SubsetRandomSampler(range(0, 40, 2),
                                                      generator=torch.Generator().manual_seed(2))
        self.assertEqual(clairfs.register_dataset(self.root, self.ds, sampler, 2, stream="job-a"), 40)
        stream, _, epochs = decode(written(self.root))
        self.assertEqual((stream, epochs), ("job-a", clairfs.sampler_orders(sampler, 2)))

    def test_distributed_ranks_register_their_own_orders(self):
        for rank in range(4):
            sampler = DistributedSampler(self.ds, num_replicas=4, rank=rank, seed=8)
            loader = DataLoader(self.ds, batch_size=3, sampler=sampler)
            clairfs.register_loader(self.root, loader, 2, first_epoch=5, stream=f"rank{rank}")
            stream, _, epochs = decode(written(self.root))
            self.assertEqual(stream, f"rank{rank}")
            self.assertEqual(epochs, iterate(sampler, 2, 5))

    def test_text_form_when_asked_or_when_clairfs_has_no_streams(self):
        loader = DataLoader(self.ds, batch_size=None)
        clairfs.register_loader(self.root, loader, 1, compact=False)
        text = written(self.root).decode()
        name = clairfs.default_stream_name()
        self.assertTrue(text.startswith(f"#begin\n#stream {name}\n#epoch\nd0/f0.bin\n"), text[:80])
        self.assertTrue(text.endswith("./#odd/x.bin\n#end 40\n"))
        old = stand_in_mount(streams=False)
        try:
            self.ds.samples = [(os.path.join(old, os.path.relpath(p, self.root)), t)
                               for p, t in self.ds.samples]
            clairfs.register_loader(old, loader, 2)
            self.assertTrue(written(old).startswith(b"#begin\n#stream "))
            clairfs.register_loader(old, loader, 1, compact=True)
            self.assertEqual(decode(written(old))[2], [list(range(40))])
        finally:
            shutil.rmtree(old)

    def test_register_paths_and_records_forms_and_unregister(self):
        eps = [["a/1", "b/2", "a/1"], [os.path.join(self.root, "b/2")]]
        self.assertEqual(clairfs.register_paths(self.root, eps, compact=True, stream="s1"), 4)
        self.assertEqual(decode(written(self.root)), ("s1", [b"a/1", b"b/2", b"b/2"], [[0, 1, 0], [2]]))
        clairfs.register_paths(self.root, eps, stream="s1")
        self.assertEqual(written(self.root),
                         b"#begin\n#stream s1\n#epoch\na/1\nb/2\na/1\n#epoch\nb/2\n#end 4\n")
        clairfs.register_records(self.root, [[("t.tar", 0, 5), ("t.tar", 5, 5)], [["t.tar", 0, 5]]],
                                 compact=True)
        self.assertEqual(decode(written(self.root)), (None, [b"t.tar\t0+5", b"t.tar\t5+5"], [[0, 1], [0]]))
        clairfs.unregister(self.root, "s1")
        self.assertEqual(written(self.root), b"#begin\n#stream s1\n#end 0\n")
        with self.assertRaisesRegex(ValueError, "outside"):
            clairfs.unregister(self.root, "s 1")
        with self.assertRaisesRegex(ValueError, "begin with"):
            clairfs.register_paths(self.root, eps, stream="-x")


@unittest.skipUnless(os.environ.get("CLAIRFS_BIG") and TORCH_MISSING is None,
                     "CLAIRFS_BIG=1 times 90 epochs of 1.28 M files")
class ImageNetTimingTest(unittest.TestCase):
    def test_ninety_epochs(self):
        n, epochs = 1281167, 90
        root = stand_in_mount()
        self.addCleanup(shutil.rmtree, root)
        os.unlink(os.path.join(root, ".clairfs", "manifest"))
        os.symlink("/dev/null", os.path.join(root, ".clairfs", "manifest"))
        ds = Indexes(1)
        ds.n = n
        ds.samples = [(f"{root}/train/n{i % 1000:08d}/n{i % 1000:08d}_{i}.JPEG", i % 1000)
                      for i in range(n)]
        for label, loader in [
                ("DistributedSampler(num_replicas=1)", DataLoader(
                    ds, batch_size=256, sampler=DistributedSampler(ds, num_replicas=1, rank=0, seed=1))),
                ("DistributedSampler(num_replicas=8, rank=3)", DataLoader(
                    ds, batch_size=256, sampler=DistributedSampler(ds, num_replicas=8, rank=3, seed=1))),
                ("shuffle=True, seeded generator", DataLoader(
                    ds, batch_size=256, shuffle=True, generator=torch.Generator().manual_seed(1)))]:
            start, cpu = time.perf_counter(), time.process_time()
            entries = clairfs.register_loader(root, loader, epochs)
            print(f"\n    register_loader, {label}, {epochs} epochs x {n} files -> {entries} "
                  f"entries, compact, to /dev/null: {time.perf_counter() - start:.2f} s wall, "
                  f"{time.process_time() - cpu:.2f} s cpu", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
