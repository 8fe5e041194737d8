#!/usr/bin/python3
"""plot_scenarios.py: figures of one tools/bench/scenarios.sh run, drawn from the files it
leaves in its work directory (the same files scenarios_report.sh reads):

  s<N>.lb.json            clairfs-bench --compute-only, one epoch: the lower bound
  s<N>.direct.json        per epoch (combined over ranks): seconds, stall_s, device_read_bytes
  s<N>.clairfs.json       the same for the clairfs run; "ranks": how many replays ran
  s<N>.clairfs.r<R>.json  rank R's clairfs-bench output; per epoch stats_delta holds the
                          changes of the daemon's stats counters ("served.<tier>",
                          "backing_bytes", "peer_bytes_in")
  s3.skip                 why scenario 3 did not run (then none of its files exist)

Writes PREFIX-epochs.svg (per scenario: epoch time and stall per epoch, lower bound / direct /
clairfs) and PREFIX-tiers.svg (per scenario and epoch: the object reads clairfs served from each
tier, and the bytes read from the emulated PFS: direct, clairfs, clairfs's backing_bytes and
peer bytes). clairfs's stats count object reads per tier, not bytes; the bytes it counts are
those from the backing store and from peers, which is what the second row shows.

Usage: plot_scenarios.py WORKDIR PREFIX [--format svg,png] [--title TEXT]
Exit status: 0 figures written; 2 bad arguments or unreadable results; 3 matplotlib missing.
Runs headless (Agg backend). Output is deterministic for the same input (no dates, fixed ids).
"""
import argparse
import json
import os
import re
import sys
import textwrap

# The order of the tiers in the stacked bars, nearest first; other names go before "backing".
TIER_ORDER = ["ram", "ssd", "staging", "peer", "backing"]
COLORS = {"lower bound": "#555555", "direct": "#d62728", "clairfs": "#1f77b4",
          "ram": "#2ca02c", "ssd": "#1f77b4", "staging": "#ff7f0e", "peer": "#9467bd",
          "backing": "#d62728", "clairfs backing_bytes": "#8c564b",
          "clairfs peer bytes in": "#9467bd"}
MB = 1e6


class ResultError(Exception):
    """A result file is missing or does not have the fields scenarios.sh writes."""


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ResultError(f"{path}: {e}") from e


def _epochs(doc, path, keys):
    """The per-epoch list of DOC; every epoch must carry KEYS."""
    eps = doc.get("epochs") if isinstance(doc, dict) else None
    if not isinstance(eps, list) or not eps:
        raise ResultError(f"{path}: no epochs")
    for i, e in enumerate(eps):
        missing = [k for k in keys if k not in e]
        if missing:
            raise ResultError(f"{path}: epoch {i + 1} lacks {', '.join(missing)}")
    return eps


def load_scenario(work, s):
    """One scenario's numbers: lb seconds, per epoch direct/clairfs seconds, stall and device
    bytes, and per epoch the served counts, backing_bytes and peer_bytes_in summed over ranks."""
    base = os.path.join(work, f"s{s}")
    lb_path, di_path, cl_path = base + ".lb.json", base + ".direct.json", base + ".clairfs.json"
    lb = _epochs(_read_json(lb_path), lb_path, ["seconds"])[0]["seconds"]
    di_doc, cl_doc = _read_json(di_path), _read_json(cl_path)
    di = _epochs(di_doc, di_path, ["seconds", "stall_s"])
    cl = _epochs(cl_doc, cl_path, ["seconds", "stall_s"])
    if len(di) != len(cl):
        raise ResultError(f"s{s}: {len(di)} direct epochs but {len(cl)} clairfs epochs")
    ranks = cl_doc.get("ranks", 1)
    served = [{} for _ in cl]
    backing = [0] * len(cl)
    peer_in = [0] * len(cl)
    for r in range(ranks):
        path = f"{base}.clairfs.r{r}.json"
        for i, e in enumerate(_epochs(_read_json(path), path, ["stats_delta"])[:len(cl)]):
            delta = e["stats_delta"] or {}
            for key, value in delta.items():
                m = re.fullmatch(r"served\.(.+)", key)
                if m:
                    served[i][m.group(1)] = served[i].get(m.group(1), 0) + value
            backing[i] += delta.get("backing_bytes", 0)
            peer_in[i] += delta.get("peer_bytes_in", 0)
    return {
        "scenario": s, "ranks": ranks, "lb": lb,
        "direct_s": [e["seconds"] for e in di], "direct_stall": [e["stall_s"] for e in di],
        "clairfs_s": [e["seconds"] for e in cl], "clairfs_stall": [e["stall_s"] for e in cl],
        "direct_dev": [e.get("device_read_bytes") for e in di],
        "clairfs_dev": [e.get("device_read_bytes") for e in cl],
        "served": served, "backing_bytes": backing, "peer_bytes_in": peer_in,
    }


