#!/usr/bin/env python3
"""The benchmark scripts' one option parser (tools/bench/lib.sh, parse_options) and the Python
scripts' shared options (tools/bench/bench_lib.py), without running a benchmark: values and
flags land in their variables, "--" leaves the rest, --help prints the header, an unknown
option or a missing value fails; every script's --help still works. Runs in about a second."""
import argparse
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "tools", "bench")
sys.path.insert(0, BENCH)
import bench_lib  # noqa: E402

failures = []

SCRIPT = """#!/usr/bin/env bash
# demo.sh: the header --help prints.
set -euo pipefail
NAME=demo
source "$LIB"
A=1 B=x OUT="" C=0
declare -A OPTIONS=([--a]=A [--b]=B [--c]=C=1 [--out]=OUT [--]=ARGS)
parse_options "$@"
set -- "${ARGS[@]}"
echo "A=$A|B=$B|C=$C|OUT=$OUT|$#|$*"
"""


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(path, *args):
    return subprocess.run(["bash", path, *args], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, LIB=os.path.join(BENCH, "lib.sh")), cwd="/")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        demo = os.path.join(tmp, "demo.sh")
        with open(demo, "w") as f:
            f.write(SCRIPT)
        p = run(demo)
        check(p.stdout.strip() == "A=1|B=x|C=0|OUT=|0|", f"defaults: {p.stdout!r} {p.stderr!r}")
        p = run(demo, "--a", "two words", "--c", "--out", "rel/x", "--", "ls", "-l")
        check(p.stdout.strip() == "A=two words|B=x|C=1|OUT=/rel/x|2|ls -l",
              f"values, flag, --out made absolute, rest: {p.stdout!r} {p.stderr!r}")
        p = run(demo, "--b", "")
        check(p.returncode == 0 and p.stdout.strip() == "A=1|B=|C=0|OUT=|0|", f"empty value: {p.stdout!r}")
        p = run(demo, "--help")
        check(p.returncode == 0 and p.stdout == "demo.sh: the header --help prints.\n",
              f"--help: {p.stdout!r}")
        p = run(demo, "--bogus")
        check(p.returncode == 1 and "unknown argument: --bogus" in p.stderr, f"unknown: {p.stderr!r}")
        p = run(demo, "--a")
        check(p.returncode == 1 and "--a needs a value" in p.stderr, f"missing value: {p.stderr!r}")
    for script in sorted(os.listdir(BENCH)):
        # Not benchmarks: the libraries the others source, and the launcher hydra runs.
        if script.endswith(".sh") and script not in ("lib.sh", "pfs_lib.sh", "netns_lib.sh",
                                                     "netns_launch.sh", "scenarios_report.sh"):
            p = run(os.path.join(BENCH, script), "--help")
            check(p.returncode == 0 and f"\n{script}:" in "\n" + p.stdout[:300],
                  f"{script} --help: {p.returncode} {p.stdout[:80]!r} {p.stderr[-200:]!r}")
            p = run(os.path.join(BENCH, script), "--no-such-option")
            check(p.returncode == 1 and "unknown argument: --no-such-option" in p.stderr,
                  f"{script} --no-such-option: {p.returncode} {p.stderr[-200:]!r}")
    ap = argparse.ArgumentParser()
    bench_lib.add_dataset_options(ap, files=7, mean_kb=110, seed=1)
    bench_lib.add_loader_options(ap)
    bench_lib.add_tmp_option(ap)
    a = ap.parse_args(["--files", "9", "--compute-ms", "2.5"])
    check((a.files, a.mean_kb, a.seed, a.epochs, a.workers, a.prefetch_factor, a.batch_size,
           a.compute_ms, a.tmp) == (9, 110, 1, 3, 4, 2, 16, 2.5, "/var/tmp"), f"bench_lib: {a}")
    check(not hasattr(a, "sigma"), "an option not asked for is not added")
    calls = []
    check(bench_lib.wait_for(lambda: calls.append(1) or len(calls) >= 3, 5, "three calls",
                             interval=0.001) is None and len(calls) == 3, "wait_for polls")
    try:
        bench_lib.wait_for(lambda: False, 0.01, "nothing", interval=0.001)
        check(False, "wait_for times out")
    except SystemExit as e:
        check("waiting for nothing" in str(e), f"wait_for's message: {e}")
    print("bench options:", "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
