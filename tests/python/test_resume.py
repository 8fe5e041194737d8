"""Resuming part-way through an epoch: a job restarted at epoch E after B batches, built with
clairfs.ResumeSampler from what a checkpoint would hold (the generator's state when epoch E
began, or the DistributedSampler's epoch), against the same job run without interruption:
it must hand out exactly the rest of that run, never fetch a skipped sample, and its
registered plan (loader_orders, register_loader) must be what it then reads. Also
register_loader's skip_batches for loaders that skip by other means. No FUSE mount needed.
"""
import itertools
import shutil
import unittest

import clairfs
from test_compact import decode
from test_orders import TORCH_MISSING, stand_in_mount, written

if TORCH_MISSING is None:
    import torch
    from torch.utils.data import (BatchSampler, DataLoader, Dataset, DistributedSampler,
                                  RandomSampler, SubsetRandomSampler)
    from clairfs import torch_order

    class Fetches(Dataset):
        """Indexes 0..n-1 that remember which were fetched (the files a job would open)."""

        def __init__(self, n):
            self.n, self.fetched = n, []

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            self.fetched.append(i)
            return i


def batches(loader, epoch):
    """One epoch of `loader` as lists of indices, calling set_epoch as a training loop does."""
    sampler = loader.sampler
    if callable(getattr(sampler, "set_epoch", None)):
        sampler.set_epoch(epoch)
    return [b.tolist() if isinstance(b, torch.Tensor) else [int(b)] for b in loader]


def flat(epoch_batches):
    return [i for b in epoch_batches for i in b]


# Each job: make(dataset, generator, resume) -> DataLoader. resume is None for the uninterrupted
# run, else the number of batches already done in the first epoch it will run; the generator is
# the one the sampler draws from (restored from the checkpoint before make is called).
def _random(bs, drop_last):
    def make(ds, g, resume):
        sampler = RandomSampler(ds, generator=g)
        if resume is not None:
            sampler = clairfs.ResumeSampler(sampler, resume * bs)
        return DataLoader(ds, batch_size=bs, drop_last=drop_last, sampler=sampler)
    return make


def _shuffle_true(bs):
    # DataLoader(shuffle=True, generator=g) made explicit, so the sampler can be wrapped; the
    # loader's own draw from g (its workers' base seed) stays where it was.
    def make(ds, g, resume):
        if resume is None:
            return DataLoader(ds, batch_size=bs, shuffle=True, generator=g)
        sampler = clairfs.ResumeSampler(RandomSampler(ds, generator=g), resume * bs)
        return DataLoader(ds, batch_size=bs, sampler=sampler, generator=g)
    return make


def _distributed(bs, rank):
    def make(ds, g, resume):
        sampler = DistributedSampler(ds, num_replicas=3, rank=rank, seed=11)
        if resume is not None:
            sampler = clairfs.ResumeSampler(sampler, resume * bs)
        return DataLoader(ds, batch_size=bs, sampler=sampler)
    return make


def _batch_level(bs, drop_last):
    def make(ds, g, resume):
        batch_sampler = BatchSampler(RandomSampler(ds, generator=g), bs, drop_last)
        if resume is not None:
            batch_sampler = clairfs.ResumeSampler(batch_sampler, resume)
        return DataLoader(ds, batch_sampler=batch_sampler)
    return make


