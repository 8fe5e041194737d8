"""`clairfs-ctl plan --predict MOUNT`: the inputs of clairfs.predict and its table.

The plan and the tiers' state come from the mount's `plan` and `stats`; the backing store's
bandwidth from --backing-bw/--backing-iops or from a probe (--probe N --backing DIR: N objects
of the dataset read cold as the prefetcher fetches them, with its parallelism); a tier's from
--tier-bw, a probe of its directory's device (--probe-tier NAME=DIR) or the defaults; the
compute rate from --compute-rate or from the job's pace (--pace SECONDS: reads the job made
meanwhile, less its stall). Standard library only.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import random
import re
import tempfile
import threading
import time
from typing import Any

from .. import control
from ..predict import (Compute, Rates, capacity_for_no_stall, loads, page_cache_share, predict,
                      stalls)

# Tier bandwidths when not given: a RAM tier served through FUSE, an SSD tier (RocksDB).
DEFAULT_TIER_BW = {"ram": 2e9, "ssd": 5e8}
_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KIB": 1024, "MIB": 1 << 20,
          "GIB": 1 << 30}
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*(?:/\s*s)?\s*$")


def parse_bytes_rate(text: str) -> float:
    """'25MB/s', '25e6', '1.5GiB/s' -> bytes/s."""
    m = _RATE.match(text)
    unit = m.group(2).upper() if m else ""
    if not m or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a rate in bytes/s: {text!r} (e.g. 25MB/s)")
    return float(m.group(1)) * _UNITS[unit]


def parse_compute(text: str) -> Compute:
    """'700' or '700/s' or '700 samples/s' -> samples/s; '12MB/s' -> bytes/s."""
    m = _RATE.match(text.replace("samples", "").replace("sample", ""))
    if m and m.group(2) == "":
        return Compute(samples_per_s=float(m.group(1)))
    return Compute(bytes_per_s=parse_bytes_rate(text))


def parse_page_cache(text: str) -> float | None:
    """'auto' -> None (page_cache_room); '2GiB', '0' -> bytes."""
    if text.strip() == "auto":
        return None
    m = _RATE.match(text)
    unit = m.group(2).upper() if m else ""
    if not m or unit not in _UNITS or "/" in text:
        raise argparse.ArgumentTypeError(f"--page-cache: a size (2GiB, 0) or auto, got {text!r}")
    return float(m.group(1)) * _UNITS[unit]


def page_cache_room(stats: dict[str, Any], meminfo: str = "/proc/meminfo") -> float:
    """What the kernel can keep of the tiers' files in its page cache while the job runs, as
    far as this node shows it now: MemAvailable, less what the daemon will still take (its RAM
    tiers' capacity not yet filled, its staging window's growth). It counts the whole machine
    before the job's own processes grow: in a memory cgroup, or beside a job that needs much
    memory, give --page-cache instead."""
    try:
        with open(meminfo) as f:
            avail = next((float(line.split()[1]) * 1024 for line in f
                          if line.startswith("MemAvailable:")), 0.0)
    except OSError:
        return 0.0
    grow = sum(max(float(t.get("capacity", 0)) - float(t.get("bytes", 0)), 0.0)
               for t in stats.get("tiers", []) if t.get("name") == "ram")
    pre = stats.get("prefetch", {})
    grow += max(float(pre.get("staging_max_capacity", 0)) - float(pre.get("staging_bytes", 0)),
                0.0)
    return max(avail - grow, 0.0)


def parse_tier_bw(text: str) -> dict[str, float]:
    """'ram=2GB/s,ssd=500MB/s' -> {name: bytes/s}."""
    out = {}
    for part in filter(None, text.split(",")):
        name, sep, rate = part.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"--tier-bw: NAME=RATE, got {part!r}")
        out[name.strip()] = parse_bytes_rate(rate)
    return out


def _read_pieces(jobs: list[tuple[str, int, int]], threads: int) -> tuple[int, float]:
    """Reads (path, offset, length) jobs with `threads` threads; (bytes read, seconds)."""
    lock, total, queue = threading.Lock(), [0], list(jobs)

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                path, offset, length = queue.pop()
            fd = os.open(path, os.O_RDONLY)
            try:
                if length < os.fstat(fd).st_size:
                    # A piece is read exactly, as the daemon reads a chunk: the kernel's
                    # readahead past it would read bytes nobody asked for.
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                n, at = 0, offset
                while n < length:
                    got = len(os.pread(fd, min(length - n, 1 << 22), at))
                    if got == 0:
                        break
                    n, at = n + got, at + got
            finally:
                os.close(fd)
            with lock:
                total[0] += n
    t0 = time.monotonic()
    ts = [threading.Thread(target=worker) for _ in range(max(threads, 1))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return total[0], max(time.monotonic() - t0, 1e-9)


def _drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def parse_tier_dirs(text: str) -> dict[str, str]:
    """'ssd=/var/cache/clairfs' -> {name: directory}."""
    out = {}
    for part in filter(None, text.split(",")):
        name, sep, d = part.partition("=")
        if not sep or not os.path.isdir(d):
            raise argparse.ArgumentTypeError(f"--probe-tier: NAME=DIR with DIR a directory, "
                                             f"got {part!r}")
        out[name.strip()] = d
    return out


def probe_backing(root: str, files: int, threads: int, piece: int = 0,
                  seed: int = 1) -> dict[str, float]:
    """Reads `files` objects of the directory tree `root` (seeded) as the prefetcher fetches
    them: a file up to `piece` bytes whole, of a larger one a random `piece` on its grid (0:
    every file whole), the files in a shuffled order, in turn (a big file gives several
    pieces); each file dropped from the page cache first (POSIX_FADV_DONTNEED), `threads`
    threads. The store's bytes/s and objects/s at that parallelism."""
    paths: list[str] = []
    for d, _, names in os.walk(root):
        paths.extend(os.path.join(d, n) for n in names)
    paths = [p for p in paths if os.path.isfile(p) and not os.path.islink(p)]
    if not paths:
        raise ValueError(f"--probe: no files under {root}")
    rng = random.Random(seed)
    order = rng.sample(paths, len(paths))
    jobs: list[tuple[str, int, int]] = []
    seen: set[tuple[str, int]] = set()
    for i in range(4 * files):  # files in turn; a big file gives several pieces
        if len(jobs) == files:
            break
        p = order[i % len(order)]
        size = os.path.getsize(p)
        offset = rng.randrange(0, size // piece) * piece if 0 < piece < size else 0
        if (p, offset) not in seen:
            seen.add((p, offset))
            jobs.append((p, offset, piece if 0 < piece < size else size))
    for p in {p for p, _, _ in jobs}:
        _drop_cache(p)
    n, secs = _read_pieces(jobs, threads)
    return {"objects": len(jobs), "bytes": n, "seconds": secs, "bytes_per_s": n / secs,
            "objects_per_s": len(jobs) / secs}


def probe_dir(directory: str, piece: int, threads: int, size: int = 128 << 20,
              seed: int = 1) -> dict[str, float]:
    """A tier's device: writes a file of `size` bytes in `directory` (the tier's), syncs it,
    drops it from the page cache, reads it in `piece`-byte pieces in a shuffled order with
    `threads` threads, removes it. Measures the device under the tier, cold: not the tier's
    own code, nor a page cache that would hold its files."""
    piece = max(min(piece, size), 4096)
    fd, path = tempfile.mkstemp(prefix=".clairfs-probe-", dir=directory)
    try:
        block = os.urandom(1 << 20)
        with os.fdopen(fd, "wb") as f:
            for _ in range(size >> 20):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())
        _drop_cache(path)
        jobs = [(path, off, piece) for off in range(0, size - piece + 1, piece)]
        random.Random(seed).shuffle(jobs)
        n, secs = _read_pieces(jobs, threads)
    finally:
        os.unlink(path)
    return {"bytes": n, "seconds": secs, "piece": piece, "bytes_per_s": n / secs}


