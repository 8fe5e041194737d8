#!/usr/bin/env python3
"""predict_report.py: predicted against measured epoch times, for tools/bench/predict_bench.sh.

  predict_report.py [--scenarios DIR] [--records DIR] --bps B [--iops N]
                    [--probe-tier NAME=DIR] [--json FILE]
  predict_report.py probe DIR --objects N --piece BYTES [--threads T]
      prints the JSON of clairfs.ctl.predict.probe_backing (what `clairfs-ctl plan --predict
      --probe N --backing DIR` measures): the benches run it inside the throttled groups.

DIR: what scenarios.sh --keep and records_bench.sh --keep wrote. For every clairfs run kept,
the epochs are predicted by clairfs.ctl.predict.build (what `clairfs-ctl plan --predict`
computes) from the plan as the daemon gave it right after registration (its per_epoch), a cold
start (the tiers hold nothing: the job reads right after registering), the compute rate of the
run's lower bound (samples per second of the --compute-only epoch) and the backing store's
given bandwidth and IOPS (the emulated PFS's throttle, shared by the ranks of scenario 3: each
node gets 1/N); the page cache holding what it held of the SSD tiers' files at the end of the
run (fincore, kept by the bench; --page-cache BYTES instead); a tier named in --probe-tier at what its directory's device gave a cold read in
pieces of the run's mean object in that tier (clairfs.ctl.predict.probe_dir, as `plan --predict
--probe-tier` measures it), other tiers and peers at its defaults. Prints the
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
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from clairfs.predict import Compute, Rates  # noqa: E402
from clairfs.ctl.predict import (DEFAULT_TIER_BW, build, object_size, parse_tier_dirs,  # noqa: E402
                                 probe_backing, probe_dir)

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


def _predictions(a, plans, compute, ranks, probe, page_cache):
    """Per rate set ("given": --bps/--iops; "probed": the probe's bytes/s, when kept), the
    per-rank predictions of the plans. The store is shared: each of N ranks gets 1/N, and so is
    the page cache (page_cache: the bytes it held of the SSD tiers' files)."""
    sets = {"given": (a.bps, a.iops)}
    if probe:
        sets["probed"] = (probe["bytes_per_s"], 0.0)  # the probe's rate includes the IOPS limit
    return {k: [build(p, {}, Rates(backing_bw=bw / ranks, backing_iops=iops / ranks,
                                   tier_bw=tier_bw(a, p)), compute, held=0.0,
                      page_cache=page_cache / ranks) for p in plans]
            for k, (bw, iops) in sets.items()}


def _page_cache(a, path):
    """The bytes the page cache held of the SSD tiers' files at the end of the run (kept by the
    bench: fincore), or --page-cache if given; 0 when neither."""
    if a.page_cache is not None:
        return a.page_cache
    j = _probe(path)
    return float(j["ssd"]["cached"]) if j else 0.0


def _probe(path):
    return _load(path) if os.path.exists(path) else None


def predicted_runs(a):
    """(bench, run, lb seconds, measured epochs, {rate set: per-rank predictions}) for every
    kept run."""
    runs = []
    if a.scenarios:
        probe = _probe(os.path.join(a.scenarios, "probe.json"))
        for path in sorted(glob.glob(os.path.join(a.scenarios, "s*.clairfs.json"))):
            s = re.match(r"s(\d+)\.", os.path.basename(path)).group(1)
            lb = _load(os.path.join(a.scenarios, f"s{s}.lb.json"))["epochs"][0]
            plans = [_load(p) for p in
                     sorted(glob.glob(os.path.join(a.scenarios, f"s{s}.plan.r*.json")))]
            compute = Compute(samples_per_s=lb["files"] / lb["seconds"])
            name = f"scenario {s}" + (f" ({len(plans)} ranks)" if len(plans) > 1 else "")
            cached = _page_cache(a, os.path.join(a.scenarios, f"s{s}.pagecache.json"))
            runs.append(("scenarios", name, lb["seconds"], _load(path)["epochs"],
                         _predictions(a, plans, compute, len(plans), probe, cached)))
    if a.records:
        lb = _load(os.path.join(a.records, "lb.json"))["epochs"][0]
        compute = Compute(samples_per_s=lb["records"] / lb["seconds"])
        for path in sorted(glob.glob(os.path.join(a.records, "clairfs-*.json"))):
            run = _load(path)
            chunk = os.path.basename(path)[len("clairfs-"):-len(".json")]
            probe = _probe(os.path.join(a.records, f"probe-{chunk}.json"))
            cached = _page_cache(a, os.path.join(a.records, f"pagecache-{chunk}.json"))
            runs.append(("records", f"records, {chunk} chunks", lb["seconds"], run["epochs"],
                         _predictions(a, [run["plan"]], compute, 1, probe, cached)))
    return runs


def _slowest(preds, e):
    """Epoch e of the slowest rank, as scenarios.sh reports the measurement."""
    return max((r["epochs"][e] for r in preds if e < len(r["epochs"])), key=lambda x: x["time"])


def probe_main(argv):
    ap = argparse.ArgumentParser(prog="predict_report.py probe")
    ap.add_argument("dir")
    ap.add_argument("--objects", type=int, required=True)
    ap.add_argument("--piece", type=int, required=True)
    ap.add_argument("--threads", type=int, default=4)
    a = ap.parse_args(argv)
    print(json.dumps(probe_backing(a.dir, a.objects, a.threads, a.piece)))
    return 0


def main():
    if sys.argv[1:2] == ["probe"]:
        return probe_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios")
    ap.add_argument("--records")
    ap.add_argument("--bps", type=float, required=True)
    ap.add_argument("--iops", type=float, default=0.0)
    ap.add_argument("--probe-tier", type=parse_tier_dirs, default={})
    ap.add_argument("--page-cache", type=float, default=None,
                    help="bytes of the SSD tiers' files in the page cache (default: as kept)")
    ap.add_argument("--json")
    a = ap.parse_args()
    runs = predicted_runs(a)
    print("| run | epoch | lower bound s | measured s | predicted s (given) | / measured | "
          "predicted s (probed) | / measured | measured stall s | predicted stall s (given, "
          "probed) | predicted bound |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    out, met, total = [], {"given": 0, "probed": 0}, {"given": 0, "probed": 0}
    for bench, name, lb, measured, sets in runs:
        for e, m in enumerate(measured[:3]):
            row = {"bench": bench, "run": name, "epoch": e + 1, "measured_s": m["seconds"],
                   "measured_stall_s": m["stall_s"]}
            cells = []
            for k in ("given", "probed"):
                if k not in sets:
                    cells.append(("-", "-", "-"))
                    continue
                p = _slowest(sets[k], e)
                ratio = p["time"] / m["seconds"]
                ok = abs(ratio - 1) <= TOLERANCE
                met[k], total[k] = met[k] + ok, total[k] + 1
                cells.append((f"{p['time']:.2f}", f"{ratio:.2f}" + ("" if ok else " (miss)"),
                              f"{p['stall']:.2f}"))
                row |= {f"predicted_s_{k}": p["time"], f"predicted_stall_s_{k}": p["stall"],
                        f"bound_{k}": p["bound"]}
            (g_t, g_r, g_s), (p_t, p_r, p_s) = cells
            print(f"| {name} | {e + 1} | {lb:.2f} | {m['seconds']:.2f} | {g_t} | {g_r} | {p_t} | "
                  f"{p_r} | {m['stall_s']:.2f} | {g_s}, {p_s} | {row.get('bound_given')} |")
            out.append(row)
    print("\nWithin 15 %: " + ", ".join(f"{met[k]} of {total[k]} epochs with the {k} bandwidth"
                                      for k in ("given", "probed") if total[k]) + ".\n")
    print("| run | backing store: given, probed MB/s | tiers: capacity MiB, bandwidth MB/s | "
          "page cache: MiB, share of SSD reads | "
          "predicted stall, epochs 2+ s (given) | extra capacity that removes it (per tier "
          "alone) |")
    print("|---|---|---|---|---|---|")
    for bench, name, lb, measured, sets in runs:
        r = sets["given"][0]
        probed = (f"{sets['probed'][0]['inputs']['backing_bw'] * len(sets['probed']) / 1e6:.1f}"
                  if "probed" in sets else "-")
        tiers = ", ".join(f"{t['name']} {(t['capacity'] or 0) / (1 << 20):.0f} MiB "
                          f"{r['inputs']['tier_bw'][t['name']] / 1e6:.0f} MB/s"
                          for t in r["inputs"]["tiers"])
        later = sum(e["stall"] for e in r["epochs"][1:])
        extra = ", ".join(f"{n}: " + ("none helps" if x is None else
                                      "none needed" if x == 0 else f"+{x / (1 << 20):.0f} MiB")
                          for n, x in r["capacity"]["extra_bytes"].items())
        ranks = len(sets["given"])
        pc = (f"{r['inputs']['page_cache'] / (1 << 20):.0f}, "
              f"{r['inputs']['page_cached'].get('ssd', 0):.2f}")
        print(f"| {name}{' (rank 0)' if ranks > 1 else ''} | "
              f"{r['inputs']['backing_bw'] * ranks / 1e6:.1f}, {probed} | {tiers} | {pc} | "
              f"{later:.2f} | {extra} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
