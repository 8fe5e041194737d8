#!/usr/bin/env python3
"""predict_report.py: predicted against measured epoch times, for tools/bench/predict_bench.sh.

  predict_report.py [--scenarios DIR] [--records DIR] --bps B [--iops N]
                    [--probe-tier NAME=DIR] [--json FILE]

DIR: what scenarios.sh --keep and records_bench.sh --keep wrote. For every clairfs run kept,
the epochs are predicted by clairfs.predict_cli.build (what `clairfs-ctl plan --predict`
computes) from the plan as the daemon gave it right after registration (its per_epoch), a cold
start (the tiers hold nothing: the job reads right after registering), the compute rate of the
run's lower bound (samples per second of the --compute-only epoch) and the backing store's
given bandwidth and IOPS (the emulated PFS's throttle, shared by the ranks of scenario 3: each
node gets 1/N); a tier named in --probe-tier at what its directory's device gave a cold read in
pieces of the run's mean object in that tier (predict_cli.probe_dir, as `plan --predict
--probe-tier` measures it), other tiers and peers at predict_cli's defaults. Prints the
markdown tables: per run
and epoch the measured and predicted time and stall and their ratio, and per run the capacity
the model says would remove the stall of epochs 2+.
"""
import argparse
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from clairfs.predict import Compute, Rates  # noqa: E402
from clairfs.predict_cli import (DEFAULT_TIER_BW, build, object_size, parse_tier_dirs,  # noqa: E402
                                 probe_dir)

TOLERANCE = 0.15


def _load(path):
    with open(path) as f:
        return json.load(f)


_PROBED = {}


def tier_bw(a, plan):
    """The tiers' bandwidths for a plan: defaults, and probes of --probe-tier's directories in
    pieces of the plan's mean object in that tier (each piece size probed once)."""
    bw = dict(DEFAULT_TIER_BW)
    for name, d in a.probe_tier.items():
        piece = object_size(plan, name)
        if (name, piece) not in _PROBED:
            _PROBED[(name, piece)] = probe_dir(d, piece, 4)["bytes_per_s"]
        bw[name] = _PROBED[(name, piece)]
    return bw


def predicted_runs(a):
    """(bench, run, lb seconds, measured epochs, per-rank predictions) for every kept run."""
    runs = []
    if a.scenarios:
        for path in sorted(glob.glob(os.path.join(a.scenarios, "s*.clairfs.json"))):
            s = re.match(r"s(\d+)\.", os.path.basename(path)).group(1)
            lb = _load(os.path.join(a.scenarios, f"s{s}.lb.json"))["epochs"][0]
            plans = [_load(p) for p in sorted(glob.glob(os.path.join(a.scenarios, f"s{s}.plan.r*.json")))]
            compute = Compute(samples_per_s=lb["files"] / lb["seconds"])
            preds = [build(p, {}, Rates(backing_bw=a.bps / len(plans),
                                        backing_iops=a.iops / len(plans), tier_bw=tier_bw(a, p)),
                           compute, held=0.0) for p in plans]
            runs.append(("scenarios", f"scenario {s}" + (f" ({len(plans)} ranks)" if len(plans) > 1 else ""),
                         lb["seconds"], _load(path)["epochs"], preds))
    if a.records:
        lb = _load(os.path.join(a.records, "lb.json"))["epochs"][0]
        compute = Compute(samples_per_s=lb["records"] / lb["seconds"])
        for path in sorted(glob.glob(os.path.join(a.records, "clairfs-*.json"))):
            run = _load(path)
            chunk = os.path.basename(path)[len("clairfs-"):-len(".json")]
            rates = Rates(backing_bw=a.bps, backing_iops=a.iops, tier_bw=tier_bw(a, run["plan"]))
            runs.append(("records", f"records, {chunk} chunks", lb["seconds"], run["epochs"],
                         [build(run["plan"], {}, rates, compute, held=0.0)]))
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios")
    ap.add_argument("--records")
    ap.add_argument("--bps", type=float, required=True)
    ap.add_argument("--iops", type=float, default=0.0)
    ap.add_argument("--probe-tier", type=parse_tier_dirs, default={})
    ap.add_argument("--json")
    a = ap.parse_args()
    runs = predicted_runs(a)
    print("| run | epoch | lower bound s | measured s | predicted s | predicted / measured | "
          "within 15 % | measured stall s | predicted stall s | predicted bound |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    out, met, total = [], 0, 0
    for bench, name, lb, measured, preds in runs:
        for e, m in enumerate(measured[:3]):
            # Ranks: the slowest one's epoch, as scenarios.sh reports the measurement.
            p = max((r["epochs"][e] for r in preds if e < len(r["epochs"])), key=lambda x: x["time"])
            ratio = p["time"] / m["seconds"]
            ok = abs(ratio - 1) <= TOLERANCE
            met, total = met + ok, total + 1
            print(f"| {name} | {e + 1} | {lb:.2f} | {m['seconds']:.2f} | {p['time']:.2f} | "
                  f"{ratio:.2f} | {'yes' if ok else 'no'} | {m['stall_s']:.2f} | "
                  f"{p['stall']:.2f} | {p['bound']} |")
            out.append({"bench": bench, "run": name, "epoch": e + 1, "measured_s": m["seconds"],
                        "predicted_s": p["time"], "measured_stall_s": m["stall_s"],
                        "predicted_stall_s": p["stall"], "bound": p["bound"]})
    print(f"\n{met} of {total} epochs within 15 %.\n")
    print("| run | tiers: capacity MiB, bandwidth MB/s | predicted stall, epochs 2+ s | extra "
          "capacity that removes it (per tier alone) |")
    print("|---|---|---|---|")
    for bench, name, lb, measured, preds in runs:
        r = preds[0]
        tiers = ", ".join(f"{t['name']} {(t['capacity'] or 0) / (1 << 20):.0f} MiB "
                          f"{r['inputs']['tier_bw'][t['name']] / 1e6:.0f} MB/s"
                          for t in r["inputs"]["tiers"])
        later = sum(e["stall"] for e in r["epochs"][1:])
        extra = ", ".join(f"{n}: " + ("none helps" if x is None else
                                      "none needed" if x == 0 else f"+{x / (1 << 20):.0f} MiB")
                          for n, x in r["capacity"]["extra_bytes"].items())
        print(f"| {name}{' (rank 0)' if len(preds) > 1 else ''} | {tiers} | {later:.2f} | {extra} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