def load(work):
    """Every scenario that ran, in order 1-4, and {scenario: reason} for the skipped ones."""
    if not os.path.isdir(work):
        raise ResultError(f"{work}: not a directory")
    runs, skipped = [], {}
    for s in (1, 2, 3, 4):
        skip = os.path.join(work, f"s{s}.skip")
        if os.path.exists(skip):
            with open(skip, encoding="utf-8") as f:
                skipped[s] = f.read().strip()
        elif os.path.exists(os.path.join(work, f"s{s}.clairfs.json")):
            runs.append(load_scenario(work, s))
    if not runs:
        raise ResultError(f"{work}: no scenario results (s<N>.clairfs.json)")
    return runs, skipped


def tier_names(runs):
    seen = {t for r in runs for ep in r["served"] for t in ep}
    others = sorted(seen - set(TIER_ORDER))
    order = TIER_ORDER[:-1] + others + TIER_ORDER[-1:]
    return [t for t in order if t in seen]


def _subtitle(r):
    ranks = f", {r['ranks']} ranks" if r["ranks"] > 1 else ""
    return f"scenario {r['scenario']}{ranks}"


def _grouped(ax, epochs, series, gid_prefix, values_on_top=False):
    """Bars per epoch, one per (label, values) in SERIES side by side; None values are left out.
    Every bar gets the SVG id GID_PREFIX-<label>-e<epoch>; VALUES_ON_TOP: its value above it."""
    width = 0.8 / len(series)
    for k, (label, values) in enumerate(series):
        xs = [e + (k - (len(series) - 1) / 2) * width for e in epochs]
        pts = [(x, v) for x, v in zip(xs, values) if v is not None]
        if not pts:
            continue
        bars = ax.bar([p[0] for p in pts], [p[1] for p in pts], width, label=label,
                      color=COLORS.get(label))
        for e, bar in zip([e for e, v in zip(epochs, values) if v is not None], bars):
            bar.set_gid(f"{gid_prefix}-{label.replace(' ', '_')}-e{e}")
        if values_on_top:
            ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=1)


