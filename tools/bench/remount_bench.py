#!/usr/bin/env python3
"""Warm restarts: how much of the dataset a remount reads from the backing store again.

For each value of cache.keep_copies (false: the behaviour before warm restarts; true), on a
fresh SSD directory: mount clairfs with a RAM and an SSD tier, register a 3-epoch manifest,
wait until the tiers (and the kept copies) are filled, read epoch 1, unmount with
`fusermount3 -u`; mount again on the same SSD directory, register the same manifest, read
epoch 1 at once and report the second mount's backing_bytes over the dataset's bytes.

Dataset: tools/make_dataset.py DIR --files N --mean-kb KB --sigma 0.5 --classes 100 --seed 1;
manifest: tools/make_manifest.py DIR --epochs 3 --seed 1. Every read is checked against the
dataset file's bytes. Everything created (mounts, daemons, the temp dir) is removed on exit,
also on an error or Ctrl-C.

Usage: tools/bench/remount_bench.py [--files 6000] [--mean-kb 110] [--ram 42MiB] [--ssd 1GiB]
         [--staging 64MiB] [--tmp /var/tmp] [--clairfs-bin build/daemon/clairfs]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench_lib import CLAIRFS_BIN, REPO, add_dataset_options, add_tmp_option, wait_for


def is_mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


class Mount:
    def __init__(self, binary, cfg, ds, mnt, log):
        self.mnt = mnt
        self.log = open(log, "ab")
        self.proc = subprocess.Popen([binary, "-f", "-c", cfg, ds, mnt], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        wait_for(lambda: is_mounted(mnt) or self.proc.poll() is not None, 30, "the mount")
        if self.proc.poll() is not None:
            raise RuntimeError(f"clairfs exited with {self.proc.returncode}; see {log}")

    def control(self, name):
        with open(os.path.join(self.mnt, ".clairfs", name)) as f:
            return json.load(f)

    def unmount(self):
        if self.proc is None:
            return
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], timeout=30)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            if is_mounted(self.mnt):
                subprocess.run(["fusermount3", "-uz", self.mnt], timeout=30)
        self.proc = None
        self.log.close()


def read_epoch(mnt, ds, epoch):
    for rel in epoch:
        with open(os.path.join(mnt, rel), "rb") as f, open(os.path.join(ds, rel), "rb") as g:
            if f.read() != g.read():
                raise RuntimeError(f"{rel}: wrong bytes")


def run(a, tmp, ds, manifest, epochs, total, keep):
    ssd_dir = os.path.join(tmp, f"ssd-{keep}")
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt, exist_ok=True)
    cfg = os.path.join(tmp, f"cfg-{keep}.yaml")
    with open(cfg, "w") as f:
        f.write(f"""fuse: {{keep_cache: false}}
cache:
  tiers:
    - {{kind: ram, capacity: {a.ram}, threads: 2}}
    - {{kind: ssd, capacity: {a.ssd}, threads: 2, dir: {ssd_dir}}}
  staging: {{capacity: {a.staging}}}
  keep_copies: {str(keep).lower()}
""")
    log = os.path.join(tmp, f"daemon-{keep}.log")
    out = {}
    for mount_no in (1, 2):
        m = Mount(a.clairfs_bin, cfg, ds, mnt, log)
        try:
            with open(os.path.join(mnt, ".clairfs", "manifest"), "wb") as f:
                f.write(manifest)
            plan = m.control("plan")
            if mount_no == 1:
                tiered = sum(t["objects"] for t in plan["tiers"])
                kept = plan["tiers"][1]["kept_objects"]
                wait_for(lambda: m.control("stats")["prefetch"]["fetches"] >= tiered, 600,
                     "the tier fill")
                wait_for(lambda: m.control("stats")["kept"]["written"] >= kept
                     and m.control("stats")["kept"]["pending"] == 0, 600, "the kept copies")
                out["plan"] = plan
            t0 = time.monotonic()
            read_epoch(mnt, ds, epochs[0])
            st = m.control("stats")
            out[mount_no] = {"backing_bytes": st["backing_bytes"], "served": st["served"],
                             "seconds": time.monotonic() - t0, "kept": st["kept"]}
        finally:
            m.unmount()
    ram = out["plan"]["tiers"][0]
    print(f"| {str(keep).lower()} | {ram['bytes']} ({100 * ram['bytes'] / total:.1f} %) | "
          f"{out['plan']['tiers'][1]['kept_bytes']} | {out[1]['backing_bytes']} | "
          f"{out[2]['backing_bytes']} ({100 * out[2]['backing_bytes'] / total:.2f} %) | "
          f"{out[2]['served']} | {out[2]['seconds']:.1f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_dataset_options(ap, files=6000, mean_kb=110)
    ap.add_argument("--ram", default="42MiB")
    ap.add_argument("--ssd", default="1GiB")
    ap.add_argument("--staging", default="64MiB")
    add_tmp_option(ap)
    ap.add_argument("--clairfs-bin", default=CLAIRFS_BIN)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="clairfs-remount.", dir=a.tmp)
    try:
        ds = os.path.join(tmp, "ds")
        subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_dataset.py"), ds,
                        "--files", str(a.files), "--mean-kb", str(a.mean_kb), "--sigma", "0.5",
                        "--classes", "100", "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
        manifest = subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_manifest.py"),
                                   ds, "--epochs", "3", "--seed", "1"], check=True,
                                  capture_output=True).stdout
        epochs, cur = [], None
        for line in manifest.decode().splitlines():
            if line == "#epoch":
                cur = []
                epochs.append(cur)
            elif line and not line.startswith("#"):
                if cur is None:
                    cur = []
                    epochs.append(cur)
                cur.append(line)
        total = sum(os.path.getsize(os.path.join(ds, p)) for p in set(epochs[0]))
        print(f"Dataset: {a.files} files, {total} bytes; RAM tier {a.ram}, SSD tier {a.ssd}, "
              f"staging {a.staging}; manifest 3 epochs, epoch 1 read on each mount.\n")
        print("| keep_copies | RAM tier bytes (share) | kept on SSD | mount 1 backing_bytes | "
              "mount 2 backing_bytes (share) | mount 2 served | mount 2 read s |")
        print("|---|---|---|---|---|---|---|", flush=True)
        for keep in (False, True):
            run(a, tmp, ds, manifest, epochs, total, keep)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