def _not_modelled(bs):
    # SubsetRandomSampler has no fast path: the replay iterates the wrapper itself.
    def make(ds, g, resume):
        sampler = SubsetRandomSampler(range(0, len(ds), 2), generator=g)
        if resume is not None:
            sampler = clairfs.ResumeSampler(sampler, resume * bs)
        return DataLoader(ds, batch_size=bs, sampler=sampler)
    return make


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING)
class ResumeTest(unittest.TestCase):
    EPOCHS = 4
    SEED = 5

    def uninterrupted(self, make, n):
        """Every epoch's batches, and the generator state as each epoch began (a checkpoint)."""
        g = torch.Generator().manual_seed(self.SEED)
        loader = make(Fetches(n), g, None)
        states, run = [], []
        for epoch in range(self.EPOCHS):
            states.append(g.get_state())
            run.append(batches(loader, epoch))
        return states, run

    def resume(self, make, n, states, epoch, done):
        """The job restarted at `epoch` after `done` batches: (plan, what it read per epoch,
        samples fetched, whether the plan came from the fast path)."""
        g = torch.Generator()
        g.set_state(states[epoch])
        ds = Fetches(n)
        loader = make(ds, g, done)
        left = self.EPOCHS - epoch
        orders = torch_order._orders(loader.batch_sampler or loader.sampler, left, epoch, loader)
        plan = clairfs.loader_orders(loader, left, first_epoch=epoch)
        self.assertTrue(torch.equal(g.get_state(), states[epoch]), "registering moved the generator")
        read = [batches(loader, e) for e in range(epoch, self.EPOCHS)]
        if orders.entries is not None:
            self.assertEqual(orders.entries, sum(len(flat(r)) for r in read))
        return plan, read, ds.fetched, orders.entries is not None

    def check(self, make, n, fast=True):
        states, run = self.uninterrupted(make, n)
        per_epoch = len(run[0])
        for epoch, done in itertools.product((0, 1, self.EPOCHS - 1), (0, 1, per_epoch - 1)):
            with self.subTest(n=n, epoch=epoch, done=done):
                plan, read, fetched, was_fast = self.resume(make, n, states, epoch, done)
                want = [run[epoch][done:]] + run[epoch + 1:]
                self.assertEqual(read, want, "the resumed job is not the rest of the run")
                self.assertEqual(plan, [flat(r) for r in read], "the plan is not what it read")
                self.assertEqual(fetched, [i for r in read for i in flat(r)],
                                 "fetched other samples than it handed out")
                self.assertEqual(was_fast, fast)

    def test_random_sampler(self):
        for n, bs, drop_last in itertools.product((7, 40), (1, 3, 8), (False, True)):
            if n // bs >= 2:
                self.check(_random(bs, drop_last), n)

    def test_shuffle_true_made_explicit(self):
        for n, bs in ((40, 6), (9, 2)):
            self.check(_shuffle_true(bs), n)

    def test_distributed_sampler(self):
        for rank, bs in itertools.product(range(3), (2, 5)):
            self.check(_distributed(bs, rank), 31)

    def test_batch_sampler_skipping_batches(self):
        for bs, drop_last in ((4, False), (4, True), (1, False)):
            self.check(_batch_level(bs, drop_last), 22)

    def test_sampler_without_fast_path(self):
        self.check(_not_modelled(3), 30, fast=False)

    def test_skip_batches_leaves_the_first_batches_out_of_the_plan(self):
        ds = Fetches(29)
        for loader in (DataLoader(ds, batch_size=4, shuffle=True,
                                  generator=torch.Generator().manual_seed(1)),
                       DataLoader(ds, batch_size=4, drop_last=True, sampler=DistributedSampler(
                           ds, num_replicas=2, rank=1, seed=3)),
                       DataLoader(ds, batch_size=None)):
            full = clairfs.loader_orders(loader, 3, first_epoch=2)
            unit = loader.batch_size or 1
            for skip in (0, 1, 2):
                with self.subTest(loader=loader, skip=skip):
                    got = clairfs.loader_orders(loader, 3, first_epoch=2, skip_batches=skip)
                    self.assertEqual(got, [full[0][skip * unit:]] + full[1:])
        self.assertEqual(ds.fetched, [])

    def test_register_loader_with_skip_batches(self):
        root = stand_in_mount()
        self.addCleanup(shutil.rmtree, root)
        ds = Fetches(20)
        ds.samples = [(f"{root}/d/f{i}.bin", 0) for i in range(20)]
        loader = DataLoader(ds, batch_size=6, shuffle=True,
                            generator=torch.Generator().manual_seed(2))
        want = clairfs.loader_orders(loader, 2, skip_batches=2)
        self.assertEqual(clairfs.register_loader(root, loader, 2, skip_batches=2), 8 + 20)
        self.assertEqual(decode(written(root))[2], want)
        clairfs.register_loader(root, loader, 2, skip_batches=2, compact=False, stream="t")
        text = written(root).decode().split("\n")
        self.assertEqual(text[3:3 + 8], [f"d/f{i}.bin" for i in want[0]])
        self.assertEqual(text[11], "#epoch")

    def test_refusals(self):
        ds = Fetches(10)
        sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(0))
        with self.assertRaisesRegex(ValueError, "at least 0"):
            clairfs.ResumeSampler(sampler, -1)
        with self.assertRaisesRegex(ValueError, "next epoch"):
            clairfs.ResumeSampler(sampler, 10)
        loader = DataLoader(ds, batch_size=4)  # batches of 4, 4, 2
        self.assertEqual(len(clairfs.loader_orders(loader, 1, skip_batches=2)[0]), 2)
        with self.assertRaisesRegex(ValueError, "next epoch"):
            clairfs.loader_orders(loader, 1, skip_batches=3)
        wrapped = clairfs.ResumeSampler(sampler, 7)
        self.assertEqual(len(wrapped), 3)
        self.assertEqual(len(list(wrapped)), 3)
        self.assertEqual(len(wrapped), 10)  # the skip applies to one iteration


if __name__ == "__main__":
    unittest.main()
