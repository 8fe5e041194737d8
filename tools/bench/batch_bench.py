#!/usr/bin/env python3
"""The Python side of tools/bench/batch_compare.sh: reads one list of files through a clairfs
mount's batch path or through the mount, and prints one JSON object (last line).

    batch_bench.py read   --mount MNT --list FILE --procs P [--batch B] [--warmup]
        P processes, each with its own connection (clairfs.batch.BatchClient), read the list's
        files in batches of B (batch k by process k mod P); prints {"files", "seconds", "fps"}.
        --warmup: each process reads its batches once before the timed pass (as the first
        epoch of clairfs-bench --epochs 2, whose second batch_compare.sh compares).
        The batch reader batch_compare.sh uses when clairfs-bench has no --via batch.
    batch_bench.py verify --mount MNT --orig DIR --list FILE --via fuse|batch [--batch B]
        every file read through the mount (open/read) or the batch path, compared with the
        original's bytes; prints {"files", "wrong_samples", "wrong_bytes"} (wrong_bytes: bytes
        that differ, plus any difference in length).
    batch_bench.py loader --mount MNT --list FILE --via fuse|batch [--workers W] [--batch B]
        a torch DataLoader (W workers, batch B, decode = the bytes as a uint8 tensor (over the
        batch buffer for the batch path, over a bytearray read into for the mount), no image
        decode; the default collate stacks a batch into one tensor in shared memory, which is
        how it reaches the training process; --no-deliver: a collate that keeps only the count)
        over clairfs.BatchFiles (batch) or a Dataset
        reading each file with open/readinto (fuse); E epochs (--epochs, default 3) with
        persistent workers, the page cache dropped before each (--drop: root); prints
        {"samples", "seconds", "sps", "first_sps"}: sps over epochs 2..E (the workers
        running, as in training), first_sps the first epoch's (the workers' start included).
Paths in FILE are relative to the mount (and to --orig). Every wait has a deadline.
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))
from clairfs import batch as cbatch  # noqa: E402

DEADLINE = 900.0  # seconds for a whole pass


def read_list(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def batches(paths, size):
    return [paths[i:i + size] for i in range(0, len(paths), size)]


def _read_all(client, chunks):
    n = 0
    for chunk in chunks:
        with client.read(chunk) as b:
            for i in range(len(b)):
                n += len(b[i]) >= 0  # raises the sample's error, if any
    return n


def _reader(mount, chunks, barrier, out, warmup):
    """One process of `read`: reads its batches once untimed when warmup, waits at the
    barrier, reads them, reports count and end."""
    client = cbatch.BatchClient(mount)
    if warmup:
        _read_all(client, chunks)
    barrier.wait(timeout=DEADLINE)
    out.put((_read_all(client, chunks), time.monotonic()))


def cmd_read(a):
    paths = read_list(a.list)
    parts = batches(paths, a.batch)
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(a.procs + 1), ctx.Queue()
    procs = [ctx.Process(target=_reader, args=(a.mount, parts[k::a.procs], barrier, out, a.warmup))
             for k in range(a.procs)]
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=DEADLINE)
        start = time.monotonic()
        results = [out.get(timeout=DEADLINE) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join(timeout=30)
    files = sum(n for n, _ in results)
    seconds = max(t for _, t in results) - start
    print(json.dumps({"files": files, "seconds": round(seconds, 4),
                      "fps": round(files / seconds, 1)}))
    return 0 if files == len(paths) else 1


def cmd_verify(a):
    paths = read_list(a.list)
    wrong_samples = wrong_bytes = 0
    client = cbatch.BatchClient(a.mount) if a.via == "batch" else None
    for chunk in batches(paths, a.batch):
        if client is not None:
            with client.read(chunk) as b:
                got = [bytes(b[i]) for i in range(len(b))]
        else:
            got = []
            for p in chunk:
                with open(os.path.join(a.mount, p), "rb", buffering=0) as f:
                    got.append(f.readall())
        for p, data in zip(chunk, got):
            with open(os.path.join(a.orig, p), "rb", buffering=0) as f:
                want = f.readall()
            if data != want:
                wrong_samples += 1
                wrong_bytes += abs(len(data) - len(want)) + sum(
                    x != y for x, y in zip(data, want))
    print(json.dumps({"files": len(paths), "wrong_samples": wrong_samples,
                      "wrong_bytes": wrong_bytes}))
    return 0


def tensor_of(buffer):
    """The bytes as a uint8 tensor sharing `buffer` (a bytearray: writable, no copy)."""
    import torch  # pylint: disable=import-outside-toplevel
    return torch.frombuffer(buffer, dtype=torch.uint8)


class MountFiles:
    """Sample i: the bytes of paths[i] as a uint8 tensor, read with one open and one readinto
    through the mount (the kernel's copy into the sample's own memory; the batch path's copy is
    the daemon's into the buffer)."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb", buffering=0) as f:
            buf = bytearray(os.fstat(f.fileno()).st_size)
            n = f.readinto(buf)
            return tensor_of(buf if n == len(buf) else buf[:n])


def batch_decode(view):
    """The sample as a uint8 tensor over the batch buffer, no copy: the default collate copies
    it into the batch tensor before the worker reads its next batch (clairfs.torch_batch)."""
    import torch  # pylint: disable=import-outside-toplevel
    return torch.frombuffer(view, dtype=torch.uint8)


def _count(samples):
    """A collate_fn that hands on only how many samples the batch had."""
    return len(samples)


def cmd_loader(a):
    import warnings  # pylint: disable=import-outside-toplevel
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    import torch.utils.data  # pylint: disable=import-outside-toplevel
    import clairfs  # pylint: disable=import-outside-toplevel
    paths = [os.path.join(a.mount, p) for p in read_list(a.list)]
    ds = clairfs.BatchFiles(paths, decode=batch_decode) if a.via == "batch" else MountFiles(paths)
    # --no-deliver: each worker hands on the batch's sample count only (no copy into shared
    # memory, nothing to the training process): what reading alone costs in a loader.
    collate = _count if a.no_deliver else None
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, num_workers=a.workers,
                                         timeout=DEADLINE if a.workers else 0, collate_fn=collate,
                                         persistent_workers=a.workers > 0)
    rates, total, seconds = [], 0, 0.0
    for _ in range(a.epochs):
        if a.drop:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1\n")
        start = time.monotonic()  # the first epoch: the workers' start is in the time
        n = 0
        for b in loader:
            n += b if isinstance(b, int) else len(b)
        took = time.monotonic() - start
        if n != len(paths):
            return 1
        rates.append(n / took)
        total, seconds = total + n, seconds + took
    later = rates[1:] or rates
    print(json.dumps({"samples": total, "seconds": round(seconds, 4),
                      "sps": round(sum(later) / len(later), 1), "first_sps": round(rates[0], 1)}))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("read", "verify", "loader"):
        p = sub.add_parser(name)
        p.add_argument("--mount", required=True)
        p.add_argument("--list", required=True)
        p.add_argument("--batch", type=int, default=256)
        if name == "read":
            p.add_argument("--procs", type=int, default=1)
            p.add_argument("--warmup", action="store_true",
                           help="read every batch once before the timed pass")
        if name == "verify":
            p.add_argument("--orig", required=True)
        if name in ("verify", "loader"):
            p.add_argument("--via", choices=("fuse", "batch"), required=True)
        if name == "loader":
            p.add_argument("--workers", type=int, default=8)
            p.add_argument("--epochs", type=int, default=3)
            p.add_argument("--drop", action="store_true",
                           help="drop the page cache before each epoch (root)")
            p.add_argument("--no-deliver", action="store_true",
                           help="collate to the sample count: reading alone")
    a = ap.parse_args()
    return {"read": cmd_read, "verify": cmd_verify, "loader": cmd_loader}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
