#!/usr/bin/env python3
"""The seed's own loader beside clairfs, with compute: NoPFS (spcl/NoPFS, branch old-nopfs, its
in-process loader) and clairfs (through the mount by a PyTorch DataLoader; through the batch
path by a DataLoader and in-process), each reading the same samples in the same order.

Every sample is a file of about 110 KB in class directories (ImageFolder's layout) whose first
8 bytes are its index, so that each loader's order is recorded as it reads, at no cost: NoPFS
runs first and its order, epoch by epoch, becomes clairfs's manifest and the DataLoaders'
sampler; every later sample is checked against it (an index out of place or bytes not the
file's count in wrong_samples). The training loop is the same for all: after each batch of B
samples it sleeps B x --compute-ms (a GPU step; the CPU is free meanwhile). The page cache is
dropped (drop_caches 1) before every epoch. Epoch times are wall seconds from the first request
to the last batch's compute.

Loaders (all bytes, no decode):
  nopfs          hdmlp.Job(...).get() per sample (memory tier holding the whole dataset)
  mount          DataLoader(num_workers=W, batch_size=B), clairfs.read_file through the mount
  batch          DataLoader(num_workers=W, batch_size=B) over clairfs.torch_batch.BatchFiles
                 (one request per batch)
  batch-inproc   in the training process: clairfs.batch.prefetch keeps --depth batches read
                 ahead by a thread (zero copy: views into the client's buffer)

Run it on an emulated parallel file system, e.g. (root):
  tools/bench/emulated_pfs.sh --files 1 --mem 4096 -- /usr/bin/python3 \\
      tools/bench/nopfs_compare.py --nopfs-src DIR --data-parent PFS
where DIR is a checkout of NoPFS's branch old-nopfs (built here with cmake when its
libhdmlp/build/libhdmlp.so is missing; needs libconfig++-dev, libopencv-dev, libhdf5-dev) and
PFS the directory the dataset is made in (emulated_pfs.sh exports PFS_DATA; its parent is used
when --data-parent is not given). Prints a table and, last, one JSON object.

Usage: /usr/bin/python3 tools/bench/nopfs_compare.py --nopfs-src DIR [--files N] [--epochs E]
         [--batch B] [--workers W] [--compute-ms MS] [--rounds R] [--loaders a,b,...]
         [--clairfs-bin PATH] [--data-parent DIR] [--depth D]"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))
import clairfs  # noqa: E402

LOADERS = ("nopfs", "mount", "batch", "batch-inproc")
CLASSES = 40
SEED = 17


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")


def make_dataset(root, files, seed):
    """files samples of 90-130 KB in CLASSES directories; sample i begins with i (8 bytes)."""
    rng = random.Random(seed)
    paths = []
    for i in range(files):
        rel = f"c{i % CLASSES:03d}/s{i:06d}.bin"
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        size = rng.randint(90_000, 130_000)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(i.to_bytes(8, "little") + rng.randbytes(size - 8))
        paths.append(rel)
    return paths


def build_nopfs(src):
    """libhdmlp.so of the checkout at src, built with cmake if missing."""
    lib = os.path.join(src, "libhdmlp", "build", "libhdmlp.so")
    if os.path.exists(lib):
        return lib
    build = os.path.dirname(lib)
    os.makedirs(build, exist_ok=True)
    # The old code misses standard includes newer compilers no longer pull in transitively.
    flags = " ".join(f"-include {h}" for h in ("condition_variable", "mutex", "thread", "cstdint",
                                                "stdexcept", "limits", "algorithm", "cstring",
                                                "functional"))
    subprocess.run(["cmake", "..", "-DCMAKE_BUILD_TYPE=Release", "-DENABLE_HDF5=ON",
                    f"-DCMAKE_CXX_FLAGS={flags} -I/usr/include/hdf5/serial"], cwd=build,
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["make", "-j2"], cwd=build, check=True, stdout=subprocess.DEVNULL)
    return lib


NOPFS_CONFIG = """b_c = 10000
b_fs = 2000
distributed_threads = 1
checkpoint = false
checkpoint_path = "{tmp}"
storage_classes: ( {{
        capacity: 256
        threads: 4
        bandwidth: ( {{ threads = 1; bw = 16550; }}, {{ threads = 4; bw = 21415; }} );
}},
{{
        capacity: {memory_mb}
        backend: "memory"
        threads: 2
        bandwidth: ( {{ threads = 1; bw = 16550; }}, {{ threads = 2; bw = 21164; }} );
}});
pfs_bandwidth: ( {{ processes: 1; bw: 25; }}, {{ processes: 4; bw: 25; }} );
"""


class Loop:
    """The training loop all loaders share: per batch, B x compute seconds of sleep."""

    def __init__(self, compute_s):
        self.compute_s = compute_s

    def step(self, n):
        time.sleep(n * self.compute_s)


def run_nopfs(args, lib, data, epochs, loop, tmp):
    sys.path.insert(0, args.nopfs_src)
    from hdmlp import hdmlp  # noqa: E402  (NoPFS's Python package, from its checkout)
    cfg = os.path.join(tmp, "hdmlp.cfg")
    with open(cfg, "w") as f:
        f.write(NOPFS_CONFIG.format(tmp=tmp, memory_mb=args.files * 140 // 1000 + 256))
    job = hdmlp.Job(data + "/", args.batch, epochs, "uniform", False, seed=SEED, config_path=cfg,
                    libhdmlp_path=lib)
    job.setup()
    n = job.length()
    orders, times = [], []
    for _ in range(epochs):
        drop_caches()
        order = []
        t = time.perf_counter()
        for start in range(0, n, args.batch):
            m = min(args.batch, n - start)
            for _ in range(m):
                _, sample = job.get()
                order.append(int.from_bytes(sample[:8], "little"))
            loop.step(m)
        times.append(time.perf_counter() - t)
        orders.append(order)
        log(f"nopfs epoch {len(times)}: {times[-1]:.2f} s")
    job.destroy()
    return times, orders


class ListSampler:
    """The sampler the DataLoaders iterate: the current epoch's order, set between epochs."""

    def __init__(self):
        self.order = []

    def __iter__(self):
        return iter(self.order)

    def __len__(self):
        return len(self.order)


