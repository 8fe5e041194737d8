#!/usr/bin/env python3
"""autotune_bench.sh --quick end to end (600 files on the emulated PFS, throttled to 25 MB/s and
unthrottled; the tuned default and a 2 x 2 grid, one run each, then --confirm 1: the grid's best
again beside the tuned default): the report has a summary row per setting with a tuned time,
the grid's best and worst, their ratio and the tuner's final state from stats, a confirmation
row per setting naming a setting of the grid, and a full grid per setting. Nothing is asserted
about speed. Skips (77) without
root, /dev/fuse or the cgroup-v1 blkio and memory controllers the emulated PFS needs.
argv: CLAIRFS_BIN BENCH_BIN."""
import os
import re
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench",
                      "autotune_bench.sh")
STATES = ("static", "threads", "capacity", "stable")


def main():
    clairfs, bench = sys.argv[1:3]
    if (os.geteuid() != 0 or not os.path.exists("/dev/fuse")
            or not os.path.exists("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device")
            or not os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        print("skip: needs root, /dev/fuse and cgroup-v1 blkio and memory")
        return 77
    env = dict(os.environ, CLAIRFS_BIN=clairfs, BENCH_BIN=bench)
    settings = ["25000000:400", "0:0"]
    p = subprocess.run([SCRIPT, "--quick", "--settings", ",".join(settings), "--confirm", "1"],
                       capture_output=True, text=True, timeout=600, env=env)
    if p.returncode != 0:
        print(p.stdout, p.stderr[-3000:])
        return 1
    failures = []
    rows, confirm = [], []
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and re.match(r"^[0-9.]+$", cells[2]):
            rows.append(cells)
        if len(cells) == 6 and re.match(r"^[0-9.]+$", cells[2]):
            confirm.append(cells)
    if len(rows) != len(settings):
        failures.append(f"{len(rows)} summary rows, expected {len(settings)} (one per setting)")
    if len(confirm) != len(settings):
        failures.append(f"{len(confirm)} confirmation rows, expected {len(settings)}")
    for r in confirm:
        tuned, it = float(r[2]), float(r[3])
        if not re.match(r"^(1|8) thr, (16|256) MiB$", r[1]) or not (tuned > 0 and it > 0):
            failures.append(f"confirmation row {r}")
        elif abs(float(r[4]) - tuned / it) > 0.005 / it + 0.005 * tuned / it ** 2 + 0.001:
            failures.append(f"{r[0]}: tuned / it {r[4]} is not {tuned / it:.3f}")
    for r in rows:
        tuned, best, worst = float(r[2]), float(r[3].split()[0]), float(r[4].split()[0])
        if not (tuned > 0 and 0 < best <= worst):
            failures.append(f"{r[0]}: times {r[2:5]}")
        # The times are printed to 0.01 s, the ratio from the unrounded ones.
        slack = 0.005 / best + 0.005 * tuned / best ** 2 + 0.001
        if abs(float(r[5]) - tuned / best) > slack:
            failures.append(f"{r[0]}: tuned / best {r[5]} is not {tuned / best:.3f}")
        m = re.match(r"^(\d+), (\d+), (\w+)$", r[6])
        if not m or m.group(3) not in STATES or m.group(3) == "static":
            failures.append(f"{r[0]}: tuner at the end {r[6]!r}")
        elif not (1 <= int(m.group(1)) <= 32 and 16 <= int(m.group(2)) <= 256):
            failures.append(f"{r[0]}: tuner outside its range: {r[6]!r}")
    grid = [line for line in p.stdout.splitlines() if re.match(r"^\| (16|256) MiB \|", line)]
    if len(grid) != 2 * len(settings) or any(len(re.findall(r"\| [0-9.]+ (?=\|)", g)) != 2 for g in grid):
        failures.append(f"grid rows: {grid}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(p.stdout)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
