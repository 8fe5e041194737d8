"""`clairfs-ctl status MNT [--watch [S]] [--json]`: a mount's plan progress, per-tier hit
rates, readiness, stall and backing traffic, on one screen (or as JSON); in a cluster, under
the node's own view, a "Cluster" table of every node (stats key `cluster`: each node's host,
state and report age, RAM and SSD used of capacity, backing bytes, peer bytes in and out),
the same on whichever node it runs.

Everything shown comes from the mount's `.clairfs/stats` and `.clairfs/plan`
(docs/control-interface.md). The hit rates and the readiness are the daemon's own numbers
(stats keys `hit_rates`, `hit_rate`, `readiness`), so this view, `wait`, the metrics and the
JSON agree. A caller who is neither the mount's owner nor in control.group gets the counts
view (docs/permissions.md): the screen shows that much and says so.
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any, TextIO

from .. import control


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def bar(fraction: float, width: int = 24) -> str:
    """`fraction` (clamped to [0, 1]) as a bar of `width` cells and a percentage."""
    fraction = min(max(fraction, 0.0), 1.0)
    full = int(round(fraction * width))
    return "[" + "#" * full + "." * (width - full) + f"] {fraction * 100:5.1f}%"


def readiness(stats: dict[str, Any]) -> dict[str, float]:
    """The daemon's readiness (stats key `readiness`): `tiers`, `window` and `ready` in [0, 1]
    (docs/control-interface.md). The window takes a next object only when all of it fits, so
    it seldom holds its room to the byte: `wait` defaults to 0.95."""
    r = stats.get("readiness", {})
    return {k: float(r.get(k, 0.0)) for k in ("tiers", "window", "ready")}


def hit_rates(stats: dict[str, Any]) -> dict[str, float]:
    """The daemon's share of object reads served by each source since the mount (stats key
    `hit_rates`: a tier's name, staging, peer, backing); empty when nothing was read yet."""
    return {k: float(v) for k, v in stats.get("hit_rates", {}).items() if v is not None}


HIDDEN_NOTE = "details hidden: not the mount's owner or control.group (counts only)"


def counts_only(stats: dict[str, Any], plan: dict[str, Any]) -> bool:
    """True when the daemon gave this caller the counts view of `stats` or `plan` (key `view`:
    no paths, stream names, per-stream details or byte sizes; docs/permissions.md)."""
    return stats.get("view") == "counts" or plan.get("view") == "counts"


def render_status(mount: str, stats: dict[str, Any], plan: dict[str, Any]) -> str:
    """The human view of `status`: one screen, plain text. Shows only what the control files
    gave this caller: with the counts view, no stream names and no byte sizes (every field may
    be missing). Prints nothing read from anywhere else (no log or cache paths)."""
    lines = [f"clairfs at {mount}"]
    hidden = counts_only(stats, plan)
    if hidden:
        lines.append(HIDDEN_NOTE)
    streams = plan.get("streams", [])
    if not plan.get("entries"):
        lines.append("plan: none registered (write .clairfs/manifest, or clairfs-ctl register)")
    else:
        size = f", {_mib(plan['bytes'])}" if "bytes" in plan else ""
        predicted = (f", predicted backing {_mib(plan['predicted_backing_bytes'])}"
                     if "predicted_backing_bytes" in plan else "")
        lines.append(f"plan: {plan.get('files', 0)} files{size}, {plan.get('positions', 0)} "
                     f"reads in {len(streams)} stream(s){predicted}")
    for s in stats.get("prefetch", {}).get("streams", []):
        if "name" not in s:
            continue  # the counts view: no per-stream details
        positions = s.get("positions", 0)
        done = s.get("position", 0) / positions if positions else 0.0
        lines.append(f"  stream {s.get('name')}: epoch {min(s.get('epoch', 0) + 1, s.get('epochs', 0))}"
                     f"/{s.get('epochs', 0)} {bar(done)}  idle {s.get('idle_seconds', 0):.0f} s")
    ready = readiness(stats)
    lines.append(f"ready: tiers {bar(ready['tiers'])}  window {bar(ready['window'])}")
    rates = hit_rates(stats)
    for t in stats.get("tiers", []):
        cap = t.get("capacity", 0)
        rate = rates.get(t.get("name", ""))
        hit = f" ({rate * 100:.1f}% of reads)" if rate is not None else ""
        held = f"{_mib(t['bytes'])} of {_mib(cap)}" if "bytes" in t else f"capacity {_mib(cap)}"
        lines.append(f"  tier {t.get('name')}: {held}, "
                     f"{t.get('served', 0)} served{hit}, state {t.get('state', 'on')}")
    if rates:
        lines.append("served: " + ", ".join(f"{k} {v * 100:.1f}%" for k, v in sorted(rates.items()))
                     + f"  (hit rate {(stats.get('hit_rate') or 0.0) * 100:.1f}%)")
    else:
        lines.append("served: nothing read yet")
    backing = f"{stats.get('backing_reads', 0)} reads"
    if "backing_bytes" in stats:
        backing += f", {_mib(stats['backing_bytes'])}"
    lines.append(f"stall: {stats.get('stall_seconds', 0.0):.2f} s   backing: {backing}")
    cluster = plan.get("cluster")
    if cluster:
        lines.append(_cluster_line(cluster))
    refused = {k: v for k, v in stats.get("peer_refused", {}).items() if v}
    if refused:  # messages an outsider, another cluster or a replay sent (docs/permissions.md)
        lines.append("peer messages refused: "
                     + ", ".join(f"{k} {v}" for k, v in sorted(refused.items())))
    for w in stats.get("warnings", []):
        lines.append(f"WARNING ({w.get('kind')}): {w.get('message', '')}")
    errs = {k: v for k, v in stats.get("errors", {}).items() if v}
    lines.append("errors: " + (", ".join(f"{k} {v}" for k, v in sorted(errs.items())) or "none"))
    if stats.get("cluster"):
        lines.extend(render_cluster(stats["cluster"]))
    return "\n".join(lines) + "\n"


