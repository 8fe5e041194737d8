"""Locality-aware batches: a DistributedSampler whose ranks read what their own node holds.

In synchronous data-parallel training the gradient of a step is the average over the global
batch, whichever rank computes each sample. So within each global batch the samples can be
handed to ranks in any way that gives every rank its share, without changing what is learned
(docs/pytorch.md, "Locality-aware batches", says where this does not hold).

LocalitySampler keeps DistributedSampler's global order exactly: the permutation seeded by
seed + epoch, padded (or cut, with drop_last) to a multiple of the ranks, and global batch k is
positions [k*G, (k+1)*G) of it, G = num_replicas * batch_size, as a DataLoader over
DistributedSampler makes it. Only which rank gets which sample of a batch changes:

  holder(i)   the node that holds sample i in the cluster: splitmix64(i) mod nodes. Node n runs
              ranks [n*R, (n+1)*R), R = ranks_per_node. Nothing is exchanged to know it; the
              daemons' placement follows, since it gives an object to the node reading it most,
              and that node reads it in nearly every epoch.
  a batch     each node takes, in the batch's order, the samples it holds, up to its share
              (R * the per-rank share); the samples over a node's share go, in order, to the
              free places of the nodes in ascending node order; a node's samples go to its R
              ranks in turn (the j-th to local rank j mod R). Every rank gets exactly its share.

A sample handed to a node that does not hold it is read from a peer. Per batch that happens to
about 1 / sqrt(2 pi b) of the samples for b samples per node per batch (the spread of a
binomial count around its mean): 7 % at 32, 3.5 % at 128, 2.5 % at 256. DistributedSampler
reads 1 - 1/nodes of them from peers.

The same function is in the cluster simulator (tools/bench/cluster_scale.cc, --sampler
locality); tests/python/test_locality.py checks the two agree.

Imports torch and numpy.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from .torch_order import FAST_SAMPLERS, register_dataset

if TYPE_CHECKING:
    from torch.utils.data import Dataset

    from .control import StrPath

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)

# Environment variables that give the ranks on this node: torchrun, MPICH's hydra, Open MPI,
# Slurm's srun (per node, when tasks are spread evenly).
_LOCAL_SIZE_VARS = ("LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE",
                    "SLURM_NTASKS_PER_NODE")


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser of each uint64 of x (wrapping arithmetic), as uint64."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return (z ^ (z >> np.uint64(31))) & _M64


def holders(indices: np.ndarray, nodes: int) -> np.ndarray:
    """The node that holds each dataset index: splitmix64(index) mod nodes (int64)."""
    return (splitmix64(indices) % np.uint64(nodes)).astype(np.int64)


def global_order(n: int, num_replicas: int, seed: int, epoch: int, shuffle: bool,
                 drop_last: bool) -> np.ndarray:
    """DistributedSampler's order before it is split among ranks: int64 dataset indices, of
    length total_size (a multiple of num_replicas)."""
    if drop_last and n % num_replicas:
        per_rank = n // num_replicas
    else:
        per_rank = -(-n // num_replicas)
    total = per_rank * num_replicas
    if shuffle:
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        order = torch.randperm(n, generator=g)
    else:
        order = torch.arange(n)
    if total > n:
        order = order.repeat(-(-total // n))
    return order[:total].numpy().astype(np.int64)


def _ordinals(keys: np.ndarray) -> np.ndarray:
    """For each position, how many earlier positions have the same key."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    counts = np.diff(np.r_[starts, len(keys)])
    out = np.empty(len(keys), dtype=np.int64)
    out[order] = np.arange(len(keys)) - np.repeat(starts, counts)
    return out


