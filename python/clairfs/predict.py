"""Predicted epochs: time, stall and bytes per source of each epoch of a clairfs plan.

A pure model (no I/O): `loads(plan)` takes the `plan` control file's `per_epoch` (what each
epoch reads from each tier, the backing store and peers: docs/control-interface.md), and
`predict` turns it into epoch times with the sources' bandwidths and a compute rate.
`capacity_for_no_stall` searches the tier capacity at which the predicted stall goes away.
The inputs (probe, stats, options) and the table are clairfs/ctl/predict.py's.

The model, per epoch e (docs/benchmarks.md, "Predicted epochs"), with w(x) the
backing store's time for reads x: max(bytes / backing_bw, reads / backing_iops):

    compute_e = samples_e / samples_per_s              (or bytes_e / bytes_per_s)
    fill_e    = w(fills_e)                             first reads of the tiers' objects
    staged_e  = w(backing_e) - fill_e                  staged and direct reads
    ahead_e   = later fills done during epoch e: all still pending if epoch e reads from
                peers, else as much as staged_e (fills and staged reads share the store)
    store_e   = max(store_(e-1) + fill_e (less what was done ahead) + ahead_e + staged_e,
                    end_(e-1) + staged_e)              the store has served epoch e
    local_e   = max over tiers t of moved_e(t) x ((1 - h_t) / tier_bw(t) + h_t / cache_bw),
                and peer_bytes_e / peer_bw, where moved_e(t) is the bytes tier t serves in
                epoch e, each read a whole object for the SSD tier (a record costs its chunk),
                each object once for the RAM tier, and h_t the share of tier t's reads the
                page cache answers (min(1, page cache / tier bytes); 0 for the RAM tier)
    filled_e  = max over k in (0, 1) of store_(e-1) + k x fill_e + (1 - k)^(1/m_e) x compute_e,
                the job waiting for the objects the fill brings in first-reference order, m_e
                reads per object (fill_order_end)
    end_e     = max(end_(e-1) + compute_e, end_(e-1) + local_e, store_e, filled_e)
    time_e    = end_e - end_(e-1),  stall_e = time_e - compute_e

The prefetcher reads ahead of the job on its own threads while the job computes, so reading
and computing overlap, and the sources (different devices) are read at the same time: an
epoch lasts as long as the slowest of them, or the compute. Tier fills are not paced by the
job: they run from the registration on in first-reference order, so a fill of a later epoch
takes the store's time in an earlier one. What a peer serves, the peer fetched in its own
order, so an epoch reading from peers waits for the fills still pending. The staging window
follows the job, so staged reads of epoch e start no earlier than the epoch. Every source's
bandwidth is what it gives the prefetcher's parallelism (its threads). The first read of an
object a tier holds is a read of the backing store (its fill), so a cold first epoch reads
everything from there, unless the tiers held part of the plan already (`held`: a warm SSD
tier, a fill started earlier).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

# A stall below this share of the epoch's compute time (or 50 ms) counts as none.
NO_STALL_SHARE = 0.01
NO_STALL_SECONDS = 0.05


@dataclass(frozen=True)
class Source:
    """Reads of one source in one epoch: object reads and their bytes."""
    reads: float = 0.0
    bytes: float = 0.0

    def scaled(self, f: float) -> "Source":
        return Source(self.reads * f, self.bytes * f)

    def plus(self, other: "Source") -> "Source":
        return Source(self.reads + other.reads, self.bytes + other.bytes)


@dataclass(frozen=True)
class EpochLoad:
    """What one epoch reads: samples (manifest entries), object reads and bytes by source.
    `backing` includes `fills` (first reads of objects a tier holds, filling it).
    `tiers_moved`: per tier, what it moves to serve its reads, each object once per epoch (the
    plan's `distinct`: records of one chunk cost the chunk once); `tiers` when absent."""
    samples: float
    bytes: float
    tiers: Mapping[str, Source]
    backing: Source
    fills: Source
    peers: Source = Source()
    tiers_moved: Mapping[str, Source] | None = None
    reads: float = 0.0  # the epoch's object reads (plan `reads`); 0: unknown

    def reads_per_object(self) -> float:
        """The epoch's reads per distinct object it reads (1 for files read whole once; a chunk
        of records is read once per record): its object reads over the objects read from the
        backing store and the tiers (the fills counted once)."""
        distinct = (self.backing.reads + sum(self.moved(n).reads for n in self.tiers)
                    - self.fills.reads)
        return max(self.reads / distinct, 1.0) if self.reads > 0 and distinct > 0 else 1.0

    def moved(self, tier: str) -> Source:
        m = self.tiers if self.tiers_moved is None else self.tiers_moved
        return m.get(tier, Source())


@dataclass(frozen=True)
class Rates:
    """Bandwidths (bytes/s) at the prefetcher's parallelism; backing_iops 0: no IOPS limit."""
    backing_bw: float
    tier_bw: Mapping[str, float] = field(default_factory=dict)
    backing_iops: float = 0.0
    peer_bw: float = 1e9
    default_tier_bw: float = 1e9
    # Tiers that read a whole object for every read of it (the SSD tier: a record costs its
    # chunk, docs/configuration.md); the others move each object once per epoch (a RAM tier
    # copies the records read out of the chunk it holds).
    whole_object_tiers: frozenset[str] = frozenset({"ssd"})
    # Per tier with files (the SSD tier), the share 0..1 of its reads the kernel's page cache
    # answers (page_cache_share), at page_cache_bw; the rest comes from its device at tier_bw.
    page_cached: Mapping[str, float] = field(default_factory=dict)
    page_cache_bw: float = 2e9

    def tier_seconds(self, name: str, moved_bytes: float) -> float:
        """Seconds tier `name` takes to move `moved_bytes`: from the page cache for its cached
        share, from its device for the rest."""
        bw = self.tier_bw.get(name, self.default_tier_bw)
        h = min(max(self.page_cached.get(name, 0.0), 0.0), 1.0)
        device = moved_bytes * (1 - h) / bw if bw > 0 else 0.0
        cached = moved_bytes * h / self.page_cache_bw if self.page_cache_bw > 0 else 0.0
        return device + cached


def page_cache_share(page_cache: float, tier_bytes: float) -> float:
    """The share of a tier's reads the page cache answers when it can keep `page_cache` bytes
    of the tier's `tier_bytes` of files: each object is read as often as the others (a shuffle
    of the whole set every epoch), so with the least recently read pages evicted first a read
    finds its object cached with the probability page_cache / tier_bytes."""
    if tier_bytes <= 0:
        return 1.0 if page_cache > 0 else 0.0
    return min(max(page_cache, 0.0) / tier_bytes, 1.0)


@dataclass(frozen=True)
class Compute:
    """The job's consumption rate without I/O: samples/s, or bytes/s if samples_per_s is 0."""
    samples_per_s: float = 0.0
    bytes_per_s: float = 0.0

    def seconds(self, load: EpochLoad) -> float:
        if self.samples_per_s > 0:
            return load.samples / self.samples_per_s
        if self.bytes_per_s > 0:
            return load.bytes / self.bytes_per_s
        raise ValueError("a compute rate is needed: samples/s or bytes/s")


@dataclass(frozen=True)
class EpochPrediction:
    epoch: int  # from 1
    time: float
    stall: float
    compute: float
    io: float
    seconds_by_source: Mapping[str, float]  # "backing", "peers", a tier's name
    bytes_by_source: Mapping[str, float]
    bound: str  # "compute" or the slowest source

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"seconds_by_source": dict(self.seconds_by_source),
                                           "bytes_by_source": dict(self.bytes_by_source)}


