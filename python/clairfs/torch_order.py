"""The read order of a PyTorch job, computed ahead of time and registered with clairfs.

A seeded sampler's order is a function of its state, so it can be known before the epoch
starts: this module iterates *copies* of the sampler (its torch.Generator objects cloned with
get_state/set_state), never the user's, so the training loop later yields exactly the indices
registered here. Written against torch 1.13; tests/python checks it against the real loader.

The common samplers (SequentialSampler, RandomSampler with a generator, DistributedSampler,
and BatchSampler around them, of exactly these classes) are computed with torch tensor ops
(_fast_order) instead of being iterated; tests/python/test_orders.py checks that they agree
with iteration, generator states included. Anything else is iterated.

Importing this module imports torch; `clairfs` imports it only when one of its names is used.
"""
from __future__ import annotations

import contextlib
import copy
import itertools
import operator
import random
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import torch
from torch.utils.data import (BatchSampler, ConcatDataset, DistributedSampler, IterableDataset,
                              RandomSampler, Sampler, SequentialSampler, Subset,
                              SubsetRandomSampler, WeightedRandomSampler)

from .control import (default_stream_name, manifest_line, plan, relative_paths,
                      write_compact_manifest, write_manifest)

if TYPE_CHECKING:
    from torch.utils.data import DataLoader, Dataset

    from .control import StrPath

# Sampler classes of this package that compute an epoch's order themselves, deterministically
# from their state and set_epoch (no generator): class -> function(sampler) giving the next
# iteration's order as an int64 tensor; their length is num_samples. clairfs.locality adds its.
FAST_SAMPLERS: dict[type, Any] = {}

# Samplers whose order comes from `self.generator`, or from a fresh seed drawn from torch's
# global RNG at every iteration when it is None (unknowable in advance).
_SEEDED_BY_GENERATOR = (RandomSampler, SubsetRandomSampler, WeightedRandomSampler)


def dataset_paths(dataset: Dataset[Any]) -> list[str]:
    """The file each sample is read from, by index: a list where item i is what dataset[i] opens.

    Understands datasets with `.samples` (torchvision ImageFolder and DatasetFolder: a list of
    (path, target)) or `.imgs`, and Subset and ConcatDataset built from them. Raises TypeError
    for anything else: use clairfs.register_paths with the paths in read order.
    """
    if isinstance(dataset, Subset):
        base = dataset_paths(dataset.dataset)
        return [base[operator.index(i)] for i in dataset.indices]
    if isinstance(dataset, ConcatDataset):
        return [p for part in dataset.datasets for p in dataset_paths(part)]
    samples = getattr(dataset, "samples", None)
    if samples is None:
        samples = getattr(dataset, "imgs", None)
    if samples is None:
        raise TypeError(f"{type(dataset).__name__} has no .samples (as ImageFolder and "
                        f"DatasetFolder have); register its paths with clairfs.register_paths")
    if isinstance(samples, list) and set(map(type, samples)) == {tuple}:
        return list(map(operator.itemgetter(0), samples))  # ImageFolder's (path, target)s, quickly
    return [s[0] if isinstance(s, (tuple, list)) else s for s in samples]


class ResumeSampler(Sampler):
    """`sampler` (a sampler, or a batch sampler) whose next iteration leaves out its first
    `skip` items (indices; batches for a batch sampler); later iterations are `sampler`'s own.

    For a job resuming part-way through an epoch from a checkpoint: with `sampler` in the state
    it had when that epoch began (DistributedSampler: set_epoch; a seeded generator: the state
    saved at the epoch's start), the loader hands out exactly the rest of that epoch, and no
    file of the skipped batches is read. The skipped items are still drawn from `sampler`, so
    its generator moves as over a whole epoch and the epochs after it are unchanged.
    register_loader and loader_orders replay it like any sampler, so the registered plan starts
    where the loader does. `len()` is the length of the next iteration. set_epoch is passed on.
    """

    def __init__(self, sampler: Iterable[Any], skip: int) -> None:
        skip = operator.index(skip)
        if skip < 0:
            raise ValueError(f"skip must be at least 0, not {skip}")
        try:
            length = len(sampler)  # type: ignore[arg-type]  # unsized: TypeError
        except TypeError:
            length = None
        if length is not None and skip >= length > 0:
            raise ValueError(f"skipping {skip} of the {length} items leaves nothing of the epoch: "
                             f"resume at the start of the next epoch instead")
        self.sampler: Any = sampler
        self.skip = skip  # items still to leave out: set to 0 when an iteration begins

    def __iter__(self) -> Iterator[Any]:
        skip, self.skip = self.skip, 0
        items = iter(self.sampler)
        for _ in itertools.islice(items, skip):
            pass
        yield from items

    def __len__(self) -> int:
        return max(0, len(self.sampler) - self.skip)

    def set_epoch(self, epoch: int) -> None:
        if callable(getattr(self.sampler, "set_epoch", None)):
            self.sampler.set_epoch(epoch)