def check(batch, expected, wrong, truth):
    """Counts samples of batch (bytes-like each) not at their place or not the file's bytes."""
    for got, want in zip(batch, expected):
        if int.from_bytes(bytes(got[:8]), "little") != want or len(got) != truth[want]:
            wrong[0] += 1
    if len(batch) != len(expected):
        wrong[0] += abs(len(batch) - len(expected))


def run_loader(kind, args, mnt, paths, orders, loop, truth, wrong):
    import torch.utils.data as tud
    absolute = [os.path.join(mnt, p) for p in paths]
    sampler = ListSampler()
    if kind == "mount":
        dataset = MountFiles(absolute)
    else:
        from clairfs import torch_batch
        dataset = torch_batch.BatchFiles(absolute, decode=bytes)
    loader = tud.DataLoader(dataset, batch_size=args.batch, sampler=sampler,
                            num_workers=args.workers, collate_fn=lambda b: b,
                            persistent_workers=True, prefetch_factor=2)
    times = []
    for order in orders:
        sampler.order = order
        drop_caches()
        t = time.perf_counter()
        at = 0
        for batch in loader:
            check(batch, order[at:at + len(batch)], wrong, truth)
            at += len(batch)
            loop.step(len(batch))
        times.append(time.perf_counter() - t)
        log(f"{kind} epoch {len(times)}: {times[-1]:.2f} s")
    del loader
    return times