def _source(j: Mapping[str, Any] | None) -> Source:
    j = j or {}
    return Source(float(j.get("reads", 0)), float(j.get("bytes", 0)))


def samples_per_epoch(plan: Mapping[str, Any]) -> list[float]:
    """Manifest entries per epoch index, over the streams (a stream's entries spread evenly
    over its epochs: the plan counts entries per stream, not per epoch)."""
    n = int(plan.get("epochs", 0))
    out = [0.0] * n
    for st in plan.get("streams", []):
        epochs = int(st.get("epochs", 0))
        for e in range(min(epochs, n)):
            out[e] += float(st.get("entries", 0)) / epochs
    return out


def loads(plan: Mapping[str, Any], held: float = 0.0) -> list[EpochLoad]:
    """The per-epoch loads of a `plan` control file's JSON (full view: it needs `per_epoch`).

    held: the share (0..1) of the tiers' planned bytes they hold already (stats
    `readiness.tiers`); that share of the fills is read from its tier instead."""
    if "per_epoch" not in plan:
        raise ValueError("the plan has no per_epoch (a clairfs without it, or the counts view: "
                         "predictions need the mount owner's or control.group's view)")
    held = min(max(held, 0.0), 1.0)
    samples = samples_per_epoch(plan)
    tier_names = [t["name"] for t in plan.get("tiers", [])]
    out = []
    for e, j in enumerate(plan["per_epoch"]):
        fills = _source(j.get("fills"))
        tiers = {t.get("name", f"tier{i}"): _source(t) for i, t in enumerate(j.get("tiers", []))}
        moved = {t.get("name", f"tier{i}"): _source(t.get("distinct", t))
                 for i, t in enumerate(j.get("tiers", []))}
        backing = _source(j.get("backing"))
        if held > 0 and fills.bytes > 0 and tier_names:
            # The fills a warm tier saves: credited to the tiers in proportion to their shares.
            planned = {t["name"]: float(t.get("bytes", 0)) for t in plan["tiers"]}
            total = sum(planned.values()) or 1.0
            saved = fills.scaled(held)
            for name, b in planned.items():
                tiers[name] = tiers.get(name, Source()).plus(saved.scaled(b / total))
                moved[name] = moved.get(name, Source()).plus(saved.scaled(b / total))
            fills = fills.scaled(1 - held)
            backing = Source(backing.reads - saved.reads, backing.bytes - saved.bytes)
        out.append(EpochLoad(samples=samples[e] if e < len(samples) else 0.0,
                             bytes=float(j.get("bytes", 0)), tiers=tiers, backing=backing,
                             fills=fills, peers=_source(j.get("from_peers")), tiers_moved=moved,
                             reads=float(j.get("reads", 0))))
    return out