@contextlib.contextmanager
def _global_rng_kept():
    """Restores torch's global CPU RNG and Python's `random` afterwards: computing an order
    must not change what the job's own random draws (model init, augmentation) will be."""
    torch_state, py_state = torch.get_rng_state(), random.getstate()
    try:
        yield
    finally:
        torch.set_rng_state(torch_state)
        random.setstate(py_state)


def _unseeded(sampler, seen=None):
    """The first sampler in the chain (sampler, its .sampler, ...) whose order is unknowable."""
    seen = seen if seen is not None else set()
    if id(sampler) in seen or not hasattr(sampler, "__dict__"):
        return None
    seen.add(id(sampler))
    if isinstance(sampler, _SEEDED_BY_GENERATOR) and sampler.generator is None:
        return sampler
    for value in vars(sampler).values():
        if isinstance(value, Sampler):
            found = _unseeded(value, seen)
            if found is not None:
                return found
    return None


# ---------------------------------------------------------------- fast paths

_RANDPERM_32 = (1 << 32) // 20  # below this torch's CPU randperm draws n - 1 32-bit numbers
_skip_checked = None


def _skip_randperm_ok():
    """Whether drawing n - 1 int32 numbers moves a CPU generator exactly as randperm(n) does
    (as in torch 1.13); checked once per process on a few sizes, so another torch falls back
    to computing the permutation it will discard."""
    global _skip_checked
    if _skip_checked is None:
        ok = True
        for n in (2, 3, 31, 1000, 4097):
            a, b = torch.Generator(), torch.Generator()
            a.manual_seed(n)
            b.manual_seed(n)
            torch.randperm(n, generator=a)
            torch.empty(n - 1, dtype=torch.int32).random_(generator=b)
            ok = ok and torch.equal(a.get_state(), b.get_state())
        _skip_checked = ok
    return _skip_checked


def _discarded_randperm(n, g):
    """Moves g as torch.randperm(n, generator=g) would, without the permutation if possible."""
    if n <= 1:
        return
    if n < _RANDPERM_32 and _skip_randperm_ok():
        torch.empty(n - 1, dtype=torch.int32).random_(generator=g)
    else:
        torch.randperm(n, generator=g)


