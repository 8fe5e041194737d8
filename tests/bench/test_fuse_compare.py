#!/usr/bin/env python3
"""fuse_compare.sh end to end at a tiny scale (200 files, one repetition, one thread): native,
the reference file system (clairfs-fuse-ceiling) and two labelled clairfs builds. Every FUSE
source must read the same bytes as native (its XXH3 sum), the ceiling and clairfs must count
one READ or more per file, and every FUSE row carries a ratio to the ceiling. Nothing is
asserted about speed. Skips (77) without /dev/fuse or root (the page cache drop needs root).
argv: CLAIRFS_BIN CEILING_BIN BENCH_BIN."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench",
                      "fuse_compare.sh")


def main():
    clairfs, ceiling, bench = sys.argv[1:4]
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        print("skip: needs /dev/fuse and root")
        return 77
    p = subprocess.run(
        [SCRIPT, "--files", "200", "--repeats", "1", "--threads", "1", "--drop-caches", "1",
         "--sources", "native,ceiling,clairfs", "--clairfs-bin", f"a={clairfs},b={clairfs}",
         "--ceiling-bin", ceiling, "--bench-bin", bench],
        capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print(p.stdout, p.stderr[-3000:])
        return 1
    rows = {}
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 13 and cells[1] == "1":
            rows[cells[0]] = cells
    failures = []
    for name in ("native", "native (page cache)", "ceiling", "clairfs a (default)",
                 "clairfs b (default)", "native (again)"):
        if name not in rows:
            failures.append(f"no row {name!r}")
            continue
        r = rows[name]
        if r[11] != "yes":
            failures.append(f"{name}: bytes differ from native: {r[11]}")
        if float(r[2]) <= 0:
            failures.append(f"{name}: no files/s: {r[2]}")
        fuse = name not in ("native", "native (page cache)", "native (again)")
        if fuse and r[5] == "n/a":
            failures.append(f"{name}: no ratio to the ceiling")
        if fuse and (r[8] == "n/a" or float(r[8]) < 1.0):
            failures.append(f"{name}: READs per file {r[8]}, expected >= 1 with the cache dropped")
    if rows.get("ceiling", [""] * 6)[5] != "1.00":
        failures.append("the ceiling's own ratio is not 1.00")
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(p.stdout)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