def _backing_seconds(s: Source, rates: Rates) -> float:
    t = s.bytes / rates.backing_bw
    if rates.backing_iops > 0:
        t = max(t, s.reads / rates.backing_iops)
    return t


def fill_order_end(start: float, fill: float, compute: float, m: float,
                   steps: int = 256) -> float:
    """When an epoch ends whose objects are filled in first-reference order from `start` on,
    over `fill` seconds, each read m times at places spread evenly over the epoch, the job
    computing `compute` seconds in all: the k-th share of the objects has arrived at start +
    k x fill, and is first needed after the share q(k) = 1 - (1 - k)^(1/m) of the epoch, so the
    job cannot end before start + k x fill + (1 - q(k)) x compute. With m = 1 (each object read
    once: files) that is never later than the fill or the compute alone; with many reads per
    object (records in big chunks) nearly every object is needed early, and the compute waits
    for the fill instead of overlapping it."""
    end = start + fill
    if fill <= 0 or m <= 1:
        return end
    for j in range(1, steps):
        k = j / steps
        end = max(end, start + k * fill + (1 - k) ** (1 / m) * compute)
    return end


def predict(epoch_loads: Sequence[EpochLoad], rates: Rates,
            compute: Compute) -> list[EpochPrediction]:
    """Every epoch's time and stall on one timeline (the equations in the module's docstring):
    epoch e ends at end_e = max(end_(e-1) + compute_e, end_(e-1) + the slowest tier's or the
    peers' reads, the moment the backing store has served what epoch e needs)."""
    if rates.backing_bw <= 0:
        raise ValueError("the backing store's bandwidth must be positive")
    fills = [_backing_seconds(load.fills, rates) for load in epoch_loads]
    out: list[EpochPrediction] = []
    end = store = ahead = 0.0
    for i, load in enumerate(epoch_loads):
        c = compute.seconds(load)
        staged = max(_backing_seconds(load.backing, rates) - fills[i], 0.0)
        used = min(ahead, fills[i])  # this epoch's fills done during earlier ones
        ahead -= used
        later = max(sum(fills[i + 1:]) - ahead, 0.0)
        extra = later if load.peers.reads > 0 else min(later, staged)
        ahead += extra
        # The fills run from registration on, the staged reads follow the job's epoch.
        filled = fill_order_end(store, fills[i] - used, c, load.reads_per_object())
        store = max(store + fills[i] - used + extra + staged, end + staged)
        seconds = {"backing": fills[i] - used + extra + staged}
        for name, served in load.tiers.items():
            moved = served if name in rates.whole_object_tiers else load.moved(name)
            seconds[name] = rates.tier_seconds(name, moved.bytes)
        seconds["peers"] = load.peers.bytes / rates.peer_bw if rates.peer_bw > 0 else 0.0
        local = max((v for k, v in seconds.items() if k != "backing"), default=0.0)
        new_end = max(end + c, end + local, store, filled)
        time = new_end - end
        bound = ("compute" if time <= c + 1e-12
                 else "backing" if max(store, filled) >= end + max(c, local)
                 else max((k for k in seconds if k != "backing"), key=lambda k: seconds[k]))
        by_bytes = {"backing": load.backing.bytes, "peers": load.peers.bytes}
        by_bytes |= {name: s.bytes for name, s in load.tiers.items()}
        out.append(EpochPrediction(epoch=i + 1, time=time, stall=max(time - c, 0.0), compute=c,
                                   io=max(store - end, local, 0.0), seconds_by_source=seconds,
                                   bytes_by_source=by_bytes, bound=bound))
        end = new_end
    return out


def stalls(pred: EpochPrediction) -> bool:
    """True when the predicted stall is more than noise (NO_STALL_SHARE of compute, 50 ms)."""
    return pred.stall > max(NO_STALL_SECONDS, NO_STALL_SHARE * pred.compute)