def assign(order: np.ndarray, num_replicas: int, ranks_per_node: int,
           batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The rank that reads each position of `order` (a global order, its length a multiple of
    num_replicas), and the node holding each position's sample; see the module's docstring."""
    if num_replicas % ranks_per_node:
        raise ValueError(f"num_replicas {num_replicas} is not a multiple of ranks_per_node "
                         f"{ranks_per_node}")
    total, nodes = len(order), num_replicas // ranks_per_node
    per_batch = num_replicas * batch_size
    batches = -(-total // per_batch)
    batch = np.arange(total, dtype=np.int64) // per_batch
    batch_len = np.minimum(per_batch, total - np.arange(batches, dtype=np.int64) * per_batch)
    cap = batch_len // num_replicas * ranks_per_node  # a node's share of each batch
    held = holders(order, nodes)
    key = batch * nodes + held
    kept = _ordinals(key) < cap[batch]
    node = held.copy()
    over = np.flatnonzero(~kept)
    if len(over):
        free = (cap[:, None] - np.bincount(key[kept], minlength=batches * nodes).reshape(
            batches, nodes)).ravel()
        ends = np.cumsum(free)  # the free places, flat over (batch, node), numbered
        first = np.r_[0, ends][np.arange(batches) * nodes]  # a batch's first free place
        over_batch = batch[over]
        nth = np.arange(len(over)) - np.searchsorted(over_batch, over_batch, side="left")
        node[over] = np.searchsorted(ends, first[over_batch] + nth, side="right") % nodes
    local = _ordinals(batch * nodes + node) % ranks_per_node
    return node * ranks_per_node + local, held


def ranks_per_node_from_env() -> int:
    """The ranks on this node as the launcher tells them (torchrun, mpiexec, srun), else 1."""
    for name in _LOCAL_SIZE_VARS:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


class LocalitySampler(DistributedSampler):
    """DistributedSampler's drop-in whose ranks read, in each global batch, the samples their
    node holds; every global batch is the same set of samples as DistributedSampler's.

    The arguments of DistributedSampler (dataset, num_replicas, rank, shuffle, seed,
    drop_last), and:
      batch_size      the DataLoader's batch_size on every rank (required: it defines the
                      global batch, num_replicas * batch_size).
      ranks_per_node  ranks on each node, ranks numbered node by node (torchrun's and
                      mpiexec's default); None: from LOCAL_WORLD_SIZE, MPI_LOCALNRANKS,
                      OMPI_COMM_WORLD_LOCAL_SIZE or SLURM_NTASKS_PER_NODE, else 1.
      mount, epochs   given a clairfs mount, the sampler registers this rank's order of
                      `epochs` epochs from first_epoch (as register_dataset does: the dataset
                      needs the files' paths, see clairfs.dataset_paths).
    Use it with DataLoader(dataset, batch_size=batch_size, sampler=it) and call set_epoch(e)
    before each epoch, as with DistributedSampler.
    """

    def __init__(self, dataset: Dataset[Any], num_replicas: int | None = None,
                 rank: int | None = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, *, batch_size: int, ranks_per_node: int | None = None,
                 mount: StrPath | None = None, epochs: int = 1, first_epoch: int = 0,
                 stream: str | None = None) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle,
                         seed=seed, drop_last=drop_last)
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, not {batch_size!r}")
        self.batch_size = batch_size
        self.ranks_per_node = (ranks_per_node_from_env() if ranks_per_node is None
                               else ranks_per_node)
        if self.ranks_per_node < 1 or self.num_replicas % self.ranks_per_node:
            raise ValueError(f"num_replicas {self.num_replicas} is not a multiple of "
                             f"ranks_per_node {self.ranks_per_node}")
        self.nodes = self.num_replicas // self.ranks_per_node
        self.node = self.rank // self.ranks_per_node
        if mount is not None:
            self.register(mount, epochs, first_epoch=first_epoch, stream=stream)

    def epoch_assignment(self, epoch: int | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
        """(order, rank, holder) of an epoch (default: the current one): the global order,
        the rank that reads each position, the node holding each position's sample."""
        e = self.epoch if epoch is None else epoch
        order = global_order(len(self.dataset), self.num_replicas,  # type: ignore[arg-type]
                             self.seed, e, self.shuffle, self.drop_last)
        rank, held = assign(order, self.num_replicas, self.ranks_per_node, self.batch_size)
        return order, rank, held

    def indices(self, epoch: int | None = None) -> np.ndarray:
        """This rank's dataset indices of an epoch, in the order it reads them."""
        order, rank, _ = self.epoch_assignment(epoch)
        return order[rank == self.rank]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def peer_fraction(self, epoch: int | None = None) -> float:
        """The share of this node's samples in an epoch that another node holds."""
        order, rank, held = self.epoch_assignment(epoch)
        mine = rank // self.ranks_per_node == self.node
        return float(np.count_nonzero(held[mine] != self.node)) / max(1, int(mine.sum()))

    def register(self, mount: StrPath, epochs: int = 1, *, first_epoch: int = 0,
                 append: bool = False, stream: str | None = None) -> int:
        """Registers this rank's order of `epochs` epochs from first_epoch with the clairfs
        mount (register_dataset's contract). Returns the entries registered."""
        return register_dataset(mount, self.dataset, self, epochs, first_epoch=first_epoch,
                                append=append, stream=stream)


FAST_SAMPLERS[LocalitySampler] = lambda s: torch.from_numpy(s.indices())


def node_lists(n: int, nodes: int, ranks_per_node: int, batch_size: int, seed: int,
               epochs: Sequence[int], shuffle: bool = True,
               drop_last: bool = False) -> list[list[list[int]]]:
    """lists[node][k]: the dataset indices node reads in epochs[k], its ranks' in position
    order (what the simulator's --sampler locality gives a node)."""
    out: list[list[list[int]]] = [[] for _ in range(nodes)]
    replicas = nodes * ranks_per_node
    for e in epochs:
        order = global_order(n, replicas, seed, e, shuffle, drop_last)
        rank, _ = assign(order, replicas, ranks_per_node, batch_size)
        node = rank // ranks_per_node
        for x in range(nodes):
            out[x].append(order[node == x].tolist())
    return out