def object_size(plan: dict[str, Any], tier: str | None = None) -> int:
    """The mean object of a tier of the plan (or the grid the plan cuts files on)."""
    for t in plan.get("tiers", []):
        if t.get("name") == tier and t.get("objects"):
            return int(t["bytes"] / t["objects"])
    return int(plan.get("record_chunk_size" if plan.get("range_entries") else "chunk_size", 0)
               or 4 << 20)


def pace(mount: str, seconds: float) -> dict[str, float]:
    """The job's compute rate from its progress over `seconds`: object reads done meanwhile
    (stats `object_reads`) over the time its readers did not wait (less the growth of
    `stall_seconds`, which sums the readers' waits: with several readers waiting at once this
    takes off too much, so the rate is if anything too high). Samples/s when each sample is
    one object read (files read whole)."""
    s0 = control.stats(mount)
    t0 = time.monotonic()
    time.sleep(seconds)
    s1 = control.stats(mount)
    dt = time.monotonic() - t0
    reads = s1.get("object_reads", 0) - s0.get("object_reads", 0)
    stall = s1.get("stall_seconds", 0.0) - s0.get("stall_seconds", 0.0)
    busy = max(dt - stall, 1e-3)
    return {"seconds": dt, "reads": reads, "stall_seconds": stall,
            "samples_per_s": reads / busy}


