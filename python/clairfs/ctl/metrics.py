"""Prometheus export of clairfs mounts: `clairfs-ctl serve-metrics` (docs/usage.md, "Watch").

Each mount's `.clairfs/metrics` is already in the Prometheus text format (the daemon renders
it, docs/control-interface.md); this module only gathers one or several mounts for a scraper:

    serve-metrics MNT... --port P [--addr A]    an HTTP endpoint (/metrics), read on every scrape
    serve-metrics MNT... --textfile PATH        node_exporter's textfile collector: PATH rewritten
                         [--interval S] [--once]   atomically every S seconds (or once)

With several mounts every sample carries a `mount` label. `clairfs_up{mount=...}` is 1 for a
mount whose metrics were read at that scrape and 0 for one that is gone or unreadable (logged
when it changes), so a stopped daemon never stops the export.

Needs prometheus_client (Debian: python3-prometheus-client), imported only here, so that the
rest of the package stays standard library only.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from .. import control

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

log = logging.getLogger("clairfs.metrics")

UP = "clairfs_up"


def read_text(mount: str) -> str:
    """The mount's `.clairfs/metrics` as it is now (OSError when it cannot be read)."""
    with open(control.control_path(mount, "metrics"), "rb") as f:
        return f.read().decode("utf-8", errors="replace")


class MountCollector:
    """A prometheus_client collector over clairfs mounts: every collect() reads each mount's
    metrics afresh and yields the families merged over the mounts (one family per name, the
    samples of every mount in it), plus `clairfs_up`. Thread-safe (scrapes may overlap)."""

    def __init__(self, mounts: Sequence[str]) -> None:
        self.mounts = [os.path.abspath(m) for m in mounts]
        self.label = len(self.mounts) > 1
        self._lock = threading.Lock()  # guards _up
        self._up: dict[str, bool] = {}

    def describe(self) -> list[Any]:
        return []  # nothing fixed: families are whatever the daemons export at a scrape

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import GaugeMetricFamily, Metric
        from prometheus_client.parser import text_string_to_metric_families
        from prometheus_client.samples import Sample

        merged: dict[str, Metric] = {}
        up = GaugeMetricFamily(UP, "1 if the mount's .clairfs/metrics was read at this scrape, "
                                   "0 if the mount is gone or unreadable.", labels=["mount"])
        for mount in self.mounts:
            try:
                families = list(text_string_to_metric_families(read_text(mount)))
            except (OSError, ValueError) as e:
                self._note(mount, False, e)
                up.add_metric([mount], 0)
                continue
            self._note(mount, True, None)
            up.add_metric([mount], 1)
            for fam in families:
                into = merged.get(fam.name)
                if into is None:
                    into = merged[fam.name] = Metric(fam.name, fam.documentation, fam.type,
                                                     fam.unit)
                for s in fam.samples:
                    labels = dict(s.labels, mount=mount) if self.label else s.labels
                    into.samples.append(Sample(s.name, labels, s.value, s.timestamp, s.exemplar))
        yield up
        yield from merged.values()

    def _note(self, mount: str, ok: bool, error: Exception | None) -> None:
        with self._lock:
            was = self._up.get(mount)
            self._up[mount] = ok
        if ok and was is False:
            log.warning("%s: metrics readable again", mount)
        elif not ok and was is not False:
            log.warning("%s: metrics not readable: %s", mount, error)


def registry_for(mounts: Sequence[str]) -> CollectorRegistry:
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(MountCollector(mounts))  # type: ignore[arg-type]  # a duck-typed Collector
    return registry


def make_server(registry: CollectorRegistry, addr: str, port: int) -> ThreadingHTTPServer:
    """An HTTP server answering every path with the registry's text; port 0 picks a free one
    (the bound address is server.server_address). Not started."""
    from prometheus_client.exposition import MetricsHandler

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        daemon_threads = True

    return Server((addr, port), MetricsHandler.factory(registry))


def write_textfile(path: str, text: str) -> None:
    """Replaces path with text atomically: a temp file in the same directory, renamed over it,
    so a reader sees the old or the new file whole. The temp name does not end in .prom, so the
    textfile collector never reads it."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def add_parser(sub: Any) -> None:
    """Adds the serve-metrics subcommand to clairfs-ctl's subparsers."""
    m = sub.add_parser("serve-metrics",
                       help="export mounts' metrics to Prometheus (HTTP or a textfile)")
    m.add_argument("mounts", nargs="+", metavar="MNT")
    m.add_argument("--port", type=int, help="serve http://ADDR:PORT/metrics (0: a free port)")
    m.add_argument("--addr", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    m.add_argument("--textfile", metavar="PATH",
                   help="write PATH (name it *.prom) for node_exporter's textfile collector")
    m.add_argument("--interval", type=float, default=15.0, metavar="SECONDS",
                   help="with --textfile: rewrite every SECONDS (default 15)")
    m.add_argument("--once", action="store_true", help="with --textfile: write once and exit")


def main(args: argparse.Namespace) -> int:
    """Runs serve-metrics until interrupted (SIGINT or SIGTERM): 0, 1 (cannot serve or write),
    2 (bad usage)."""
    if (args.port is None) == (args.textfile is None):
        print("clairfs-ctl: serve-metrics needs exactly one of --port and --textfile",
              file=sys.stderr)
        return 2
    if args.port is not None and not 0 <= args.port <= 65535 or args.interval <= 0:
        print("clairfs-ctl: --port must be in 0..65535 and --interval > 0", file=sys.stderr)
        return 2
    try:
        from prometheus_client.exposition import generate_latest
    except ImportError:
        print("clairfs-ctl: serve-metrics needs prometheus_client "
              "(Debian: apt-get install python3-prometheus-client)", file=sys.stderr)
        return 1
    logging.basicConfig(format="clairfs-ctl: %(message)s", level=logging.INFO)
    registry = registry_for(args.mounts)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        if args.textfile is not None:
            while True:
                write_textfile(args.textfile, generate_latest(registry).decode())
                if args.once or stop.wait(args.interval):
                    return 0
        try:
            server = make_server(registry, args.addr, args.port)
        except OSError as e:
            print(f"clairfs-ctl: cannot listen on {args.addr}:{args.port}: {e.strerror}",
                  file=sys.stderr)
            return 1
        with server:
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            shown = f"[{args.addr}]" if ":" in args.addr else args.addr
            print(f"clairfs-ctl: serving {len(args.mounts)} mount(s) at "
                  f"http://{shown}:{server.server_address[1]}/metrics", flush=True)
            while not stop.wait(1.0):
                pass
            server.shutdown()
        return 0
    except OSError as e:
        print(f"clairfs-ctl: {args.textfile}: {e.strerror}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
