"""Locality-aware batches: a DistributedSampler whose ranks read what their own node holds.

In synchronous data-parallel training the gradient of a step is the average over the global
batch, whichever rank computes each sample. So within each global batch the samples can be
handed to ranks in any way that gives every rank its share, without changing what is learned
(docs/pytorch.md, "Locality-aware batches", says where this does not hold).

LocalitySampler keeps DistributedSampler's global order exactly: the permutation seeded by
seed + epoch, padded (or cut, with drop_last) to a multiple of the ranks, and global batch k is
positions [k*G, (k+1)*G) of it, G = num_replicas * batch_size, as a DataLoader over
DistributedSampler makes it. Only which rank gets which sample of a batch changes:

  holder(i)   the node that holds sample i in the cluster, a function of the job's node NAMES
              (nodes[p] runs ranks [p*R, (p+1)*R), R = ranks_per_node): consistent hashing
              (NodeRing). Each node has VNODES = 4096 points on a ring of 2^64, splitmix64 of
              its name's FNV-1a key plus v * 0x9E3779B97F4A7C15; sample i is held by the
              node of the first point at or after splitmix64(i). It depends on the set of
              names, not their order, and a node joining or leaving moves only the samples of
              its own arcs: a requeue with one node of K swapped moves the samples whose
              first node among the K + 1 names is the leaving or the new one, 2/(K + 1)
              (0.40 at K = 4), where numbering the nodes by their place in the job moved all. A node's
              expected share is within 1/sqrt(4096) = 1.6 % (standard deviation) of 1/K:
              measured for K up to 1,024, every node within 5 %; the count of a finite dataset
              adds a binomial spread (2.8 % at 1,250 samples a node). Finding the holders of
              1.28 M samples among 1,024 nodes (a ring of 4 M points, 48 MB) takes about 0.5 s,
              building the ring 1 to 2 s, once per node set. With nodes given as a number (the
              form before names, kept): splitmix64(i) mod nodes. Nothing is exchanged to know
              either; the daemons' placement follows, since it gives an object to the node
              reading it most, and that node reads it in nearly every epoch.
  node names  nodes= (LocalitySampler), else the job's from the environment (job_nodes):
              CLAIRFS_NODES (a hostlist, for torchrun or mpiexec without Slurm; or pass
              nodes=gather_node_names(R)), else Slurm's SLURM_JOB_NODELIST expanded as
              `scontrol show hostnames` does, this node SLURMD_NODENAME or the host name. Every
              rank computes the same list; each checks that its node is at place rank // R.
  a batch     each node takes, in the batch's order, the samples it holds, up to its share
              (R * the per-rank share); the samples over a node's share go, in order, to the
              free places of the nodes in ascending node order; a node's samples go to its R
              ranks in turn (the j-th to local rank j mod R). Every rank gets exactly its share.

A sample handed to a node that does not hold it is read from a peer. Per batch that happens to
about 1 / sqrt(2 pi b) of the samples for b samples per node per batch (the spread of a
binomial count around its mean): 7 % at 32, 3.5 % at 128, 2.5 % at 256. DistributedSampler
reads 1 - 1/nodes of them from peers.

The same function is in the cluster simulator (tools/bench/cluster_scale.cc, --sampler
locality, --node-names; the ring in tools/bench/sample_holders.h); tests/python/
test_locality.py checks the two agree.

Imports torch and numpy.
"""
from __future__ import annotations

import functools
import os
import re
import socket
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from .torch_order import FAST_SAMPLERS, register_dataset

if TYPE_CHECKING:
    from torch.utils.data import Dataset

    from .control import StrPath

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_GAMMA = np.uint64(0x9E3779B97F4A7C15)

# Points per node on the ring: a node's share of it is within about 1/sqrt(VNODES) (1.6 %) of
# 1/K (the module's docstring gives the measured spread).
VNODES = 4096

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


