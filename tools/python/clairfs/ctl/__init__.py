"""clairfs-ctl (also `python3 -m clairfs`): register, watch and wait on a clairfs mount.

    clairfs-ctl register MNT FILE|-      write a manifest (text or compact); exit 1 with the reason
                                         when clairfs rejects it
    clairfs-ctl status MNT [--watch [S]] plan progress, per-tier hit rates, readiness of the next
                                         window, stall, backing traffic
    clairfs-ctl wait MNT [--ready F]     until the tiers and the window are F filled (0.95)
    clairfs-ctl wait MNT --mounted       until MNT is a clairfs mount that answers (in a
                                         cluster: its peer tier on); for batch scripts
    clairfs-ctl plan MNT | errors MNT    the control files as they are
    clairfs-ctl plan --predict MNT --compute-rate R (--backing-bw B | --probe N --backing DIR)
                                         per epoch: predicted time, stall, bytes per source;
                                         the tier capacity that removes the stall (ctl/predict.py)
    clairfs-ctl serve-metrics MNT... --port P | --textfile PATH
                                         export to Prometheus (ctl/metrics.py; needs
                                         python3-prometheus-client)
    clairfs-ctl cache list|verify|clean  the SSD caches on this machine: owner, dataset, size,
                                         last use, in use; every object's hash; removal
                                         (ctl/cache.py; docs/usage.md "Clean up")

Exit status: 0 done, 1 rejected / timed out / not a clairfs mount, 2 bad usage (`cache verify`:
also 66 not a cache, 74 unreadable, 75 in use). Standard library only, serve-metrics aside.
The numbers come from `.clairfs/stats` and `.clairfs/plan` (docs/control-interface.md); hit
rates and readiness are the daemon's (stats keys `hit_rates`, `hit_rate`, `readiness`), so the
tool, the metrics and the JSON always agree. A user who is not the mount's owner or in
control.group gets their counts view (no paths, stream names or sizes: docs/permissions.md),
and `status` shows that much and says so.
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import time
from typing import Any, BinaryIO, Sequence, TextIO

from .. import control
from .._version import __version__
from . import cache, metrics, predict

_CHUNK = 1 << 20


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _bar(fraction: float, width: int = 24) -> str:
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
                     f"/{s.get('epochs', 0)} {_bar(done)}  idle {s.get('idle_seconds', 0):.0f} s")
    ready = readiness(stats)
    lines.append(f"ready: tiers {_bar(ready['tiers'])}  window {_bar(ready['window'])}")
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
    return "\n".join(lines) + "\n"


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


def _register(mount: str, source: BinaryIO, append: bool, err: TextIO) -> int:
    """Streams source into the control file; 0 when clairfs accepted it, 1 with its reason."""
    path = control.control_path(mount, "manifest")
    fd = os.open(path, os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
    try:
        while True:
            chunk = source.read(_CHUNK)
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
    except OSError as e:
        try:
            os.close(fd)  # the daemon keeps the active plan: nothing is installed
        except OSError:
            pass  # a text refused at a write fails its close() too: the write's error is it
        return _rejected(mount, e, err)
    try:
        os.close(fd)
    except OSError as e:
        return _rejected(mount, e, err)
    return 0


def _rejected(mount: str, e: OSError, err: TextIO) -> int:
    if e.errno != errno.EINVAL:
        print(f"clairfs-ctl: writing the manifest of {mount}: {e.strerror}", file=err)
        return 1
    report = control.errors(mount).strip() or "(no reason given)"
    print(f"clairfs-ctl: {mount} rejected the manifest; the active plan is unchanged:\n{report}",
          file=err)
    return 1


def _wait(mount: str, want: float, timeout: float, interval: float, out: TextIO) -> int:
    deadline = time.monotonic() + timeout
    tty = out.isatty()
    while True:
        stats, plan = control.stats(mount), control.plan(mount)
        r = readiness(stats)
        if tty:
            out.write(f"\rready {_bar(r['ready'])}")
            out.flush()
        if plan.get("entries") and r["ready"] >= want:
            out.write(("\n" if tty else "") + f"ready: tiers {r['tiers'] * 100:.1f}%, "
                      f"window {r['window'] * 100:.1f}%\n")
            return 0
        if time.monotonic() >= deadline:
            why = "no plan registered" if not plan.get("entries") else \
                f"{r['ready'] * 100:.1f}% ready of {want * 100:.1f}%"
            out.write(("\n" if tty else ""))
            print(f"clairfs-ctl: timed out after {timeout:g} s: {why}", file=sys.stderr)
            return 1
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def _clairfs_mount(mount: str) -> bool:
    """True if mount is the mount point of a clairfs mount (/proc/self/mounts; octal escapes
    as the kernel writes spaces, tabs, newlines and backslashes in paths)."""
    want = os.path.realpath(mount)
    try:
        with open("/proc/self/mounts", "rb") as f:
            lines = f.read().decode("utf-8", "surrogateescape").splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split(" ")
        if len(fields) < 3 or fields[2] != "fuse.clairfs":
            continue
        point = fields[1]
        for code in ("\\040", "\\011", "\\012", "\\134"):  # the backslash last
            point = point.replace(code, chr(int(code[-3:], 8)))
        if point == want:
            return True
    return False


def _wait_mounted(mount: str, timeout: float, interval: float, out: TextIO) -> int:
    """Until mount is a clairfs mount whose control files answer (a cluster's daemon mounts
    once the ranks joined); exit 1 at the deadline saying what was missing."""
    deadline = time.monotonic() + timeout
    while True:
        mounted = _clairfs_mount(mount)
        if mounted:
            try:
                cluster = control.plan(mount).get("cluster")
            except (OSError, ValueError):
                cluster = None  # mounted, control files not answering yet
            else:
                rank = f" (rank {cluster.get('rank')} of {cluster.get('ranks')})" if cluster else ""
                out.write(f"mounted: {mount}{rank}\n")
                return 0
        if time.monotonic() >= deadline:
            why = "its control files do not answer" if mounted else "not a clairfs mount"
            print(f"clairfs-ctl: timed out after {timeout:g} s: {mount}: {why}", file=sys.stderr)
            return 1
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="clairfs-ctl", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"clairfs-ctl {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("register", help="register a manifest (FILE, or - for standard input)")
    r.add_argument("mount")
    r.add_argument("file")
    r.add_argument("--append", action="store_true", help="append epochs to the stream's plan")
    s = sub.add_parser("status", help="plan progress, hit rates, readiness, stall, backing traffic")
    s.add_argument("mount")
    s.add_argument("--watch", nargs="?", const=2.0, type=float, metavar="SECONDS",
                   help="refresh every SECONDS (default 2) until interrupted")
    s.add_argument("--count", type=int, default=0, help="with --watch: stop after N refreshes")
    s.add_argument("--json", action="store_true", help="the numbers behind the view, as JSON")
    w = sub.add_parser("wait", help="wait until the tiers and the staging window are filled")
    w.add_argument("mount")
    w.add_argument("--ready", type=float, default=0.95, metavar="F",
                   help="fraction to wait for, 0 < F <= 1 (default 0.95: the window seldom "
                        "packs its last bytes)")
    w.add_argument("--timeout", type=float, default=3600.0, metavar="SECONDS",
                   help="give up after this long, exit 1 (default 3600)")
    w.add_argument("--mounted", action="store_true",
                   help="wait only until MNT is a clairfs mount that answers (its daemon, in "
                        "a cluster every rank's, started)")
    pl = sub.add_parser("plan", help="the active plan (JSON), or with --predict its epochs' "
                        "predicted times, stalls and bytes per source")
    pl.add_argument("mount")
    predict.add_arguments(pl)
    sub.add_parser("errors", help="the last rejection").add_argument("mount")
    metrics.add_parser(sub)
    cache.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out, err = sys.stdout, sys.stderr
    try:
        if args.command == "cache":
            return cache.run(args, out, err)
        if args.command == "register":
            if args.file == "-":
                return _register(args.mount, sys.stdin.buffer, args.append, err)
            with open(args.file, "rb") as f:
                return _register(args.mount, f, args.append, err)
        if args.command == "plan" and args.predict:
            return predict.run(args, out, err)
        if args.command == "plan":
            out.write(json.dumps(control.plan(args.mount), indent=2, sort_keys=True) + "\n")
            return 0
        if args.command == "errors":
            out.write(control.errors(args.mount))
            return 0
        if args.command == "serve-metrics":
            return metrics.main(args)
        if args.command == "wait":
            if not 0 < args.ready <= 1 or args.timeout < 0:
                print("clairfs-ctl: --ready must be in (0, 1] and --timeout >= 0", file=err)
                return 2
            if args.mounted:
                return _wait_mounted(args.mount, args.timeout, 0.1, out)
            return _wait(args.mount, args.ready, args.timeout, 0.5, out)
        # status
        shown = 0
        while True:
            stats, plan = control.stats(args.mount), control.plan(args.mount)
            if args.json:
                view = json.dumps({"readiness": readiness(stats),
                                   "hit_rates": hit_rates(stats)}, sort_keys=True) + "\n"
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
    except FileNotFoundError as e:
        print(f"clairfs-ctl: {e.strerror}: {e.filename}", file=err)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `clairfs-ctl status ... | head`: the reader is gone
        sys.stdout = None  # type: ignore[assignment]  # nothing more to flush at exit
        return 0


if __name__ == "__main__":
    sys.exit(main())
