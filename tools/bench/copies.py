#!/usr/bin/env python3
"""How many times memory holds each byte of a dataset read through clairfs, side by side.

For each daemon binary and each cache.backing_pages setting given: a fresh dataset directory's
pages dropped (drop_caches 1: root), the daemon started over it with a RAM tier that holds all
of it, a 2-epoch plan registered, the RAM tier filled, epoch 1 read through the mount in plan
order (every page of the mount's files then in the page cache, as after any warm epoch). Then
counted, over the dataset's bytes:
  daemon   the daemon's resident memory grown since it was mounted (the RAM tier, its index;
           not the batch clients' buffers it maps: rss below)
  mount    the page cache of the mount's files (fincore)
  backing  the page cache of the dataset's own files (fincore): what the daemon's reads left
  copies   their sum
With --via batch, epoch 1 is read through the batch path instead (clairfs.batch, batches of
256 in plan order, into this process's buffer, which is not counted: it is where the bytes are
delivered, as a read's buffer is); --via fuse,batch measures both, a run each.
Prints a table and, as its last line, one JSON object with a row per run.

Usage: /usr/bin/python3 tools/bench/copies.py [--files N] [--size BYTES]
         [--clairfs-bin LABEL=PATH ...] [--backing-pages drop,keep] [--via fuse,batch] [--tmp DIR]
Defaults: 3600 files of 112640 bytes, build/daemon/clairfs, both settings, via fuse, /var/tmp."""
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

DEADLINE = 300  # seconds for a mount, a fill or an unmount


def wait_for(predicate, what, timeout=DEADLINE):
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def make_dataset(root, files, size):
    rng = random.Random(7)
    paths = []
    for i in range(files):
        rel = f"c{i % 36:02d}/{i:07d}.bin"
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(rng.randbytes(size))
        paths.append(rel)
    rng.shuffle(paths)
    return paths


def cached_bytes(paths):
    """The page-cache bytes of the files (fincore), 1,000 files per call."""
    total = 0
    for i in range(0, len(paths), 1000):
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES",
                              *paths[i:i + 1000]], check=True, capture_output=True, text=True)
        total += sum(int(x) for x in out.stdout.split())
    return total


def rss(pid):
    """The daemon's own resident memory: anonymous and file pages (RssAnon + RssFile). Not its
    shared memory (RssShmem): that is the batch clients' buffers, mapped while a client is
    connected (their own memory, counted once, by the client; a client that just ended may
    still be mapped for a moment)."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value
    if "RssAnon" not in fields or "RssFile" not in fields:
        raise RuntimeError("no RssAnon/RssFile")
    return sum(int(fields[k].split()[0]) * 1024 for k in ("RssAnon", "RssFile"))


def is_mounted(mnt):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == mnt for line in f)


def read_epoch(mnt, paths, via):
    """Epoch 1 in plan order: through the mount, or through the batch path in batches of 256."""
    if via == "fuse":
        for rel in paths:
            clairfs.read_file(os.path.join(mnt, rel))
        return
    from clairfs import batch  # pylint: disable=import-outside-toplevel
    with batch.BatchClient(mnt) as client:
        for i in range(0, len(paths), 256):
            with client.read(paths[i:i + 256]) as b:
                for k in range(len(b)):
                    b[k]  # raises the sample's error, if any  # pylint: disable=pointless-statement


def run_one(binary, pages, data, paths, size, work, via="fuse"):
    mnt = tempfile.mkdtemp(prefix="mnt-", dir=work)
    cfg = os.path.join(work, f"cfg-{pages}.yaml")
    dataset = len(paths) * size
    with open(cfg, "w") as f:
        f.write("cache:\n  tiers:\n    - kind: ram\n"
                f"      capacity: {dataset * 5 // 4 // (1 << 20) + 64}MiB\n")
        if pages:
            f.write(f"  backing_pages: {pages}\n")
    os.sync()  # written pages are dirty, and neither drop_caches nor DONTNEED drops those
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")
    log = open(os.path.join(work, f"daemon-{pages}.log"), "w")
    proc = subprocess.Popen([binary, "-f", "-c", cfg, data, mnt], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: is_mounted(mnt) or proc.poll() is not None, "the mount")
        if proc.poll() is not None:
            raise RuntimeError(f"{binary} exited {proc.returncode}; see {log.name}")
        rss0 = rss(proc.pid)
        clairfs.register_paths(mnt, [paths, paths])
        wait_for(lambda: clairfs.stats(mnt).get("ram_bytes", 0) >= dataset, "the RAM tier")
        read_epoch(mnt, paths, via)  # epoch 1, in plan order
        row = {"daemon": rss(proc.pid) - rss0,
               "mount": cached_bytes([os.path.join(mnt, p) for p in paths]),
               "backing": cached_bytes([os.path.join(data, p) for p in paths])}
        row = {k: round(v / dataset, 3) for k, v in row.items()}
        row["copies"] = round(row["daemon"] + row["mount"] + row["backing"], 3)
        return row
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True, timeout=30)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=3600)
    ap.add_argument("--size", type=int, default=112640)
    ap.add_argument("--clairfs-bin", action="append", default=[])
    ap.add_argument("--backing-pages", default="drop,keep")
    ap.add_argument("--via", default="fuse", help="fuse, batch or fuse,batch")
    ap.add_argument("--tmp", default="/var/tmp")
    a = ap.parse_args()
    bins = [b.split("=", 1) if "=" in b else ("clairfs", b) for b in a.clairfs_bin]
    bins = bins or [("clairfs", os.path.join(REPO, "build", "daemon", "clairfs"))]
    work = tempfile.mkdtemp(prefix="clairfs-copies.", dir=a.tmp)
    rows = []
    try:
        data = os.path.join(work, "data")
        paths = make_dataset(data, a.files, a.size)
        # A file modified within the last second keeps its pages (a writer may be at work).
        newest = max(os.stat(os.path.join(data, p)).st_mtime for p in paths)
        wait_for(lambda: time.time() > newest + 1.1, "the dataset to be a second old", 10)
        for label, binary in bins:
            for pages, via in [(p, v) for p in a.backing_pages.split(",") for v in a.via.split(",")]:
                row = run_one(os.path.abspath(binary), pages if pages != "default" else "",
                              data, paths, a.size, work, via)
                rows.append({"clairfs": label, "backing_pages": pages, "via": via, **row})
                print(f"{label:>12} backing_pages={pages:<7} via {via:<5} daemon {row['daemon']:.3f}  "
                      f"mount {row['mount']:.3f}  backing {row['backing']:.3f}  "
                      f"copies {row['copies']:.3f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"files": a.files, "size": a.size, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
