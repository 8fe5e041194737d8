#!/usr/bin/env python3
"""records_replay.py: the Python side of tools/bench/records_bench.sh (records in big files).

  make DIR --index FILE [--size-mb N] [--shards S] [--mean-kb K] [--sigma S] [--seed S]
      Writes S TFRecord shards DIR/train-NNNNN-of-SSSSS.tfrecord holding about N MB (10**6 B)
      of records with lognormal data sizes around K KB (seeded random bytes, incompressible),
      and FILE: a JSON index of every record (shard, offset, length of the framed record, CRC-32
      of its data). Every shard's ranges are checked against clairfs.tfrecord_records().

  replay --root DIR --index FILE --out JSON [--epochs E] [--seed S] [--workers W]
         [--prefetch-factor F] [--batch-size B] [--compute-ms C] [--compute-only]
         [--register] [--stats PATH] [--block-dev DEV]
      A training loop over the records, as clairfs-bench --compute-ms replays one over files:
      epoch e reads every record once in the order random.Random(seed + e).shuffle gives; W
      worker threads each read a batch of B consecutive records (os.pread of the record's
      range through the worker's own descriptor per shard, opened at first use in an epoch,
      closed at its end, as a DataLoader worker's dataset would), at most F x W batches claimed
      and not yet consumed; one consumer takes batches in order and computes B x C ms per batch
      on a device timeline (a sleep until the planned end: late wake-ups do not add up). Stall:
      the time the consumer waited for a batch. --compute-only: the consumer alone, one epoch,
      the lower bound. Every record's TFRecord header (length and its CRC) and data CRC-32 are
      checked; a mismatch is an error, counted and reported, never fatal.
      --register: write the E epochs' order to ROOT/.clairfs/manifest as record-range entries
      (clairfs.register_records) right before the first read. Probes before and after every
      epoch: the clairfs stats file (--stats, default ROOT/.clairfs/stats when it exists) and
      the block device's read counters (--block-dev loop0: /sys/block/DEV/stat).

  report --index FILE --lb JSON --run LABEL=JSON...
      The markdown tables of records_bench.sh from the replays' outputs.

Only the standard library and the clairfs package (python/) are needed; python3-crcmod,
when installed, makes writing the shards about 20 times faster (CRC-32C in C).
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
import clairfs  # noqa: E402
from clairfs import tfrecord  # noqa: E402
from bench_lib import add_dataset_options, add_loader_options  # noqa: E402

_HEAD = struct.Struct("<QI")


def _fast_crc32c():
    """Makes clairfs.tfrecord's CRC-32C use crcmod's C code when it is installed (the same
    function: CRC-32C, checked on a test vector); returns whether it did."""
    try:
        import crcmod.predefined
    except ImportError:
        return False
    fn = crcmod.predefined.mkCrcFun("crc-32c")
    data = b"123456789" + bytes(range(256))
    if fn(data) != tfrecord.crc32c(data):
        return False
    tfrecord.crc32c = lambda d, crc=0: fn(bytes(d), crc)
    return True


# ------------------------------------------------------------------------------------- make

def cmd_make(a):
    fast = _fast_crc32c()
    if not fast:
        print("records_replay: python3-crcmod is not installed; CRC-32C in pure Python "
              "(about 10 MB/s)", file=sys.stderr)
    rng = random.Random(a.seed)
    mu = math.log(a.mean_kb * 1000) - a.sigma ** 2 / 2
    target = a.size_mb * 10 ** 6
    os.makedirs(a.dir, exist_ok=True)
    shards, records, total = [], [], 0
    start = time.monotonic()
    for s in range(a.shards):
        name = f"train-{s:05d}-of-{a.shards:05d}.tfrecord"
        shard_target = target * (s + 1) // a.shards
        crcs = []

        def payloads():
            nonlocal total
            while total < shard_target:
                size = max(1, min(int(rng.lognormvariate(mu, a.sigma)), 16 << 20))
                data = rng.randbytes(size)
                crcs.append(zlib.crc32(data))
                total += size + tfrecord.FRAMING
                yield data
        path = os.path.join(a.dir, name)
        recs = tfrecord.write_tfrecord(path, payloads())
        parsed = clairfs.tfrecord_records(path)
        if [(r.offset, r.length) for r in parsed] != [(r.offset, r.length) for r in recs]:
            raise SystemExit(f"records_replay: {path}: tfrecord_records() disagrees with the writer")
        shards.append(name)
        records += [[s, r.offset, r.length, c] for r, c in zip(recs, crcs)]
    with open(a.index, "w") as f:
        json.dump({"format": "tfrecord", "shards": shards, "bytes": total,
                   "records": records, "mean_kb": a.mean_kb, "sigma": a.sigma, "seed": a.seed}, f)
    print(f"{len(records)} records in {len(shards)} shards, {total} bytes in {a.dir} "
          f"({time.monotonic() - start:.0f} s, CRC-32C {'crcmod' if fast else 'pure Python'})",
          file=sys.stderr)


# ------------------------------------------------------------------------------------- replay

def read_json_file(path):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def dev_reads(dev):
    """(bytes, read requests completed) of a block device since boot, or None."""
    if not dev:
        return None
    try:
        with open(f"/sys/block/{dev}/stat") as f:
            fields = f.read().split()
    except OSError:
        return None
    return int(fields[2]) * 512, int(fields[0])


def orders(n, epochs, seed):
    out = []
    for e in range(epochs):
        order = list(range(n))
        random.Random(seed + e).shuffle(order)
        out.append(order)
    return out


class EpochRun:
    """One epoch of the loader pipeline: workers ahead of one consumer (see the module doc)."""

    def __init__(self, a, index, order, compute_only):
        self.a, self.index, self.order, self.compute_only = a, index, order, compute_only
        self.batches = [order[i:i + a.batch_size] for i in range(0, len(order), a.batch_size)]
        self.ready = [None] * len(self.batches)
        self.cond = threading.Condition()
        self.slots = threading.Semaphore(a.prefetch_factor * a.workers)
        self.claim_lock = threading.Lock()
        self.next = 0
        self.errors = 0
        self.first_error = None
        self.bytes = 0

    def _error(self, msg):
        with self.claim_lock:
            self.errors += 1
            if self.first_error is None:
                self.first_error = msg

    def _read_batch(self, b, fds):
        recs, shards, root = self.index["records"], self.index["shards"], self.a.root
        n = 0
        for i in self.batches[b]:
            s, off, length, crc = recs[i]
            fd = fds.get(s)
            try:
                if fd is None:
                    fd = fds[s] = os.open(os.path.join(root, shards[s]), os.O_RDONLY)
                data = os.pread(fd, length, off)
            except OSError as e:
                self._error(f"record {i} ({shards[s]} {off}+{length}): {e}")
                continue
            n += len(data)
            if len(data) != length:
                self._error(f"record {i} ({shards[s]} {off}+{length}): {len(data)} bytes read")
                continue
            dlen, hcrc = _HEAD.unpack_from(data)
            if dlen != length - tfrecord.FRAMING or hcrc != tfrecord.masked_crc32c(data[:8]):
                self._error(f"record {i} ({shards[s]} {off}+{length}): bad TFRecord header")
            elif zlib.crc32(memoryview(data)[12:12 + dlen]) != crc:
                self._error(f"record {i} ({shards[s]} {off}+{length}): wrong data")
        return n

    def _worker(self):
        fds = {}
        try:
            while True:
                self.slots.acquire()
                with self.claim_lock:
                    b = self.next
                    self.next += 1
                if b >= len(self.batches):
                    self.slots.release()
                    return
                n = self._read_batch(b, fds)
                with self.cond:
                    self.ready[b] = n
                    self.cond.notify_all()
        finally:
            for fd in fds.values():
                os.close(fd)

    def run(self):
        a = self.a
        compute = a.compute_ms / 1000.0
        threads = []
        if not self.compute_only:
            threads = [threading.Thread(target=self._worker, daemon=True) for _ in range(a.workers)]
        start = time.monotonic()
        for t in threads:
            t.start()
        stall = 0.0
        device_end = start
        for b, batch in enumerate(self.batches):
            if not self.compute_only:
                with self.cond:
                    t0 = time.monotonic()
                    while self.ready[b] is None:
                        self.cond.wait()
                    stall += time.monotonic() - t0
                    self.bytes += self.ready[b]
                self.slots.release()
            now = time.monotonic()
            device_end = max(device_end, now) + len(batch) * compute
            delay = device_end - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        seconds = time.monotonic() - start
        for t in threads:
            t.join()
        return {"seconds": round(seconds, 3), "stall_s": round(stall, 3),
                "compute_s": round(len(self.order) * compute, 3), "records": len(self.order),
                "bytes": self.bytes, "errors": self.errors, "first_error": self.first_error}


STAT_KEYS = ("backing_bytes", "backing_reads", "chunk_reads", "unplanned_chunk_reads",
             "bytes_read", "stall_ns", "peer_fetched")


def stats_delta(before, after):
    if before is None or after is None:
        return None
    d = {k: after.get(k, 0) - before.get(k, 0) for k in STAT_KEYS}
    d["served"] = {k: v - before.get("served", {}).get(k, 0)
                   for k, v in after.get("served", {}).items()}
    d["fetches"] = (after.get("prefetch", {}).get("fetches", 0)
                    - before.get("prefetch", {}).get("fetches", 0))
    d["errors"] = {k: v - before.get("errors", {}).get(k, 0)
                   for k, v in after.get("errors", {}).items() if v != before.get("errors", {}).get(k, 0)}
    return d


def cmd_replay(a):
    index = read_json_file(a.index)
    if index is None:
        raise SystemExit(f"records_replay: cannot read the index {a.index}")
    n = len(index["records"])
    epochs = 1 if a.compute_only else a.epochs
    plan_orders = orders(n, epochs, a.seed)
    stats_path = a.stats
    if stats_path is None and os.path.exists(os.path.join(a.root, ".clairfs", "stats")):
        stats_path = os.path.join(a.root, ".clairfs", "stats")
    out = {"root": a.root, "records": n, "dataset_bytes": index["bytes"], "epochs": [],
           "options": {k: getattr(a, k) for k in ("workers", "prefetch_factor", "batch_size",
                                                  "compute_ms", "seed", "compute_only")}}
    if a.register:
        t0 = time.monotonic()
        recs, shards = index["records"], index["shards"]
        clairfs.register_records(a.root, [[(shards[recs[i][0]], recs[i][1], recs[i][2])
                                           for i in order] for order in plan_orders])
        out["register_s"] = round(time.monotonic() - t0, 3)
        out["plan"] = clairfs.plan(a.root)
    out["stats_before"] = read_json_file(stats_path) if stats_path else None
    for e, order in enumerate(plan_orders):
        s0 = read_json_file(stats_path) if stats_path else None
        d0 = dev_reads(a.block_dev)
        r = EpochRun(a, index, order, a.compute_only).run()
        d1 = dev_reads(a.block_dev)
        s1 = read_json_file(stats_path) if stats_path else None
        r["epoch"] = e
        if d0 and d1:
            r["device_read_bytes"], r["device_read_ios"] = d1[0] - d0[0], d1[1] - d0[1]
        r["stats_delta"] = stats_delta(s0, s1)
        out["epochs"].append(r)
        print(f"epoch {e}: {r['seconds']:.2f} s, stall {r['stall_s']:.2f} s, "
              f"{r['records']} records, {r['bytes']} bytes, {r['errors']} errors"
              + (f", device {r.get('device_read_bytes', 0)} B in {r.get('device_read_ios', 0)} reads"
                 if d0 else "")
              + (f", backing {r['stats_delta']['backing_bytes']} B in "
                 f"{r['stats_delta']['backing_reads']} reads" if r["stats_delta"] else ""),
              file=sys.stderr)
    out["stats_after"] = read_json_file(stats_path) if stats_path else None
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    return 1 if any(r["errors"] for r in out["epochs"]) else 0


# ------------------------------------------------------------------------------------- report

def _fmt(x, nd=2):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def _mb(b):
    return f"{b / 1e6:.1f}" if b is not None else "-"


def cmd_report(a):
    index = read_json_file(a.index)
    lb = read_json_file(a.lb)["epochs"][0]["seconds"]
    runs = []
    for spec in a.run:
        label, _, path = spec.partition("=")
        runs.append((label, read_json_file(path)))
    data = index["bytes"]
    nrec = len(index["records"])
    p = print
    p("Per epoch. Requests to the PFS: direct, one `pread` per record; clairfs, its "
      "`backing_reads` (one per chunk fetched). Device: the loop device's completed reads and "
      "bytes (every reader of the PFS, the daemon's prefetch included).")
    p()
    p("| run | epoch | s | / lower bound | stall s | requests to the PFS | bytes requested MB "
      "| KB per request | device reads | device MB | errors |")
    p("|---|---|---|---|---|---|---|---|---|---|---|")
    totals = []
    for label, r in runs:
        tot = {"req": 0, "bytes": 0, "dev_ios": 0, "dev_bytes": 0, "errors": 0, "later": []}
        for e in r["epochs"]:
            sd = e.get("stats_delta")
            if sd is None:  # direct: one request per record
                req, by = e["records"], e["bytes"]
            else:
                req, by = sd["backing_reads"], sd["backing_bytes"]
            tot["req"] += req
            tot["bytes"] += by
            tot["dev_ios"] += e.get("device_read_ios", 0)
            tot["dev_bytes"] += e.get("device_read_bytes", 0)
            tot["errors"] += e["errors"]
            if e["epoch"] > 0:
                tot["later"].append(e["seconds"] / lb)
            p(f"| {label} | {e['epoch'] + 1} | {e['seconds']:.2f} | {e['seconds'] / lb:.3f} "
              f"| {e['stall_s']:.2f} | {req} | {_mb(by)} | {by / req / 1e3 if req else 0:.0f} "
              f"| {e.get('device_read_ios', '-')} | {_mb(e.get('device_read_bytes'))} "
              f"| {e['errors']} |")
        totals.append((label, r, tot))
    p()
    p(f"Over all epochs (dataset: {nrec} records, {data / 1e6:.0f} MB; lower bound "
      f"{lb:.2f} s per epoch):")
    p()
    p("| run | requests to the PFS | requests / records read | bytes requested / dataset "
      "| device reads | device bytes / dataset | epochs 2+ max / lower bound | served "
      "| plan: predicted backing / dataset |")
    p("|---|---|---|---|---|---|---|---|---|")
    for label, r, tot in totals:
        read = sum(e["records"] for e in r["epochs"])
        served = "-"
        if r.get("stats_after"):
            sv = {k: v for k, v in r["stats_after"].get("served", {}).items() if v}
            served = ", ".join(f"{k} {v}" for k, v in sorted(sv.items())) or "-"
        pred = "-"
        if r.get("plan"):
            pred = f"{r['plan']['predicted_backing_bytes'] / data:.2f}"
        later = max(tot["later"]) if tot["later"] else None
        p(f"| {label} | {tot['req']} | {tot['req'] / read:.3f} | {tot['bytes'] / data:.2f} "
          f"| {tot['dev_ios']} | {tot['dev_bytes'] / data:.2f} | {_fmt(later, 3)} | {served} "
          f"| {pred} |")


# ------------------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--index", required=True)
    m.add_argument("--size-mb", type=int, default=1500)
    m.add_argument("--shards", type=int, default=8)
    add_dataset_options(m, mean_kb=110.0, sigma=0.5, seed=1)
    r = sub.add_parser("replay")
    r.add_argument("--root", required=True)
    r.add_argument("--index", required=True)
    r.add_argument("--out", required=True)
    add_loader_options(r)
    add_dataset_options(r, seed=1)
    r.add_argument("--compute-only", action="store_true")
    r.add_argument("--register", action="store_true")
    r.add_argument("--stats")
    r.add_argument("--block-dev")
    rp = sub.add_parser("report")
    rp.add_argument("--index", required=True)
    rp.add_argument("--lb", required=True)
    rp.add_argument("--run", action="append", required=True, help="LABEL=replay.json")
    a = ap.parse_args()
    if a.cmd == "make":
        if a.size_mb < 1 or a.shards < 1 or a.mean_kb <= 0:
            ap.error("--size-mb, --shards, --mean-kb must be positive")
        cmd_make(a)
        return 0
    if a.cmd == "replay":
        if min(a.epochs, a.workers, a.prefetch_factor, a.batch_size) < 1 or a.compute_ms < 0:
            ap.error("--epochs, --workers, --prefetch-factor, --batch-size >= 1; --compute-ms >= 0")
        return cmd_replay(a)
    cmd_report(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
