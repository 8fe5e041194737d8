"""`clairfs-ctl wait MNT [--ready F] [--timeout S]`: until the mount's tiers and staging
window are F filled (the daemon's readiness); `wait MNT --mounted`: until MNT is a clairfs
mount whose control files answer (a cluster's daemon mounts once its ranks joined).

For batch scripts: exit 0 when it happened, 1 at the timeout saying what was missing, 2 for
bad options.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, TextIO

from .. import control
from .status import bar, readiness


def _wait(mount: str, want: float, timeout: float, interval: float, out: TextIO) -> int:
    deadline = time.monotonic() + timeout
    tty = out.isatty()
    while True:
        stats, plan = control.stats(mount), control.plan(mount)
        r = readiness(stats)
        if tty:
            out.write(f"\rready {bar(r['ready'])}")
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


def add_parser(sub: Any) -> None:
    """Adds the wait subcommand to clairfs-ctl's subparsers."""
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


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Waits as the options say; 0, 1 (timed out) or 2 (bad options)."""
    if not 0 < args.ready <= 1 or args.timeout < 0:
        print("clairfs-ctl: --ready must be in (0, 1] and --timeout >= 0", file=err)
        return 2
    if args.mounted:
        return _wait_mounted(args.mount, args.timeout, 0.1, out)
    return _wait(args.mount, args.ready, args.timeout, 0.5, out)