class MountFiles:
    """Map-style: the bytes of a file through the mount (clairfs.read_file: no tty probe)."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return clairfs.read_file(self.paths[i])


def run_inproc(args, mnt, paths, orders, loop, truth, wrong):
    from clairfs import batch as cb
    client = cb.BatchClient(mnt)
    times = []
    for order in orders:
        drop_caches()
        batches = [order[i:i + args.batch] for i in range(0, len(order), args.batch)]
        t = time.perf_counter()
        for idx, got in zip(batches, cb.prefetch(client, ([paths[i] for i in b] for b in batches),
                                                 depth=args.depth)):
            with got:
                check([got[i] for i in range(len(got))], idx, wrong, truth)
                loop.step(len(idx))
        times.append(time.perf_counter() - t)
        log(f"batch-inproc epoch {len(times)}: {times[-1]:.2f} s")
    client.close()
    return times


def start_clairfs(binary, data, mnt, work, files, orders, paths):
    cfg = os.path.join(work, "clairfs.yaml")
    with open(cfg, "w") as f:
        f.write(f"cache:\n  tiers:\n    - kind: ram\n      capacity: {files * 140 // 1000 + 64}MiB\n")
    proc = subprocess.Popen([binary, "-f", "-c", cfg, data, mnt], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "clairfs.log"), "w"))
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(mnt, ".clairfs", "stats")):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"clairfs did not mount: {open(os.path.join(work, 'clairfs.log')).read()}")
        time.sleep(0.05)
    with open(os.path.join(mnt, ".clairfs", "manifest"), "w") as f:
        for order in orders:
            f.write("#epoch\n" + "".join(paths[i] + "\n" for i in order))
    return proc


def stop_clairfs(proc, mnt):
    subprocess.run(["fusermount3", "-u", mnt], timeout=30, check=False)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        subprocess.run(["fusermount3", "-u", "-z", mnt], timeout=30, check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nopfs-src", required=True)
    ap.add_argument("--files", type=int, default=4800)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--compute-ms", type=float, default=1.5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--loaders", default=",".join(LOADERS))
    ap.add_argument("--clairfs-bin", default=os.path.join(REPO, "build", "daemon", "clairfs"))
    ap.add_argument("--data-parent", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("nopfs_compare: run as root (drop_caches)")
    loaders = args.loaders.split(",")
    for name in loaders:
        if name not in LOADERS:
            sys.exit(f"nopfs_compare: unknown loader {name!r} (of {', '.join(LOADERS)})")
    parent = args.data_parent or (os.path.dirname(os.environ["PFS_DATA"])
                                  if "PFS_DATA" in os.environ else "/var/tmp")
    work = tempfile.mkdtemp(prefix="clairfs-nopfs.", dir="/var/tmp")
    data = tempfile.mkdtemp(prefix="nopfs-data.", dir=parent)
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt)
    loop = Loop(args.compute_ms / 1000)
    results = {name: [] for name in loaders}
    wrong = [0]
    orders = None
    try:
        lib = build_nopfs(args.nopfs_src)
        log(f"dataset: {args.files} files in {data}")
        paths = make_dataset(data, args.files, SEED)
        truth = [os.path.getsize(os.path.join(data, p)) for p in paths]
        for r in range(args.rounds):
            names = loaders if r % 2 == 0 else [loaders[0]] + loaders[1:][::-1]
            for name in names:
                if name == "nopfs":
                    times, got = run_nopfs(args, lib, data, args.epochs, loop, work)
                    if orders is not None and got != orders:
                        sys.exit("nopfs_compare: NoPFS's order differs between rounds")
                    orders = got
                    results[name].append(times)
                    continue
                if orders is None:
                    sys.exit("nopfs_compare: the order comes from NoPFS: list nopfs first")
                proc = start_clairfs(args.clairfs_bin, data, mnt, work, args.files, orders, paths)
                try:
                    if name == "batch-inproc":
                        times = run_inproc(args, mnt, paths, orders, loop, truth, wrong)
                    else:
                        times = run_loader(name, args, mnt, paths, orders, loop, truth, wrong)
                    with open(os.path.join(mnt, ".clairfs", "stats")) as f:
                        stats = json.load(f)
                    log(f"{name}: backing_bytes {stats.get('backing_bytes')}, "
                        f"dataset {sum(truth)}")
                finally:
                    stop_clairfs(proc, mnt)
                results[name].append(times)
    finally:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    compute = args.files * args.compute_ms / 1000
    print(f"{args.files} samples, batch {args.batch}, {args.compute_ms} ms compute a sample "
          f"({compute:.2f} s an epoch), {args.workers} DataLoader workers; epoch seconds per "
          f"round; later epochs: the mean of epochs 2..{args.epochs}, and its ratio to NoPFS's")
    print("| loader | round | " + " | ".join(f"epoch {e + 1}" for e in range(args.epochs)) +
          " | later | / nopfs |")
    print("|---|---|" + "---|" * args.epochs + "---|---|")
    later = {}
    for name in loaders:
        for r, times in enumerate(results[name]):
            rest = times[1:] or times
            later.setdefault(name, []).append(sum(rest) / len(rest))
    out = {"files": args.files, "batch": args.batch, "compute_ms": args.compute_ms,
           "workers": args.workers, "wrong_samples": wrong[0], "epochs": results}
    for name in loaders:
        for r, times in enumerate(results[name]):
            ratio = later[name][r] / later["nopfs"][r] if "nopfs" in later else float("nan")
            print(f"| {name} | {r + 1} | " + " | ".join(f"{t:.2f}" for t in times) +
                  f" | {later[name][r]:.2f} | {ratio:.3f} |")
            out.setdefault("later_ratio_to_nopfs", {}).setdefault(name, []).append(round(ratio, 4))
    print(json.dumps(out))
    return 1 if wrong[0] else 0


if __name__ == "__main__":
    sys.exit(main())