def _held(stats: dict[str, Any]) -> float:
    r = stats.get("readiness", {}).get("tiers")
    return float(r) if isinstance(r, (int, float)) else 0.0


def _cached_rates(rates: Rates, plan: dict[str, Any], page_cache: float, tier: str = "",
                  extra: float = 0.0) -> Rates:
    """rates with the page cache's share of each whole-object tier's reads: page_cache bytes
    against the bytes the plan places in the tier (plus `extra` for `tier`)."""
    held: dict[str, float] = {}
    for t in plan.get("tiers", []):
        held[t["name"]] = held.get(t["name"], 0.0) + float(t.get("bytes", 0))
    shares = {name: page_cache_share(page_cache, b + (extra if name == tier else 0.0))
              for name, b in held.items() if name in rates.whole_object_tiers}
    return dataclasses.replace(rates, page_cached=shares)


def build(plan: dict[str, Any], stats: dict[str, Any], rates: Rates, compute: Compute,
          held: float | None = None, page_cache: float = 0.0) -> dict[str, Any]:
    """The prediction as JSON-able dict: inputs, epochs, and the capacity that removes the
    stall of epochs 2+ (per tier, added to that tier alone: predict.capacity_for_no_stall).
    page_cache: bytes of the SSD tier's files the kernel can keep cached while the job runs."""
    held = _held(stats) if held is None else held
    epoch_loads = loads(plan, held=held)
    rates = _cached_rates(rates, plan, page_cache)
    preds = predict(epoch_loads, rates, compute)
    staged = (float(plan.get("staging", {}).get("bytes", 0))
              + float(plan.get("direct", {}).get("bytes", 0)))
    capacity: dict[str, Any] = {"staged_bytes": staged, "extra_bytes": {}}
    tiers = plan.get("tiers", [])
    for i, t in enumerate(tiers):
        slower = [(u["name"], float(u.get("bytes", 0))) for u in tiers[i + 1:]]
        capacity["extra_bytes"][t["name"]] = capacity_for_no_stall(
            epoch_loads, staged, t["name"], rates, compute, slower=slower,
            rates_at=lambda x, n=t["name"]: _cached_rates(rates, plan, page_cache, n, x))
    capacity["first_epoch_stalls"] = bool(preds) and stalls(preds[0])
    return {"inputs": {"backing_bw": rates.backing_bw, "backing_iops": rates.backing_iops,
                       "tier_bw": {t["name"]: rates.tier_bw.get(t["name"], rates.default_tier_bw)
                                   for t in plan.get("tiers", [])},
                       "peer_bw": rates.peer_bw, "samples_per_s": compute.samples_per_s,
                       "bytes_per_s": compute.bytes_per_s, "tiers_held": held,
                       "page_cache": page_cache, "page_cached": dict(rates.page_cached),
                       "tiers": [{k: t.get(k) for k in ("name", "capacity", "bytes")}
                                 for t in plan.get("tiers", [])]},
            "epochs": [p.as_dict() for p in preds],
            "total": {"time": sum(p.time for p in preds), "stall": sum(p.stall for p in preds)},
            "capacity": capacity}


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def render(result: dict[str, Any]) -> str:
    """The table `plan --predict` prints."""
    inp = result["inputs"]
    rate = (f"{inp['samples_per_s']:.0f} samples/s" if inp["samples_per_s"]
            else f"{inp['bytes_per_s'] / 1e6:.1f} MB/s")
    tiers = ", ".join(f"{n} {bw / 1e6:.0f} MB/s" for n, bw in inp["tier_bw"].items())
    iops = f", {inp['backing_iops']:.0f} IOPS" if inp["backing_iops"] else ""
    cached = "".join(f"; page cache {inp['page_cache'] / (1 << 20):.0f} MiB: {share * 100:.0f}% "
                     f"of {name} reads" for name, share in inp.get("page_cached", {}).items())
    lines = [f"compute {rate}; backing {inp['backing_bw'] / 1e6:.1f} MB/s{iops}; {tiers}; "
             f"tiers hold {inp['tiers_held'] * 100:.0f}% of their share now{cached}"]
    names = [t["name"] for t in inp["tiers"]]
    head = ["epoch", "time s", "stall s", "compute s", "bound", "backing MB"]
    head += [f"{n} MB" for n in names] + ["peers MB"]
    rows = []
    for e in result["epochs"]:
        b = e["bytes_by_source"]
        rows.append([str(e["epoch"]), f"{e['time']:.2f}", f"{e['stall']:.2f}",
                     f"{e['compute']:.2f}", e["bound"], _mb(b["backing"])]
                    + [_mb(b.get(n, 0)) for n in names] + [_mb(b["peers"])])
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        lines.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    tot = result["total"]
    lines.append(f"total: {tot['time']:.2f} s, stall {tot['stall']:.2f} s")
    cap = result["capacity"]
    if cap["first_epoch_stalls"]:
        lines.append("epoch 1 stalls: it reads the plan from the backing store once, whatever "
                     "the capacity (register earlier or keep a warm SSD tier to shorten it)")
    caps = {t["name"]: t.get("capacity") or 0 for t in inp["tiers"]}
    for name, extra in cap["extra_bytes"].items():
        if extra is None:
            lines.append(f"{name}: no capacity of this tier removes the stall of epochs 2+")
        elif extra == 0:
            lines.append(f"{name}: epochs 2+ do not stall with the capacity as it is")
        else:
            more = math.ceil(extra / (1 << 20))  # rounded up: at least this much
            lines.append(f"{name}: epochs 2+ stop stalling with {more} MiB more "
                         f"({math.ceil((caps.get(name, 0) + extra) / (1 << 20))} MiB in all)")
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--predict", action="store_true",
                   help="predict each epoch's time, stall and bytes per source, and the "
                        "capacity that removes the stall (docs/benchmarks.md)")
    p.add_argument("--json", action="store_true", help="with --predict: as JSON")
    p.add_argument("--compute-rate", type=parse_compute, metavar="RATE",
                   help="the job's pace without I/O: samples/s (700) or bytes/s (12MB/s)")
    p.add_argument("--pace", type=float, metavar="SECONDS",
                   help="measure the compute rate from the job's object reads over SECONDS, "
                        "less its stall (each sample one object read)")
    p.add_argument("--backing-bw", type=parse_bytes_rate, metavar="RATE",
                   help="the backing store's bandwidth (25MB/s)")
    p.add_argument("--backing-iops", type=float, default=0.0, metavar="N",
                   help="its reads per second, if it limits them (0: no limit)")
    p.add_argument("--probe", type=int, metavar="N",
                   help="measure the backing store by reading N objects of --backing cold "
                        "(files whole, pieces of the plan's chunk size of bigger ones)")
    p.add_argument("--backing", metavar="DIR", help="the dataset directory the mount serves")
    p.add_argument("--probe-threads", type=int, default=4, metavar="T",
                   help="threads of the probe (default 4: the staging threads)")
    p.add_argument("--tier-bw", type=parse_tier_bw, default={}, metavar="NAME=RATE,...",
                   help="tier bandwidths (default ram=2GB/s,ssd=500MB/s)")
    p.add_argument("--probe-tier", type=parse_tier_dirs, default={}, metavar="NAME=DIR,...",
                   help="measure a tier's device by reading a 128 MiB file in DIR (the tier's "
                        "directory) cold, in pieces of the tier's mean object")
    p.add_argument("--tiers-held", type=float, metavar="F",
                   help="the share (0..1) of their planned bytes the tiers hold before the job "
                        "(default: stats readiness.tiers now; 0: a cold start)")
    p.add_argument("--page-cache", type=parse_page_cache, default=None, metavar="SIZE|auto",
                   help="what the kernel can keep of the SSD tier's files in its page cache "
                        "while the job runs (default auto: MemAvailable now, less the daemon's "
                        "growth; give it in a memory cgroup; 0: every SSD read from the device)")
    p.add_argument("--peer-bw", type=parse_bytes_rate, default=1e9, metavar="RATE",
                   help="what peers deliver (default 1GB/s)")


