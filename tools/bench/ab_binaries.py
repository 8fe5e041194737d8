#!/usr/bin/env python3
"""Two clairfs binaries side by side, interleaved round by round, on the reads that reach the
daemon: page cache dropped per file (POSIX_FADV_DONTNEED through each mount) before each
clairfs-bench pass, no-open mode (the default). Two sets of files: planned (in the RAM tier:
the daemon serves a blob) and unplanned (read from the backing store: a descriptor per read).
Prints the median files/s and daemon CPU per file (user + system, 10 ms ticks: coarse) per
binary, set and thread count, and every round's value.

Usage: ab_binaries.py --a NAME=BIN --b NAME=BIN [--rounds 8] [--files 2000] [--tmp /dev/shm]
       [--bench build/tools/bench/clairfs-bench]
Everything it mounts and writes is removed at the end, also on error."""
import argparse, json, os, random, shutil, statistics, subprocess, sys, tempfile

from bench_lib import BENCH_BIN, add_dataset_options, add_tmp_option, wait_for

ap = argparse.ArgumentParser()
ap.add_argument("--a", required=True)
ap.add_argument("--b", required=True)
ap.add_argument("--rounds", type=int, default=8)
add_dataset_options(ap, files=2000)
add_tmp_option(ap, "/dev/shm")
ap.add_argument("--bench", default=BENCH_BIN)
args = ap.parse_args()
bins = dict(x.split("=", 1) for x in (args.a, args.b))
SIZE = 110 * 1024
base = tempfile.mkdtemp(prefix="clairfs-ab-", dir=args.tmp)
ds = os.path.join(base, "ds")
rng = random.Random(1)
sets = {"planned": [], "unplanned": []}
for kind, n, tag in (("planned", args.files, "p"), ("unplanned", args.files // 2, "u")):
    for i in range(n):
        rel = f"{tag}{i % 20:02d}/{i:05d}.bin"
        os.makedirs(os.path.join(ds, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(ds, rel), "wb") as f:
            f.write(rng.randbytes(SIZE))
        sets[kind].append(rel)
    random.Random(2).shuffle(sets[kind])
    with open(os.path.join(base, kind), "w") as f:
        f.write("\n".join(sets[kind]) + "\n")
cfg = os.path.join(base, "cfg.yaml")
with open(cfg, "w") as f:
    f.write("fuse:\n  threads: 4\ncache:\n  tiers:\n    - kind: ram\n      capacity: 400MiB\n"
            "      threads: 2\n  staging:\n    capacity: 16MiB\n    threads: 2\n")
procs = {}


def mnt(name):
    return os.path.join(base, "m-" + name)


def cpu(name):
    f = open(f"/proc/{procs[name].pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


try:
    for name, b in bins.items():
        os.makedirs(mnt(name))
        procs[name] = subprocess.Popen([b, "-f", "-c", cfg, ds, mnt(name)],
                                       stdout=open(os.path.join(base, name + ".log"), "w"),
                                       stderr=subprocess.STDOUT)
    for name in bins:
        wait_for(lambda: os.path.isdir(os.path.join(mnt(name), ".clairfs")), 10, "the mount")
        fd = os.open(os.path.join(mnt(name), ".clairfs", "manifest"), os.O_WRONLY | os.O_TRUNC)
        os.write(fd, (("\n".join(sets["planned"]) + "\n") * 30).encode())
        os.close(fd)
    for name in bins:
        def full():
            st = json.load(open(os.path.join(mnt(name), ".clairfs", "stats")))
            return sum(t["bytes"] for t in st["tiers"]) >= len(sets["planned"]) * SIZE
        wait_for(full, 120, "the RAM tier")
    res = {}
    for rnd in range(args.rounds):
        for name in (list(bins) if rnd % 2 == 0 else list(bins)[::-1]):
            for kind, rels in sets.items():
                for threads in (1, 4):
                    for rel in rels:
                        fd = os.open(os.path.join(mnt(name), rel), os.O_RDONLY)
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                        os.close(fd)
                    c0 = cpu(name)
                    out = subprocess.run([args.bench, "--root", mnt(name), "--list",
                                          os.path.join(base, kind), "--threads", str(threads),
                                          "--json", "--no-stats"],
                                         capture_output=True, text=True, timeout=600)
                    epoch = json.loads(out.stdout)["epochs"][0]
                    if epoch["errors"]:
                        raise SystemExit(f"{name} {kind}: {epoch['errors']} read errors")
                    res.setdefault((name, kind, threads), []).append(
                        (epoch["files_per_s"], (cpu(name) - c0) * 1e6 / len(rels)))
        print(f"round {rnd + 1} of {args.rounds}", file=sys.stderr)
    print("| binary | files | threads | files/s (median) | daemon CPU us/file (median) | files/s per round |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for (name, kind, threads), v in sorted(res.items()):
        print(f"| {name} | {kind} | {threads} | {statistics.median(x for x, _ in v):,.0f} | "
              f"{statistics.median(c for _, c in v):.0f} | {', '.join(f'{x:.0f}' for x, _ in v)} |")
finally:
    for name in procs:
        subprocess.run(["fusermount3", "-u", mnt(name)], stderr=subprocess.DEVNULL)
    for p in procs.values():
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
    if not any(os.path.ismount(mnt(n)) for n in bins):
        shutil.rmtree(base, ignore_errors=True)