def name_key(name: str) -> int:
    """FNV-1a (64 bits) of the name's UTF-8 bytes: the key a node name is hashed from."""
    h = 0xCBF29CE484222325
    for byte in name.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


class NodeRing:
    """Consistent hashing of dataset indices onto named nodes; see the module's docstring.

    Node s has VNODES points on a ring of 2^64: splitmix64(name_key(s) + v * 0x9E3779B97F4A7C15)
    for v in [0, VNODES) (wrapping), the splitmix64 stream seeded with its name. Sample i belongs
    to the first point at or after splitmix64(i), wrapping past the last; equal points are
    ordered by their names' order. It depends on the set of names only: names[p] gives the
    position the holders are numbered by (the node running ranks [p*R, (p+1)*R))."""

    def __init__(self, names: Sequence[str], vnodes: int = VNODES) -> None:
        names = list(names)
        if not names or not all(isinstance(s, str) and s for s in names):
            raise ValueError(f"node names must be non-empty strings, not {names!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"a node name is given twice: {names!r}")
        canon = sorted(names)
        keys = np.array([name_key(s) for s in canon], dtype=np.uint64)
        with np.errstate(over="ignore"):
            seeds = keys[:, None] + np.arange(vnodes, dtype=np.uint64)[None, :] * _GAMMA
        points = splitmix64(seeds.ravel())
        owner = np.repeat(np.arange(len(canon), dtype=np.int64), vnodes)
        by_point = np.argsort(points)
        ring = points[by_point]
        if np.any(ring[1:] == ring[:-1]):  # rare: order the equal points by name
            by_point = np.lexsort((owner, points))
            ring = points[by_point]
        position = {s: p for p, s in enumerate(names)}
        self.names = names
        self.points = ring
        self.owner = np.array([position[s] for s in canon], dtype=np.int32)[owner[by_point]]

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        """The position (in names) of the node holding each dataset index, as int64."""
        h = splitmix64(np.asarray(indices))
        by_hash = np.argsort(h)  # sorted queries: searchsorted walks the ring once
        k = np.empty(len(h), dtype=np.int64)
        k[by_hash] = np.searchsorted(self.points, h[by_hash], side="left")
        return self.owner[k % len(self.points)].astype(np.int64)


@functools.lru_cache(maxsize=8)
def _ring(names: tuple[str, ...]) -> NodeRing:
    """The NodeRing of these names, built once for the last few node lists asked for."""
    return NodeRing(names)


def holders(indices: np.ndarray, nodes: int | Sequence[str]) -> np.ndarray:
    """The node that holds each dataset index, as int64: nodes an int N, splitmix64(index) mod
    N (nodes numbered by their place in the job); a list of names, the position in it of the
    index's node on their NodeRing."""
    if isinstance(nodes, (int, np.integer)):
        return (splitmix64(indices) % np.uint64(nodes)).astype(np.int64)
    return _ring(tuple(nodes))(indices)


def expand_hostlist(expr: str) -> list[str]:
    """The names of a Slurm hostlist expression, in its order, as `scontrol show hostnames`
    gives them: comma-separated items, each a name with bracketed ranges ("n[01-03,7]" is n01,
    n02, n03, n7: a range's numbers are as wide as its first one's digits; several brackets in
    one item give every combination, the first bracket varying slowest; text after the last
    bracket, which Slurm refuses, is kept as a suffix). ValueError on a malformed expression."""
    items, depth, cur = [], 0, ""
    for c in expr.strip():
        depth += (c == "[") - (c == "]")
        if depth not in (0, 1):
            raise ValueError(f"hostlist {expr!r}: unbalanced brackets")
        if c == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += c
    if depth:
        raise ValueError(f"hostlist {expr!r}: unbalanced brackets")
    items.append(cur)
    out: list[str] = []
    for item in items:
        if not item:
            continue
        names = [""]
        for text, ranges in re.findall(r"([^\[\]]*)(?:\[([^\]]*)\])?", item):
            names = [n + text for n in names]
            if ranges:
                names = [n + v for n in names for v in _expand_ranges(expr, ranges)]
        out.extend(names)
    if not out:
        raise ValueError(f"hostlist {expr!r}: no names")
    return out


def _expand_ranges(expr: str, ranges: str) -> list[str]:
    """The numbers of one bracket's ranges ("01-03,7"), as strings in their order."""
    out: list[str] = []
    for part in ranges.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not m or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise ValueError(f"hostlist {expr!r}: bad range {part!r}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        out.extend(str(v).zfill(len(lo)) for v in range(int(lo), int(hi) + 1))
    return out


def job_nodes(environ: Mapping[str, str] | None = None) -> tuple[list[str], str] | None:
    """The job's node names, in the order its ranks are numbered by, and this node's name, from
    the environment (default os.environ); None when it names none:
      CLAIRFS_NODES   a hostlist expression (e.g. "gpu[01-04]" or "a,b,c"; see expand_hostlist),
                      this node CLAIRFS_NODE, else SLURMD_NODENAME, else the host name;
      SLURM_JOB_NODELIST (a Slurm job), this node SLURMD_NODENAME, else the host name."""
    env = os.environ if environ is None else environ
    me = env.get("SLURMD_NODENAME") or socket.gethostname()
    if env.get("CLAIRFS_NODES"):
        return expand_hostlist(env["CLAIRFS_NODES"]), env.get("CLAIRFS_NODE") or me
    if env.get("SLURM_JOB_NODELIST"):
        return expand_hostlist(env["SLURM_JOB_NODELIST"]), me
    return None


def gather_node_names(ranks_per_node: int) -> list[str]:
    """The node names of a torch.distributed job (its default group initialised, ranks
    numbered node by node): every rank's host name gathered, one per node. A collective: every
    rank calls it. ValueError when the ranks of a node do not share a host name."""
    import torch.distributed as dist
    hosts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(hosts, socket.gethostname())
    names = [str(h) for h in hosts[::ranks_per_node]]
    for r, h in enumerate(hosts):
        if h != names[r // ranks_per_node]:
            raise ValueError(f"rank {r} runs on {h}, rank {r - r % ranks_per_node} on "
                             f"{names[r // ranks_per_node]}: ranks are not numbered node by node")
    return names


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


def assign(order: np.ndarray, num_replicas: int, ranks_per_node: int, batch_size: int,
           names: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The rank that reads each position of `order` (a global order, its length a multiple of
    num_replicas), and the node holding each position's sample; see the module's docstring.
    names: the nodes' names, names[p] running ranks [p*R, (p+1)*R); None: nodes numbered."""
    if num_replicas % ranks_per_node:
        raise ValueError(f"num_replicas {num_replicas} is not a multiple of ranks_per_node "
                         f"{ranks_per_node}")
    total, nodes = len(order), num_replicas // ranks_per_node
    if names is not None and len(names) != nodes:
        raise ValueError(f"{len(names)} node names for {nodes} nodes")
    per_batch = num_replicas * batch_size
    batches = -(-total // per_batch)
    batch = np.arange(total, dtype=np.int64) // per_batch
    batch_len = np.minimum(per_batch, total - np.arange(batches, dtype=np.int64) * per_batch)
    cap = batch_len // num_replicas * ranks_per_node  # a node's share of each batch
    held = holders(order, nodes if names is None else names)
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
      nodes           the nodes' names, nodes[p] running ranks [p*R, (p+1)*R): samples are
                      held by name (NodeRing), so the nodes a job keeps across a requeue or a
                      resize keep most of what they held. An int: the nodes numbered by their
                      place in the job (splitmix64(index) mod nodes; what every node holds
                      changes when the node set does). None: from the environment
                      (job_nodes: CLAIRFS_NODES, else a Slurm job's SLURM_JOB_NODELIST),
                      checked to have num_replicas / R names and this node at place
                      rank // R; outside both, numbered.
      mount, epochs   given a clairfs mount, the sampler registers this rank's order of
                      `epochs` epochs from first_epoch (as register_dataset does: the dataset
                      needs the files' paths, see clairfs.dataset_paths).
    Use it with DataLoader(dataset, batch_size=batch_size, sampler=it) and call set_epoch(e)
    before each epoch, as with DistributedSampler.
    """

    def __init__(self, dataset: Dataset[Any], num_replicas: int | None = None,
                 rank: int | None = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, *, batch_size: int, ranks_per_node: int | None = None,
                 nodes: int | Sequence[str] | None = None, mount: StrPath | None = None,
                 epochs: int = 1, first_epoch: int = 0, stream: str | None = None) -> None:
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
        self.node_names = self._names(nodes)
        if mount is not None:
            self.register(mount, epochs, first_epoch=first_epoch, stream=stream)

    def _names(self, nodes: int | Sequence[str] | None) -> list[str] | None:
        """The node names the holders are keyed by (None: numbered), checked against the ranks."""
        if isinstance(nodes, (int, np.integer)):
            if nodes != self.nodes:
                raise ValueError(f"nodes {nodes}, but {self.num_replicas} ranks of "
                                 f"{self.ranks_per_node} a node run on {self.nodes}")
            return None
        if nodes is not None:
            names = list(nodes)
            if len(names) != self.nodes:
                raise ValueError(f"{len(names)} node names, but {self.num_replicas} ranks of "
                                 f"{self.ranks_per_node} a node run on {self.nodes} nodes")
            _ring(tuple(names))  # refuses duplicates and empty names now
            return names
        found = job_nodes()
        if found is None:
            return None
        names, me = found
        if len(names) != self.nodes:
            raise ValueError(f"the job's nodes are {len(names)} ({','.join(names[:8])}...), but "
                             f"{self.num_replicas} ranks of {self.ranks_per_node} a node run on "
                             f"{self.nodes}: pass nodes= (or set CLAIRFS_NODES)")
        if me not in names or names.index(me) != self.node:
            raise ValueError(f"rank {self.rank} runs on {me}, but the job's node {self.node} is "
                             f"{names[self.node]}: ranks are not numbered node by node in the "
                             f"order of the job's nodes; pass nodes= (or set CLAIRFS_NODES)")
        _ring(tuple(names))
        return names

    def epoch_assignment(self, epoch: int | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
        """(order, rank, holder) of an epoch (default: the current one): the global order,
        the rank that reads each position, the node holding each position's sample."""
        e = self.epoch if epoch is None else epoch
        order = global_order(len(self.dataset), self.num_replicas,  # type: ignore[arg-type]
                             self.seed, e, self.shuffle, self.drop_last)
        rank, held = assign(order, self.num_replicas, self.ranks_per_node, self.batch_size,
                            self.node_names)
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


def node_lists(n: int, nodes: int | Sequence[str], ranks_per_node: int, batch_size: int,
               seed: int, epochs: Sequence[int], shuffle: bool = True,
               drop_last: bool = False) -> list[list[list[int]]]:
    """lists[node][k]: the dataset indices node reads in epochs[k], its ranks' in position
    order (what the simulator's --sampler locality gives a node). nodes: a count (numbered) or
    the nodes' names, as LocalitySampler's nodes=."""
    names = None if isinstance(nodes, (int, np.integer)) else list(nodes)
    count = len(names) if names is not None else int(nodes)  # type: ignore[arg-type]
    out: list[list[list[int]]] = [[] for _ in range(count)]
    replicas = count * ranks_per_node
    for e in epochs:
        order = global_order(n, replicas, seed, e, shuffle, drop_last)
        rank, _ = assign(order, replicas, ranks_per_node, batch_size, names)
        node = rank // ranks_per_node
        for x in range(count):
            out[x].append(order[node == x].tolist())
    return out