def _used_of(node: dict[str, Any], kind: str) -> str:
    """`used/capacity` of a node's tiers of one kind, in MiB; "-" when it has none."""
    cap = node.get(f"{kind}_capacity", 0)
    if not cap:
        return "-"
    return f"{node.get(f'{kind}_bytes', 0) / (1 << 20):.1f}/{cap / (1 << 20):.1f} MiB"


def _age(node: dict[str, Any]) -> str:
    """A node's state with its report's age: "self", "alive 1.2s", "stale 31s", "down"..."""
    state, age = node.get("state", "?"), node.get("age_seconds")
    if state == "self" or age is None:
        return state
    return f"{state} {age:.1f}s"


def render_cluster(cluster: dict[str, Any]) -> list[str]:
    """The "Cluster" table (stats key `cluster`, docs/control-interface.md): one row per node,
    this one marked `*`, then the totals. A node that never reported shows its state alone."""
    totals = cluster.get("totals", {})
    dataset = totals.get("dataset_bytes")
    head = (f"Cluster: {totals.get('nodes', 0)} nodes, {totals.get('alive', 0)} alive; "
            f"backing {_mib(totals.get('backing_bytes', 0))} in total"
            + (f" (dataset {_mib(dataset)})" if dataset else "")
            + f"; reports every {cluster.get('report_period_seconds', 0):g} s")
    cols = ("node", "host", "state/age", "RAM used/cap", "SSD used/cap", "backing", "peer in",
            "peer out")
    rows = []
    for n in cluster.get("nodes", []):
        mark = "*" if n.get("state") == "self" else ""
        if n.get("host") is None:
            rows.append((f"{n.get('rank')}{mark}", "-", _age(n), "-", "-", "-", "-", "-"))
            continue
        rows.append((f"{n.get('rank')}{mark}", n.get("host") or "?", _age(n), _used_of(n, "ram"),
                     _used_of(n, "ssd"), _mib(n.get("backing_bytes", 0)),
                     _mib(n.get("peer_bytes_in", 0)), _mib(n.get("peer_bytes_out", 0))))
    rows.append(("all", "", f"{totals.get('alive', 0)}/{totals.get('nodes', 0)} alive",
                 _used_of(totals, "ram"), _used_of(totals, "ssd"),
                 _mib(totals.get("backing_bytes", 0)), _mib(totals.get("peer_bytes_in", 0)),
                 _mib(totals.get("peer_bytes_out", 0))))
    widths = [max(len(str(r[i])) for r in [cols, *rows]) for i in range(len(cols))]
    lines = [head]
    for r in [cols, *rows]:
        lines.append("  " + "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())
    return lines


def _cluster_line(cluster: dict[str, Any]) -> str:
    """Rank, placement state and the ranks with no plan (`cluster` of `.clairfs/plan`)."""
    line = (f"cluster: rank {cluster.get('rank')} of {cluster.get('ranks')}, "
            f"{cluster.get('state')}")
    missing = cluster.get("unregistered", [])
    if missing:
        who = ", ".join(str(r) for r in missing)
        line += f"; no plan from rank{'s' if len(missing) > 1 else ''} {who}"
        if cluster.get("state") == "waiting for plans":
            line += (f" (waited {cluster.get('waiting_seconds', 0):.0f} s of "
                     f"{cluster.get('plan_timeout', 0):.0f})")
        else:
            line += " (placed without them)"
    return line


def add_parser(sub: Any) -> None:
    """Adds the status subcommand to clairfs-ctl's subparsers."""
    s = sub.add_parser("status", help="plan progress, hit rates, readiness, stall, backing traffic; "
                                      "in a cluster, every node's tiers, backing and peer bytes")
    s.add_argument("mount")
    s.add_argument("--watch", nargs="?", const=2.0, type=float, metavar="SECONDS",
                   help="refresh every SECONDS (default 2) until interrupted")
    s.add_argument("--count", type=int, default=0, help="with --watch: stop after N refreshes")
    s.add_argument("--json", action="store_true",
                   help="the numbers behind the view, as JSON (readiness, hit_rates; in a "
                        "cluster, cluster: every node and the totals)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Shows the view once, or with --watch every SECONDS (in place on a terminal, one view
    after another otherwise) until interrupted or --count views; 0."""
    shown = 0
    while True:
        stats, plan = control.stats(args.mount), control.plan(args.mount)
        if args.json:
            numbers = {"readiness": readiness(stats), "hit_rates": hit_rates(stats)}
            if stats.get("cluster"):  # every node of the cluster (stats key `cluster`)
                numbers["cluster"] = stats["cluster"]
            view = json.dumps(numbers, sort_keys=True) + "\n"
        else:
            view = render_status(args.mount, stats, plan)
        if args.watch is not None and out.isatty():
            out.write("\x1b[H\x1b[J")  # redraw in place
        out.write(view if shown == 0 or out.isatty() else "\n" + view)
        out.flush()
        shown += 1
        if args.watch is None or (args.count and shown >= args.count):
            return 0
        time.sleep(max(args.watch, 0.1))