def _move(load: EpochLoad, src: str, dst: str, f: float) -> EpochLoad:
    """A share f of tier src's reads in the epoch served by tier dst instead."""
    tiers, moved_by = dict(load.tiers), {name: load.moved(name) for name in load.tiers}
    part, part_moved = tiers.get(src, Source()).scaled(f), moved_by.get(src, Source()).scaled(f)
    tiers[src] = tiers.get(src, Source()).scaled(1 - f)
    moved_by[src] = moved_by.get(src, Source()).scaled(1 - f)
    tiers[dst] = tiers.get(dst, Source()).plus(part)
    moved_by[dst] = moved_by.get(dst, Source()).plus(part_moved)
    return dataclasses.replace(load, tiers=tiers, tiers_moved=moved_by)


def with_extra_capacity(epoch_loads: Sequence[EpochLoad], staged_bytes: float, tier: str,
                        extra: float,
                        slower: Sequence[tuple[str, float]] = ()) -> list[EpochLoad]:
    """The loads if `tier` held `extra` more bytes: of the objects the plan stages or reads
    direct (`staged_bytes`: their distinct bytes, plan `staging.bytes` + `direct.bytes`), and
    past those, of the objects of the slower tiers (`slower`: (name, bytes) of each, fastest
    first), as the placement fills the fastest tier first and the next ones with what is left.

    The placement takes objects by frequency; here a share of every epoch's reads of a source
    is taken (extra / staged_bytes of the staged reads, then of each slower tier's), which is
    exact when the objects are read equally often (a shuffle of the whole set every epoch) and
    errs towards too little gain otherwise. A staged share's reads in the first epoch that
    stages anything stay reads of the backing store (they fill the tier); in later epochs they
    come from the tier."""
    if extra <= 0:
        return list(epoch_loads)
    f = min(extra / staged_bytes, 1.0) if staged_bytes > 0 else 0.0
    rest, shares = max(extra - staged_bytes, 0.0), []
    for name, held in slower:
        if rest <= 0:
            break
        if held > 0:
            shares.append((name, min(rest / held, 1.0)))
            rest -= held
    out, first = [], True
    for load in epoch_loads:
        for name, share in shares:
            load = _move(load, name, tier, share)
        staged = Source(load.backing.reads - load.fills.reads,
                        load.backing.bytes - load.fills.bytes)
        if f <= 0 or staged.bytes <= 0:
            out.append(load)
            continue
        moved = staged.scaled(f)
        if first:
            first = False
            out.append(dataclasses.replace(load, fills=load.fills.plus(moved)))
            continue
        tiers = dict(load.tiers)
        tiers[tier] = tiers.get(tier, Source()).plus(moved)
        moved_by = {name: load.moved(name) for name in load.tiers}
        moved_by[tier] = moved_by.get(tier, Source()).plus(moved)
        backing = Source(load.backing.reads - moved.reads, load.backing.bytes - moved.bytes)
        out.append(dataclasses.replace(load, tiers=tiers, backing=backing, tiers_moved=moved_by))
    return out


def capacity_for_no_stall(epoch_loads: Sequence[EpochLoad], staged_bytes: float, tier: str,
                          rates: Rates, compute: Compute, first: int = 2,
                          slower: Sequence[tuple[str, float]] = (),
                          rates_at: Callable[[float], Rates] | None = None) -> float | None:
    """The least extra capacity of `tier` (bytes, to 1 MiB) at which no epoch from `first`
    (1-based) on stalls (with_extra_capacity: staged objects first, then the slower tiers');
    0 when none stalls as it is; None when no capacity up to every staged and slower object
    removes it (the tier itself, the tier fills or peers set the pace). Found on a grid of 64
    steps, then to 1 MiB: a capacity that works between two steps that do not is missed.
    Epoch 1 of a cold plan reads every object from the backing store once whatever the
    capacity, hence first=2 by default. rates_at(extra), if given, gives the rates with
    the tier `extra` bytes bigger (a bigger SSD tier has a smaller share in the page cache)."""
    def ok(extra: float) -> bool:
        ps = predict(with_extra_capacity(epoch_loads, staged_bytes, tier, extra, slower),
                     rates_at(extra) if rates_at else rates, compute)
        return not any(stalls(p) for p in ps[first - 1:])
    top = float(staged_bytes) + sum(b for _, b in slower)
    if ok(0):
        return 0.0
    if top <= 0:
        return None
    # Not monotonic: more of a slow tier (an SSD tier's device) can make the tier the bound.
    # So the least capacity that works is sought on a grid first, then bisected below it.
    steps = 64
    lo = 0.0
    for k in range(1, steps + 1):
        hi = top * k / steps
        if ok(hi):
            break
        lo = hi
    else:
        return None
    while hi - lo > (1 << 20):
        mid = (lo + hi) / 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