def plot_epochs(plt, runs, skipped, title):
    fig, axes = plt.subplots(2, len(runs), figsize=(_width(runs), 5.6), squeeze=False)
    for c, r in enumerate(runs):
        epochs = list(range(1, len(r["clairfs_s"]) + 1))
        top, bottom = axes[0][c], axes[1][c]
        _grouped(top, epochs, [("direct", r["direct_s"]), ("clairfs", r["clairfs_s"])],
                 f"s{r['scenario']}-time")
        line = top.axhline(r["lb"], color=COLORS["lower bound"], linestyle="--", linewidth=1.2,
                           label="lower bound")
        line.set_gid(f"s{r['scenario']}-time-lower_bound")
        _grouped(bottom, epochs, [("direct", r["direct_stall"]), ("clairfs", r["clairfs_stall"])],
                 f"s{r['scenario']}-stall", values_on_top=True)
        bottom.margins(y=0.12)
        top.set_title(_subtitle(r), fontsize=10)
        for ax in (top, bottom):
            ax.set_xticks(epochs)
            ax.set_xlabel("epoch")
            ax.grid(axis="y", alpha=0.3)
        if c == 0:
            top.set_ylabel("epoch time (s)")
            bottom.set_ylabel("stall per epoch (s)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)
    _title(fig, title, skipped)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def plot_tiers(plt, runs, skipped, title):
    tiers = tier_names(runs)
    fig, axes = plt.subplots(2, len(runs), figsize=(_width(runs), 6.0), squeeze=False)
    for c, r in enumerate(runs):
        epochs = list(range(1, len(r["served"]) + 1))
        top, bottom = axes[0][c], axes[1][c]
        base = [0] * len(epochs)
        for t in tiers:
            counts = [ep.get(t, 0) for ep in r["served"]]
            bars = top.bar(epochs, counts, 0.6, bottom=base, label=t, color=COLORS.get(t))
            for e, bar in zip(epochs, bars):
                bar.set_gid(f"s{r['scenario']}-served-{t}-e{e}")
            base = [b + n for b, n in zip(base, counts)]
        mb = lambda xs: [None if x is None else x / MB for x in xs]  # noqa: E731
        series = [("direct", mb(r["direct_dev"])), ("clairfs", mb(r["clairfs_dev"])),
                  ("clairfs backing_bytes", mb(r["backing_bytes"]))]
        if any(r["peer_bytes_in"]):
            series.append(("clairfs peer bytes in", mb(r["peer_bytes_in"])))
        _grouped(bottom, epochs, series, f"s{r['scenario']}-bytes")
        top.set_title(_subtitle(r), fontsize=10)
        for ax in (top, bottom):
            ax.set_xticks(epochs)
            ax.set_xlabel("epoch")
            ax.grid(axis="y", alpha=0.3)
        if c == 0:
            top.set_ylabel("clairfs object reads served")
            bottom.set_ylabel("MB read per epoch")
    # One legend per row: the tiers (top), the byte counters (bottom; the union over scenarios).
    top_h, top_l = axes[0][0].get_legend_handles_labels()
    bottom = {}
    for ax in axes[1]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            bottom.setdefault(lab, h)
    wide = len(runs) > 1  # one column: the byte legend takes two lines
    fig.legend(top_h, [f"served: {t}" for t in top_l], loc="lower center", ncol=len(top_l),
               fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.04 if wide else 0.07))
    fig.legend(list(bottom.values()),
               [lab if lab.startswith("clairfs ") else f"PFS device: {lab}" for lab in bottom],
               loc="lower center", ncol=len(bottom) if wide else 2, fontsize=8, frameon=False)
    _title(fig, title, skipped)
    fig.tight_layout(rect=(0, 0.1 if wide else 0.13, 1, 1))
    return fig


def _width(runs):
    """Figure width in inches: a column per scenario, wide enough for the legends."""
    return max(6.0, 3.4 * len(runs) + 0.6)


def _title(fig, title, skipped):
    """Puts TITLE and the skipped scenarios' reasons at the top, wrapped to the figure's width
    (tight_layout then keeps the axes below them)."""
    width = max(30, int(fig.get_figwidth() * 12))
    lines = textwrap.wrap(title, width)
    for s, why in sorted(skipped.items()):
        lines += textwrap.wrap(f"scenario {s} {why}", width)
    fig.suptitle("\n".join(lines), x=0.01, ha="left", fontsize=10)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work", help="scenarios.sh's work directory (s<N>.*.json)")
    ap.add_argument("prefix", help="output path prefix: PREFIX-epochs.svg, PREFIX-tiers.svg")
    ap.add_argument("--format", default="svg",
                    help="comma-separated image formats: svg, png [svg]")
    ap.add_argument("--title", default="scenarios.sh", help="first line of every figure")
    args = ap.parse_args(argv)
    formats = [f for f in args.format.split(",") if f]
    if not formats or any(f not in ("svg", "png") for f in formats):
        ap.error(f"--format: svg and/or png, not {args.format!r}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot_scenarios: matplotlib is not importable ({e}); "
              "install Debian's python3-matplotlib", file=sys.stderr)
        return 3
    # Text stays text (small files, searchable labels); no date or random ids in the output.
    # One font name per label, not matplotlib's list of fallbacks: it is most of the SVG's size.
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "clairfs",
                                "font.size": 9, "font.family": "sans-serif",
                                "font.sans-serif": ["DejaVu Sans"]})
    try:
        runs, skipped = load(args.work)
    except ResultError as e:
        print(f"plot_scenarios: {e}", file=sys.stderr)
        return 2
    out_dir = os.path.dirname(args.prefix)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    for name, draw in (("epochs", plot_epochs), ("tiers", plot_tiers)):
        fig = draw(plt, runs, skipped, args.title)
        for fmt in formats:
            path = f"{args.prefix}-{name}.{fmt}"
            meta = {"Date": None} if fmt == "svg" else {"Software": None}
            fig.savefig(path, format=fmt, dpi=110, metadata=meta)
            print(path)
        plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
