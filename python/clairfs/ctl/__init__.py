"""clairfs-ctl (also `python3 -m clairfs`): register, watch and wait on a clairfs mount.

    clairfs-ctl register MNT FILE|-      write a manifest (text or compact); exit 1 with the reason
                                         when clairfs rejects it
    clairfs-ctl status MNT [--watch [S]] plan progress, per-tier hit rates, readiness of the next
                                         window, stall, backing traffic; in a cluster, on any
                                         node, every node's tiers, backing and peer bytes
    clairfs-ctl wait MNT [--ready F]     until the tiers and the window are F filled (0.95)
    clairfs-ctl wait MNT --mounted       until MNT is a clairfs mount that answers (in a
                                         cluster: its peer tier on); for batch scripts
    clairfs-ctl plan MNT | errors MNT    the control files as they are
    clairfs-ctl plan --predict MNT --compute-rate R (--backing-bw B | --probe N --backing DIR)
                                         per epoch: predicted time, stall, bytes per source;
                                         the tier capacity that removes the stall
    clairfs-ctl serve-metrics MNT... --port P | --textfile PATH
                                         export to Prometheus (needs python3-prometheus-client)
    clairfs-ctl cache list|verify|clean  the SSD caches on this machine: owner, dataset, size,
                                         last use, in use; every object's hash; removal
                                         (docs/usage.md "Clean up")

Exit status: 0 done, 1 rejected / timed out / not a clairfs mount, 2 bad usage (`cache verify`:
also 66 not a cache, 74 unreadable, 75 in use). Standard library only, serve-metrics aside.
The numbers come from `.clairfs/stats` and `.clairfs/plan` (docs/control-interface.md); hit
rates and readiness are the daemon's (stats keys `hit_rates`, `hit_rate`, `readiness`), so the
tool, the metrics and the JSON always agree. A user who is not the mount's owner or in
control.group gets their counts view (no paths, stream names or sizes: docs/permissions.md),
and `status` shows that much and says so.

One module of this package per subcommand: register, status, wait, predict (`plan --predict`),
metrics (`serve-metrics`), cache; each adds its arguments to the parser and runs the command.
Here: the parser, `plan` and `errors` (the control files as they are), and main(), which maps
a missing mount or file to exit 1, an interrupt to 130 and a closed output pipe to 0.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .. import control
from .._version import __version__
from . import cache, metrics, predict, register, status, wait


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="clairfs-ctl", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"clairfs-ctl {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    register.add_parser(sub)
    status.add_parser(sub)
    wait.add_parser(sub)
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
            return register.run(args, err)
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
            return wait.run(args, out, err)
        return status.run(args, out)
    except FileNotFoundError as e:
        print(f"clairfs-ctl: {e.strerror}: {e.filename}", file=err)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `clairfs-ctl status ... | head`: the reader is gone
        sys.stdout = None  # type: ignore[assignment]  # nothing more to flush at exit
        return 0