def _random_order(s):
    # RandomSampler without replacement: num_samples // n whole permutations, then the first
    # num_samples % n of one more, which torch draws even when it keeps none of it.
    n, g = len(s.data_source), s.generator
    whole, rest = divmod(s.num_samples, n)
    parts = [torch.randperm(n, generator=g) for _ in range(whole)]
    if rest:
        parts.append(torch.randperm(n, generator=g)[:rest])
    else:
        _discarded_randperm(n, g)
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _distributed_order(s):
    # DistributedSampler: a permutation seeded by seed + epoch (or 0..n-1), repeated to
    # total_size (or cut to it with drop_last), then every num_replicas-th from rank.
    n = len(s.dataset)
    if s.shuffle:
        g = torch.Generator()
        g.manual_seed(s.seed + s.epoch)
        order = torch.randperm(n, generator=g)
    else:
        order = torch.arange(n)
    if s.total_size > n:
        order = order.repeat(-(-s.total_size // n))
    return order[:s.total_size][s.rank::s.num_replicas]


def _fast_order(s):
    """A function returning the next iteration of sampler `s` (a copy, see _Replay) as an int64
    tensor, moving its generator exactly as iterating it would; None when `s` is not one of
    the classes modelled here (a subclass may iterate differently) or a case torch refuses."""
    t = type(s)
    if t is SequentialSampler:
        return lambda: torch.arange(len(s.data_source))
    if t is RandomSampler:
        g = s.generator
        if (s.replacement or not isinstance(g, torch.Generator) or g.device.type != "cpu"
                or len(s.data_source) < 1 or s.num_samples < 1):
            return None
        return lambda: _random_order(s)
    if t is DistributedSampler:
        n = len(s.dataset)
        ok = (n >= 1 and s.num_replicas >= 1 and 0 <= s.rank < s.num_replicas
              and s.total_size == s.num_samples * s.num_replicas
              and (s.total_size <= n if s.drop_last else s.total_size >= n))
        return (lambda: _distributed_order(s)) if ok else None
    if t in FAST_SAMPLERS:
        return lambda: FAST_SAMPLERS[t](s)
    if t is BatchSampler:
        inner = _fast_order(s.sampler)
        bs = s.batch_size
        if inner is None or not isinstance(bs, int) or bs < 1:
            return None
        if s.drop_last:  # the sampler is read to its end, the tail batch is not handed out
            return lambda: (lambda o: o[:len(o) // bs * bs])(inner())
        return inner
    if t is ResumeSampler:
        inner = _fast_order(s.sampler)
        if inner is None or not isinstance(s.skip, int):
            return None
        unit = _skip_unit(s)

        def resumed():
            order = inner()  # drawn whole, as iteration draws it
            skip, s.skip = s.skip, 0
            return order[skip * unit:]
        return resumed
    return None


def _skip_unit(s):
    """Indices per item skipped by ResumeSampler `s`: a batch sampler's skipped batches are all
    whole (only the last batch of an iteration can be short, and it is never skipped alone)."""
    return s.sampler.batch_size if type(s.sampler) is BatchSampler else 1


def _fast_length(s, first=False):
    """The length of an iteration of a sampler _fast_order handles: the next one if `first`
    (a ResumeSampler's skip applies to it), else any later one."""
    t = type(s)
    if t is SequentialSampler:
        return len(s.data_source)
    if t is RandomSampler or t is DistributedSampler or t in FAST_SAMPLERS:
        return s.num_samples
    if t is ResumeSampler:
        n = _fast_length(s.sampler, first)
        return max(0, n - s.skip * _skip_unit(s)) if first else n
    n = _fast_length(s.sampler, first)  # BatchSampler
    return n // s.batch_size * s.batch_size if s.drop_last else n


class _Replay:
    """A copy of a sampler (and of the samplers it wraps) with cloned generators, iterated
    epoch after epoch as the DataLoader would iterate the original."""

    def __init__(self, index_sampler, loader, first_epoch):
        self._generators = {}  # id(original generator) -> clone; one clone per original
        self._samplers = []    # every copied sampler, for set_epoch
        self._root = self._copy(index_sampler)
        self._epoch = first_epoch
        self._loader = loader
        # The DataLoader draws its workers' base seed from loader.generator each time it makes
        # an iterator, after creating the sampler's iterator but before the sampler's first
        # draw. That draw shifts the order only when the sampler uses the same generator
        # (DataLoader(shuffle=True, generator=g) does exactly that).
        gen = getattr(loader, "generator", None)
        self._seed_generator = self._generators.get(id(gen)) if gen is not None else None
        self._made_iterators = getattr(loader, "_iterator", None) is not None
        self.fast = _fast_order(self._root)

    def _copy(self, s):
        if not hasattr(s, "__dict__"):
            if iter(s) is s:
                raise TypeError("the sampler is a one-shot iterator: its order cannot be read ahead")
            return s  # a list or range: iterating it changes nothing
        c = copy.copy(s)
        for name, value in list(vars(c).items()):
            if isinstance(value, torch.Generator):
                clone = self._generators.get(id(value))
                if clone is None:
                    clone = torch.Generator(device=value.device)
                    clone.set_state(value.get_state())
                    self._generators[id(value)] = clone
                setattr(c, name, clone)
            elif isinstance(value, Sampler):
                setattr(c, name, self._copy(value))
        self._samplers.append(c)
        return c

    def next_epoch(self):
        """The indices of the next epoch, in the order the loader hands them to its workers:
        an int64 tensor on the fast path, else a list."""
        for s in self._samplers:
            if callable(getattr(s, "set_epoch", None)):
                s.set_epoch(self._epoch)
        loader = self._loader
        persistent = loader is not None and loader.persistent_workers and loader.num_workers > 0
        if self._seed_generator is not None and not (persistent and self._made_iterators):
            torch.empty((), dtype=torch.int64).random_(generator=self._seed_generator)
        self._made_iterators = True
        self._epoch += 1
        if self.fast is not None:
            return self.fast()
        out = []
        for item in self._root:
            try:
                out.append(operator.index(item))
            except TypeError:
                out.extend(operator.index(i) for i in item)  # a batch of indices
        return out


class _Orders:
    """The orders of `epochs` epochs, produced one at a time when iterated (each an int64
    tensor on the fast path, else a list); `entries`: their total when known in advance."""

    def __init__(self, index_sampler, epochs, first_epoch, loader):
        self._args = (index_sampler, loader, first_epoch)
        self.epochs = epochs
        replay = _Replay(*self._args)
        self.entries = None
        if replay.fast is not None:
            root = replay._root
            self.entries = _fast_length(root, True) + (epochs - 1) * _fast_length(root)

    def __iter__(self):
        replay = _Replay(*self._args)
        for _ in range(self.epochs):
            with _global_rng_kept():
                yield replay.next_epoch()

    def lists(self):
        return [o.tolist() if isinstance(o, torch.Tensor) else o for o in self]


def _orders(index_sampler, epochs, first_epoch, loader):
    """Checks that the order is knowable, then returns an _Orders."""
    if epochs < 1:
        raise ValueError("epochs must be at least 1")
    bad = _unseeded(index_sampler)
    if bad is not None:
        raise ValueError(
            f"{type(bad).__name__} has no generator: it draws a new seed from torch's global RNG "
            f"every epoch, so its order cannot be known in advance. Give it one: "
            f"generator=torch.Generator().manual_seed(SEED) (for DataLoader(shuffle=True), pass "
            f"generator= to the DataLoader)")
    orders = _Orders(index_sampler, epochs, first_epoch, loader)
    if orders.entries is not None:
        return orders  # computed by _fast_order: reproducible by construction
    with _global_rng_kept():  # two copies must agree, or the sampler has hidden randomness
        a = _Replay(index_sampler, loader, first_epoch).next_epoch()
        b = _Replay(index_sampler, loader, first_epoch).next_epoch()
    if a != b:
        raise ValueError(f"{type(index_sampler).__name__} gave two different orders from the same "
                         f"state: it is not reproducible (is its randomness in a torch.Generator "
                         f"attribute?)")
    return orders


def sampler_orders(sampler: Iterable[Any], epochs: int, first_epoch: int = 0) -> list[list[int]]:
    """The indices `sampler` will yield in each of its next `epochs` iterations, as lists.

    The sampler, its generator and torch's global RNG are left as they were. Handles
    SequentialSampler, RandomSampler/SubsetRandomSampler/WeightedRandomSampler with a seeded
    `generator` (iteration k of the returned list is the sampler's k-th iteration from now),
    DistributedSampler (epoch k is the order after set_epoch(first_epoch + k), which the
    training loop must call as usual), BatchSampler around any of these (flattened), and other
    samplers whose randomness lives in torch.Generator attributes. Raises ValueError for a
    sampler whose order cannot be known (no generator, or two copies disagree).

    Iterating a sampler directly is what this models; a DataLoader can shift a shared
    generator between epochs: for a loader use loader_orders.
    """
    return _orders(sampler, epochs, first_epoch, None).lists()


def _loader_index_sampler(loader, skip_batches):
    """What the loader iterates (its batch sampler, else its sampler), with the first
    skip_batches items of the next iteration left out (for the replay only)."""
    if isinstance(loader.dataset, IterableDataset):
        raise TypeError("an IterableDataset decides its own order: register it with register_paths")
    index_sampler = loader.batch_sampler if loader.batch_sampler is not None else loader.sampler
    skip_batches = operator.index(skip_batches)
    if skip_batches == 0:
        return index_sampler
    return ResumeSampler(index_sampler, skip_batches)


def loader_orders(loader: DataLoader[Any], epochs: int, first_epoch: int = 0, *,
                  skip_batches: int = 0) -> list[list[int]]:
    """The dataset indices `loader` will fetch in each of its next `epochs` epochs, as lists.

    Call it before the first `for batch in loader`. Includes what the DataLoader does besides
    iterating its sampler: batches (drop_last drops the tail), and the base-seed draw from
    `loader.generator` at every new iterator (once with persistent_workers), which moves a
    RandomSampler built by shuffle=True along the same generator. With num_workers > 0 the
    workers open files a little out of this order, which clairfs tolerates; the order of
    the returned indices is the order batches come out. skip_batches: as for register_loader.
    Raises TypeError for an IterableDataset (it has no sampler) and ValueError as
    sampler_orders does.
    """
    index_sampler = _loader_index_sampler(loader, skip_batches)
    return _orders(index_sampler, epochs, first_epoch, loader).lists()


def _register(mount, dataset, orders, root, append, stream, compact):
    absolute = dataset_paths(dataset)
    root = mount if root is None else root
    if stream is None:
        stream = default_stream_name()
    if compact is None:
        compact = "streams" in plan(mount)  # a clairfs with streams reads the compact form
    if compact:
        from . import compact as form
        items = form.items_under(absolute, root)
        if items is None:
            items = relative_paths(absolute, root)
        return write_compact_manifest(mount, items, iter(orders), append=append, stream=stream,
                                      epoch_count=orders.epochs if orders.entries else None,
                                      entry_count=orders.entries)
    lines = [manifest_line(p) for p in relative_paths(absolute, root)]

    def epochs():
        for order in orders:
            yield [lines[i] for i in (order.tolist() if isinstance(order, torch.Tensor) else order)]

    return write_manifest(mount, epochs(), append=append, stream=stream)


def register_dataset(mount: StrPath, dataset: Dataset[Any], sampler: Iterable[Any] | None = None,
                     epochs: int = 1, *, first_epoch: int = 0, root: StrPath | None = None,
                     append: bool = False, stream: str | None = None,
                     compact: bool | None = None) -> int:
    """Registers with the clairfs mount `mount` the files `sampler` makes `dataset` read.

    dataset: see dataset_paths. Its paths must lie under `root` (default: the mount point),
      i.e. the dataset should be built over the mount.
    sampler: see sampler_orders; None means SequentialSampler (DataLoader's shuffle=False).
    epochs, first_epoch: how many epochs to register; first_epoch is passed to set_epoch.
    append: add the epochs to the stream's plan instead of replacing it.
    stream: the name of the stream to register (docs/control-interface.md, "Streams"):
      None, the default, is clairfs.default_stream_name(), unique to this process (and rank),
      so each process of a job has its own stream and registering again replaces only it.
    compact: True writes the compact (binary) form, False the text form; None, the default,
      the compact form if the mount's clairfs has streams (its plan lists "streams").

    Every path is checked to be under `root` before anything is written. Returns the number of
    entries registered. Raises ValueError (outside root, unknowable order), TypeError (dataset
    without paths), clairfs.ManifestError (clairfs rejected it, e.g. a file is missing).
    Epochs are produced one at a time, so a long plan is never held whole.
    """
    if sampler is None:
        sampler = SequentialSampler(dataset)  # type: ignore[arg-type]  # a sized dataset
    orders = _orders(sampler, epochs, first_epoch, None)
    return _register(mount, dataset, orders, root, append, stream, compact)


def register_loader(mount: StrPath, loader: DataLoader[Any], epochs: int = 1, *,
                    first_epoch: int = 0, skip_batches: int = 0, root: StrPath | None = None,
                    append: bool = False, stream: str | None = None,
                    compact: bool | None = None) -> int:
    """Registers the files the DataLoader `loader` will read in its next `epochs` epochs.

    Like register_dataset with loader.dataset and the loader's (batch) sampler, including the
    loader's own use of its generator (see loader_orders). Call it before iterating `loader`.
    Under torchrun or mpiexec every rank calls it with its own DistributedSampler and
    registers its own stream (default_stream_name() includes the rank).
    stream: the name of the stream to register (docs/control-interface.md, "Streams"):
      None, the default, is clairfs.default_stream_name(), unique to this process (and rank),
      so each process of a job has its own stream and registering again replaces only it.
    compact: True writes the compact (binary) form, False the text form; None, the default,
      the compact form if the mount's clairfs has streams (its plan lists "streams").
    skip_batches: leave the first skip_batches batches of the first registered epoch out of
      the plan, for a loader that will enter that epoch part-way by means the replay cannot
      see (one that restores its own position from a checkpoint). A loader whose sampler is a
      ResumeSampler already starts there: register it with skip_batches=0, not both.
    """
    index_sampler = _loader_index_sampler(loader, skip_batches)
    orders = _orders(index_sampler, epochs, first_epoch, loader)
    return _register(mount, loader.dataset, orders, root, append, stream, compact)