def run(args: argparse.Namespace, out: Any, err: Any) -> int:
    """`plan --predict`: 0 printed, 1 no plan registered, 2 inputs missing or bad."""
    plan = control.plan(args.mount)
    if not plan.get("entries"):
        print(f"clairfs-ctl: no plan registered at {args.mount}: nothing to predict", file=err)
        return 1
    probe = None
    if args.probe:
        if not args.backing:
            print("clairfs-ctl: --probe needs --backing DIR (the dataset directory)", file=err)
            return 2
        probe = probe_backing(args.backing, args.probe, args.probe_threads, object_size(plan))
    tier_probes = {name: probe_dir(d, object_size(plan, name), args.probe_threads)
                   for name, d in args.probe_tier.items()}
    bw = args.backing_bw or (probe["bytes_per_s"] if probe else None)
    if not bw:
        print("clairfs-ctl: --predict needs the backing store's bandwidth: --backing-bw RATE or "
              "--probe N --backing DIR", file=err)
        return 2
    compute = args.compute_rate
    measured = None
    if compute is None and args.pace:
        measured = pace(args.mount, args.pace)
        if measured["reads"] <= 0:
            print(f"clairfs-ctl: --pace: the job read nothing in {measured['seconds']:.1f} s; "
                  f"give --compute-rate", file=err)
            return 2
        compute = Compute(samples_per_s=measured["samples_per_s"])
    if args.tiers_held is not None and not 0 <= args.tiers_held <= 1:
        print("clairfs-ctl: --tiers-held must be in [0, 1]", file=err)
        return 2
    if compute is None:
        print("clairfs-ctl: --predict needs a compute rate: --compute-rate RATE or --pace SECONDS",
              file=err)
        return 2
    tier_bw = DEFAULT_TIER_BW | {n: p["bytes_per_s"] for n, p in tier_probes.items()}
    rates = Rates(backing_bw=bw, backing_iops=args.backing_iops, tier_bw=tier_bw | args.tier_bw,
                  peer_bw=args.peer_bw)
    stats = control.stats(args.mount)
    page_cache = page_cache_room(stats) if args.page_cache is None else args.page_cache
    try:
        result = build(plan, stats, rates, compute, held=args.tiers_held, page_cache=page_cache)
    except ValueError as e:
        print(f"clairfs-ctl: {e}", file=err)
        return 2
    if probe:
        result["inputs"]["probe"] = probe
    if tier_probes:
        result["inputs"]["tier_probes"] = tier_probes
    if measured:
        result["inputs"]["pace"] = measured
    if args.json:
        import json
        out.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    else:
        out.write(render(result))
    return 0

