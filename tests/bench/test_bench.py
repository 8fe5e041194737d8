#!/usr/bin/env python3
"""Smoke test of clairfs-bench (argv[1]) over a small temporary tree, no mount: the three modes
read the same bytes (equal --verify sums), the JSON carries each mode's per-epoch keys, the
simulated compute adds up to what was asked, the probes work, and a missing file is counted.
Asserts no timings beyond wall time >= requested compute. Runs in about a second."""
import json
import os
import random
import subprocess
import sys
import tempfile

BENCH = sys.argv[1]
COMMON_KEYS = {"epoch", "files", "bytes", "errors", "seconds", "files_per_s", "mb_per_s",
               "p50_us", "p99_us"}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def bench(*args, expect_rc=0):
    p = subprocess.run([BENCH, *args, "--json"], capture_output=True, text=True, timeout=60)
    check(p.returncode == expect_rc, f"{args}: exit {p.returncode} != {expect_rc}: {p.stderr}")
    return json.loads(p.stdout)


def main():
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "data")
        names = []
        for i in range(60):
            d = os.path.join(root, f"c{i % 4}")
            os.makedirs(d, exist_ok=True)
            name = f"c{i % 4}/#f{i}" if i == 5 else f"c{i % 4}/f{i}"
            size = [0, 1, (1 << 20) + 3][i] if i < 3 else rng.randrange(1, 200_000)
            with open(os.path.join(root, name), "wb") as f:
                f.write(rng.randbytes(size))
            names.append(name)
        total = sum(os.path.getsize(os.path.join(root, n)) for n in names)
        listed = ["./" + n if os.path.basename(n).startswith("#") else n for n in names]
        lst = os.path.join(tmp, "list.txt")
        with open(lst, "w") as f:
            for e in range(2):
                order = listed[:]
                random.Random(e).shuffle(order)
                f.write("#epoch\n# a comment\n" + "\n".join(order) + "\n")
        stats = os.path.join(tmp, "stats.json")
        with open(stats, "w") as f:
            json.dump({"backing_bytes": 5, "served": {"ram": 2}, "tiers": [{"name": "ram", "served": 1}]}, f)

        thr = bench("--root", root, "--list", lst, "--threads", "3", "--verify")
        check(thr["mode"] == "throughput" and len(thr["epochs"]) == 2, "throughput: mode, 2 epochs")
        sums = {e["checksum"] for e in thr["epochs"]}
        check(len(sums) == 1, f"throughput: one sum for two shuffles of one set: {sums}")
        for e in thr["epochs"]:
            check(COMMON_KEYS <= e.keys(), f"throughput keys: {sorted(e)}")
            check(e["files"] == 60 and e["bytes"] == total and e["errors"] == 0, "throughput counts")

        rep = bench("--root", root, "--list", lst, "--workers", "3", "--prefetch-factor", "2",
                    "--batch-size", "4", "--compute-ms", "0.2", "--verify", "--stats", stats,
                    "--block-dev", "no-such-dev")
        check(rep["mode"] == "replay" and rep["workers"] == 3 and rep["batch_size"] == 4, "replay header")
        check(rep["stats_before"] == rep["stats_after"], "stats snapshots of a static file are equal")
        for e in rep["epochs"]:
            check((COMMON_KEYS | {"stall_s", "compute_s", "checksum", "stats_delta"}) <= e.keys(),
                  f"replay keys: {sorted(e)}")
            check(e["checksum"] in sums, "replay reads the same bytes as throughput")
            check(e["files"] == 60 and e["bytes"] == total, "replay counts")
            check(abs(e["compute_s"] - 60 * 0.2e-3) < 1e-9, f"compute_s {e['compute_s']} != 0.012")
            check(e["seconds"] >= e["compute_s"] and e["stall_s"] >= 0, "wall time covers compute")
            check(e["stats_delta"] == {"backing_bytes": 0, "served.ram": 0, "tiers.ram.served": 0},
                  f"stats_delta: {e['stats_delta']}")
            check("device_read_bytes" not in e, "an unreadable device yields no device keys")

        lb = bench("--root", root, "--list", lst, "--compute-only", "--compute-ns-per-byte", "1",
                   "--epochs", "1")
        e = lb["epochs"][0]
        check(lb["mode"] == "compute-only" and e["files"] == 60 and e["bytes"] == total,
              "compute-only counts samples and their sizes")
        check(abs(e["compute_s"] - total * 1e-9) < 1e-9, "compute-only: compute per byte")

        with open(lst, "a") as f:
            f.write("c0/missing\n")
        bad = bench("--root", root, "--list", lst, "--workers", "2", "--replay", expect_rc=1)
        check(bad["epochs"][0]["errors"] == 0, "epoch 1 (section 1) has no missing file")
        e = bad["epochs"][1]
        check(e["errors"] == 1 and e["files"] == 60 and "c0/missing" in e.get("first_error", ""),
              f"missing file counted, the rest read: {e}")
    print("bench: " + ("FAILED: %d" % len(failures) if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
