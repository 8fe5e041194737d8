#!/usr/bin/python3
"""Test of tools/bench/plot_scenarios.py (argv[1]): it is fed a small scenarios.sh work
directory written here in the files and fields scenarios.sh leaves (s<N>.lb.json, combined
s<N>.direct.json / s<N>.clairfs.json, per-rank clairfs-bench outputs s<N>.clairfs.r<R>.json
with stats_delta, s3.skip), and the figures must exist, parse as SVG (XML) or PNG, carry the
axis titles, legend entries and one element per bar, with per-rank counters summed, and be the
same bytes when drawn again. Bad input exits 2, a missing matplotlib 3. scenarios_report.sh's
plot_figures draws them too, or says it skipped them. Exit 77 (skip) when matplotlib is not
importable. Everything is written under one temporary directory, removed at the end."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

PLOT = sys.argv[1]
SVG_NS = "{http://www.w3.org/2000/svg}"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def write(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        if isinstance(doc, str):
            f.write(doc)
        else:
            json.dump(doc, f)


def bench_epoch(e, seconds, stall, dev, delta=None):
    """One epoch of clairfs-bench --json in replay mode (the keys it writes)."""
    ep = {"epoch": e, "files": 400, "bytes": 44_000_000, "errors": 0, "seconds": seconds,
          "files_per_s": 400 / seconds, "mb_per_s": 44 / seconds, "p50_us": 90, "p99_us": 900,
          "stall_s": stall, "compute_s": 0.6, "device_read_bytes": dev, "device_read_ios": 700}
    if delta is not None:
        ep["stats_delta"] = delta
    return ep


def combined(epochs, ranks, backing):
    """scenarios.sh's combine(): per epoch the slowest rank, summed bytes, rank 0's device."""
    return {"ranks": ranks, "first_error": None, "epochs": [
        {"epoch": i, "seconds": e["seconds"], "stall_s": e["stall_s"], "files": e["files"] * ranks,
         "bytes": e["bytes"] * ranks, "errors": 0, "p99_us": e["p99_us"],
         "device_read_bytes": e["device_read_bytes"], "backing_bytes": b}
        for i, (e, b) in enumerate(zip(epochs, backing))]}


def delta(served, backing, peer_in=0):
    d = {"backing_bytes": backing, "backing_reads": served.get("backing", 0),
         "peer_bytes_in": peer_in, "stall_ns": 1000, "tiers.ram.bytes": 5_000_000}
    d.update({f"served.{t}": n for t, n in served.items()})
    return d


# Per scenario and rank, per epoch: the served counts (what the daemon's stats counted).
SERVED = {
    1: [[{"backing": 120, "ram": 280}, {"ram": 400}]],
    3: [[{"backing": 150, "ram": 40, "staging": 10, "peer": 0}, {"ram": 180, "peer": 20, "staging": 0}],
        [{"backing": 100, "ram": 90, "staging": 10, "peer": 0}, {"ram": 150, "peer": 50, "staging": 0}]],
    4: [[{"backing": 300, "ram": 60, "ssd": 40, "staging": 0}, {"ram": 120, "ssd": 160, "staging": 120}]],
}
PEER_IN = {3: [[0, 2_000_000], [0, 5_500_000]]}


def make_work(work, scenarios, skip3=False):
    for s in scenarios:
        base = os.path.join(work, f"s{s}")
        ranks = len(SERVED[s])
        write(base + ".lb.json", {"mode": "compute-only", "epochs": [
            {"epoch": 0, "files": 400, "bytes": 44_000_000, "errors": 0, "seconds": 0.61,
             "files_per_s": 655.7, "mb_per_s": 72.1, "p50_us": 0, "p99_us": 0, "stall_s": 0.0,
             "compute_s": 0.6}]})
        direct = [bench_epoch(e, 1.9 - 0.1 * e, 1.3 - 0.1 * e, 45_000_000) for e in range(2)]
        write(base + ".direct.json", combined(direct, ranks, [None, None]))
        rank_epochs = []
        for r in range(ranks):
            eps = []
            for e in range(2):
                served = SERVED[s][r][e]
                backing = served.get("backing", 0) * 110_000
                peer_in = PEER_IN.get(s, [[0, 0]] * ranks)[r][e]
                eps.append(bench_epoch(e, [1.8, 0.62][e], [1.2, 0.004][e],
                                       [46_000_000, 0][e], delta(served, backing, peer_in)))
            stats = {"backing_bytes": 0, "served": {}}
            write(f"{base}.clairfs.r{r}.json", {"mode": "replay", "workers": 4, "prefetch_factor": 2,
                                                "batch_size": 16, "stats_before": stats,
                                                "stats_after": stats, "epochs": eps})
            rank_epochs.append(eps)
        backing = [sum(eps[e]["stats_delta"]["backing_bytes"] for eps in rank_epochs) for e in range(2)]
        write(base + ".clairfs.json", combined(rank_epochs[0], ranks, backing))
        write(base + ".clairfs.stats", {"served": {}, "backing_bytes": sum(backing), "stall_ns": 0,
                                        "errors": {}})
        write(base + ".direct.dev", "90000000\n")
        write(base + ".clairfs.dev", "46500000\n")
    if skip3:
        write(os.path.join(work, "s3.skip"), "skipped: mpiexec is not on PATH\n")


def run(*args, env=None):
    return subprocess.run([sys.executable, PLOT, *args], capture_output=True, text=True,
                          timeout=120, env=env)


def svg(path):
    """The parsed SVG: its texts (svg.fonttype none keeps labels as <text>) and element ids."""
    root = ET.parse(path).getroot()
    check(root.tag == SVG_NS + "svg", f"{path}: root element {root.tag}")
    texts = {"".join(t.itertext()).strip() for t in root.iter(SVG_NS + "text")}
    ids = {el.get("id") for el in root.iter() if el.get("id")}
    return texts, ids


def test_figures(tmp):
    work, out = os.path.join(tmp, "work"), os.path.join(tmp, "out", "run")
    os.makedirs(work)
    make_work(work, [1, 3, 4])
    p = run(work, out, "--format", "svg,png", "--title", "test run")
    check(p.returncode == 0, f"plot exit {p.returncode}: {p.stderr}")
    names = [f"{out}-{n}.{f}" for n in ("epochs", "tiers") for f in ("svg", "png")]
    check(p.stdout.split() == names, f"printed paths: {p.stdout!r}")
    for n in names:
        check(os.path.getsize(n) > 1000, f"{n}: written")
        if n.endswith(".png"):
            with open(n, "rb") as f:
                check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{n}: PNG signature")
        else:
            check(os.path.getsize(n) < 150_000, f"{n}: small ({os.path.getsize(n)} bytes)")

    texts, ids = svg(f"{out}-epochs.svg")
    for t in ("epoch time (s)", "stall per epoch (s)", "lower bound", "direct", "clairfs",
              "scenario 1", "scenario 3, 2 ranks", "scenario 4", "test run", "epoch"):
        check(t in texts, f"epochs.svg: text {t!r} in {sorted(texts)}")
    for s in (1, 3, 4):
        check(f"s{s}-time-lower_bound" in ids, f"epochs.svg: s{s} lower-bound line")
        for e in (1, 2):
            for what in ("time", "stall"):
                for series in ("direct", "clairfs"):
                    check(f"s{s}-{what}-{series}-e{e}" in ids, f"epochs.svg: bar s{s}-{what}-{series}-e{e}")
    check("s2-time-direct-e1" not in ids and "s1-time-direct-e3" not in ids,
          "epochs.svg: no bars for a scenario or epoch that did not run")

    texts, ids = svg(f"{out}-tiers.svg")
    for t in ("clairfs object reads served", "MB read per epoch", "served: ram", "served: ssd",
              "served: staging", "served: peer", "served: backing", "PFS device: direct",
              "PFS device: clairfs", "clairfs backing_bytes", "clairfs peer bytes in"):
        check(t in texts, f"tiers.svg: text {t!r} in {sorted(texts)}")
    for s in (1, 3, 4):
        for e in (1, 2):
            check(f"s{s}-served-ram-e{e}" in ids and f"s{s}-bytes-clairfs_backing_bytes-e{e}" in ids,
                  f"tiers.svg: s{s} epoch {e} bars")
    check("s4-served-ssd-e2" in ids and "s3-served-peer-e2" in ids, "tiers.svg: ssd and peer bars")
    check("s1-bytes-clairfs_peer_bytes_in-e1" not in ids and "s3-bytes-clairfs_peer_bytes_in-e2" in ids,
          "tiers.svg: peer bytes only where a scenario had peer traffic")

    again = os.path.join(tmp, "again", "run")
    p = run(work, again, "--format", "svg", "--title", "test run")
    for n in ("epochs", "tiers"):
        with open(f"{out}-{n}.svg", "rb") as f1, open(f"{again}-{n}.svg", "rb") as f2:
            check(f1.read() == f2.read(), f"{n}.svg: the same input draws the same bytes")

    # The numbers behind the bars: per-rank counters summed, combined epochs as written.
    spec = importlib.util.spec_from_file_location("plot_scenarios", PLOT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    runs, skipped = mod.load(work)
    check([r["scenario"] for r in runs] == [1, 3, 4] and skipped == {}, "load: scenarios 1, 3, 4")
    s3 = runs[1]
    check(s3["ranks"] == 2 and s3["served"][1] == {"ram": 330, "peer": 70, "staging": 0},
          f"load: s3 epoch 2 served summed over ranks: {s3['served'][1]}")
    check(s3["backing_bytes"] == [250 * 110_000, 0] and s3["peer_bytes_in"] == [0, 7_500_000],
          f"load: s3 backing and peer bytes: {s3['backing_bytes']} {s3['peer_bytes_in']}")
    check(runs[0]["lb"] == 0.61 and runs[0]["clairfs_stall"] == [1.2, 0.004]
          and runs[0]["direct_dev"] == [45_000_000] * 2, "load: s1 lower bound, stall, device bytes")
    check(mod.tier_names(runs) == ["ram", "ssd", "staging", "peer", "backing"], "tier order")


def test_skip_note(tmp):
    work, out = os.path.join(tmp, "work-skip"), os.path.join(tmp, "skip")
    os.makedirs(work)
    make_work(work, [1], skip3=True)
    p = run(work, out)
    check(p.returncode == 0, f"skip: exit {p.returncode}: {p.stderr}")
    check(not os.path.exists(out + "-epochs.png"), "skip: svg only by default")
    texts, ids = svg(out + "-epochs.svg")
    check(any("scenario 3 skipped: mpiexec is not on PATH" in t for t in texts),
          f"skip: the reason is on the figure: {sorted(texts)}")
    check(not any(i.startswith("s3-") for i in ids), "skip: no scenario 3 bars")


def test_errors(tmp):
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    p = run(empty, os.path.join(tmp, "e"))
    check(p.returncode == 2 and "no scenario results" in p.stderr, f"empty dir: {p.returncode} {p.stderr}")
    bad = os.path.join(tmp, "bad")
    os.makedirs(bad)
    make_work(bad, [1])
    doc = json.load(open(os.path.join(bad, "s1.clairfs.json"), encoding="utf-8"))
    del doc["epochs"][1]["stall_s"]
    write(os.path.join(bad, "s1.clairfs.json"), doc)
    p = run(bad, os.path.join(tmp, "b"))
    check(p.returncode == 2 and "s1.clairfs.json: epoch 2 lacks stall_s" in p.stderr,
          f"missing field: {p.returncode} {p.stderr}")
    p = run(bad, os.path.join(tmp, "b"), "--format", "pdf")
    check(p.returncode == 2 and "--format" in p.stderr, f"bad format: {p.returncode} {p.stderr}")
    # A python3 without matplotlib: a package of that name that fails to import.
    fake = os.path.join(tmp, "fake", "matplotlib")
    os.makedirs(fake)
    write(os.path.join(fake, "__init__.py"), "raise ImportError('not here')\n")
    p = run(bad, os.path.join(tmp, "m"), env={**os.environ, "PYTHONPATH": os.path.dirname(fake)})
    check(p.returncode == 3 and "python3-matplotlib" in p.stderr, f"no matplotlib: {p.returncode} {p.stderr}")
    left = sorted(n for n in os.listdir(tmp) if n[:2] in ("e-", "b-", "m-"))
    check(left == [], f"failed runs write no figures: {left}")


def test_report_hook(tmp):
    """scenarios_report.sh's plot_figures (what scenarios.sh calls at the end): figures from
    WORK with the run's command as title; without matplotlib a message, exit 0, no figures."""
    work = os.path.join(tmp, "work-hook")
    os.makedirs(work)
    make_work(work, [1])
    report_sh = os.path.join(os.path.dirname(os.path.abspath(PLOT)), "scenarios_report.sh")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(PLOT))))
    script = 'log() { echo "LOG: $*"; }; source "$1"; plot_figures "$2"'
    env = {**os.environ, "WORK": work, "PYTHON": sys.executable, "REPO": repo,
           "PLOT_FORMAT": "svg", "COMMAND": "tools/bench/scenarios.sh --quick",
           "DATE_START": "2026-01-02 03:04 UTC"}
    prefix = os.path.join(tmp, "hook", "scen")
    p = subprocess.run(["bash", "-c", script, "bash", report_sh, prefix], capture_output=True,
                       text=True, timeout=120, env=env)
    check(p.returncode == 0 and "LOG: figures written: " + prefix + "-epochs.svg" in p.stdout,
          f"hook: {p.returncode} {p.stdout} {p.stderr}")
    texts, _ = svg(prefix + "-tiers.svg")
    check("tools/bench/scenarios.sh --quick (2026-01-02 03:04 UTC)" in texts,
          f"hook: the command is the title: {sorted(texts)}")
    fake = os.path.join(tmp, "fake-hook", "matplotlib")
    os.makedirs(fake)
    write(os.path.join(fake, "__init__.py"), "raise ImportError('not here')\n")
    prefix = os.path.join(tmp, "hook-none", "scen")
    p = subprocess.run(["bash", "-c", script, "bash", report_sh, prefix], capture_output=True,
                       text=True, timeout=120, env={**env, "PYTHONPATH": os.path.dirname(fake)})
    check(p.returncode == 0 and "LOG: figures: skipped" in p.stdout and "python3-matplotlib" in p.stdout,
          f"hook without matplotlib: {p.returncode} {p.stdout} {p.stderr}")
    check(not os.path.exists(os.path.dirname(prefix)), "hook without matplotlib: no figures")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        # matplotlib's font cache and config go to the temporary directory, not to $HOME.
        os.environ["MPLCONFIGDIR"] = os.path.join(tmp, "mplconfig")
        try:
            importlib.import_module("matplotlib")
        except ImportError:
            print("plots: skipped: matplotlib is not importable (Debian: python3-matplotlib)")
            return 77
        test_figures(tmp)
        test_skip_note(tmp)
        test_errors(tmp)
        test_report_hook(tmp)
    print("plots: " + ("FAILED: %d" % len(failures) if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
