#!/usr/bin/env python3
"""batch_compare.sh end to end at a tiny scale (300 files, one repetition, 2 threads, 2 loader
workers): its last line is one JSON object with every figure the issue asks for, the batch
path was measured (the daemon has one), every sample read through the mount and through the
batch path equals the original (wrong_bytes 0), and the batch path holds fewer copies than the
mount. Nothing is asserted about speed. Skips (77) without /dev/fuse or root (the page cache
drop needs root). argv: CLAIRFS_BIN BENCH_BIN."""
import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench",
                      "batch_compare.sh")
KEYS = ("native_page_cache_fps", "fuse_fps", "batch_fps", "loader_fuse_sps", "loader_batch_sps",
        "batch_copies", "fuse_copies", "wrong_bytes")


def main():
    clairfs, bench = sys.argv[1:3]
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        print("skip: needs /dev/fuse and root")
        return 77
    p = subprocess.run([SCRIPT, "--files", "300", "--repeats", "1", "--threads", "2",
                        "--loader-workers", "2"],
                       env=dict(os.environ, CLAIRFS_BIN=clairfs, BENCH_BIN=bench),
                       capture_output=True, text=True, timeout=500)
    if p.returncode != 0:
        print(p.stdout, p.stderr[-3000:])
        return 1
    out = json.loads(p.stdout.strip().splitlines()[-1])
    failures = [f"no {k}" for k in KEYS if k not in out]
    torch = subprocess.run([os.environ.get("PYTHON", "/usr/bin/python3"), "-c", "import torch"],
                           capture_output=True, timeout=120).returncode == 0
    for k in ("native_page_cache_fps", "fuse_fps", "batch_fps") + (
            ("loader_fuse_sps", "loader_batch_sps") if torch else ()):
        if not isinstance(out.get(k), (int, float)) or out[k] <= 0:
            failures.append(f"{k}: {out.get(k)!r}")
    if out.get("wrong_bytes") != 0:
        failures.append(f"wrong_bytes {out.get('wrong_bytes')!r}")
    if not (isinstance(out.get("batch_copies"), float) and out["batch_copies"] < 1.5):
        failures.append(f"batch_copies {out.get('batch_copies')!r}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(p.stdout, p.stderr[-3000:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
