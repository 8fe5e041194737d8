#!/usr/bin/env python3
"""The clairfs fault matrix: one injected fault per row, on real mounts, under readers that
check every byte (docs/reliability.md).

Usage: CLAIRFS_BIN=build/daemon/clairfs FAULTFS_BIN=build/tests/faultfs \
           python3 tests/fault/fault_matrix.py [--quick] [--only ROW[,ROW]] [--out DIR]

Each row mounts clairfs over a small generated dataset (for the backend faults, over a
faultfs mount of it: tests/fault/faultfs.cc), registers a plan, keeps reader processes reading
and comparing every byte with the original, injects its fault, and reports:
  hung     reads that got no answer within the hang deadline (goal 0)
  wrong    reads that returned bytes other than the file's current (or, during a change, its
           previous) version, and reads the caller's permissions forbid (goal 0)
  alive    the daemon still serves after the fault (where it should)
  logged   the daemon's warning/error lines
  goals    row-specific: no errors on files the fault does not touch, reads right again
           once the fault is removed, the daemon stops within STOP_GRACE s of SIGTERM.
Parts: fault_lib.py (readers, workspace, teardown), fault_rows.py (the rows), fault_reader.py
(the reader processes), faultfs.cc (the backend faults).
Writes DIR/fault-matrix.md and DIR/fault-matrix.json. Exit status 1 when a row misses a goal
and is not listed in EXPECTED_FAIL, 77 when FUSE is unusable, else 0.
"""
import argparse
import atexit
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fs"))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from fault_lib import (FAULTFS, REPO, Ctx, Row, leftover_mounts,  # noqa: E402
                       umount_all_tmpfs)
from fault_rows import EXT4_ROWS, ROWS  # noqa: E402
from run_fs_tests import skip_reason  # noqa: E402

# Rows that miss a goal for a known reason not fixed yet, each with that reason. A listed row
# that fails is reported "xfail" and does not fail the run; a listed row that passes is
# reported "XPASS": remove its entry once the fix is merged.
EXPECTED_FAIL: dict[str, str] = {}

PARAMS = {
    "quick": dict(files=96, lo=8 << 10, hi=24 << 10, run=1.5, hang=10.0, kills=3, readers=2),
    "full": dict(files=800, lo=16 << 10, hi=96 << 10, run=5.0, hang=30.0, kills=10, readers=3),
}


# ------------------------------------------------------------------------------- the runner

def run_row(name, fn, injects, params):
    row = Row(name, injects)
    holder = {}

    def on_timeout():   # kills every process the row started: blocked calls return ENOTCONN
        row.notes.append(f"row watchdog fired after {params['row_timeout']} s")
        row.goals["finished in time"] = False
        harness.kill_all_daemons()
    watchdog = threading.Timer(params["row_timeout"], on_timeout)
    watchdog.daemon = True
    watchdog.start()
    t0 = time.monotonic()
    try:
        holder["ctx"] = Ctx(params, row, on_ext4=name in EXT4_ROWS)
        fn(holder["ctx"])
    except Exception as e:  # noqa: BLE001 - a row that breaks is a failed row, not a crash
        row.goals["ran"] = False
        row.notes.append(f"{type(e).__name__}: {e}"[:500])
    finally:
        ctx = holder.get("ctx")
        if ctx is not None:
            try:
                ctx.close()
            except Exception as e:  # noqa: BLE001
                row.notes.append(f"teardown: {type(e).__name__}: {e}"[:300])
            for d in {ctx.work, ctx.data_root}:
                harness.remove_tmpdir(d)
        watchdog.cancel()
    row.seconds = round(time.monotonic() - t0, 1)
    reason = EXPECTED_FAIL.get(name)
    if row.passed():
        row.status = "XPASS" if reason else "pass"
    else:
        row.status = "xfail" if reason else "FAIL"
    row.expected_fail = reason
    return row


def cell(text, limit=140):
    text = str(text).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def errors_cell(row):
    return ", ".join(f"{k} {v}" for k, v in sorted(row.errors.items())) or "-"


def markdown(rows, mode):
    out = [f"Fault matrix ({mode}): {sum(r.status == 'pass' for r in rows)} pass, "
           f"{sum(r.status == 'xfail' for r in rows)} xfail, "
           f"{sum(r.status == 'XPASS' for r in rows)} XPASS, "
           f"{sum(r.status == 'FAIL' for r in rows)} FAIL", "",
           "| row | hung | wrong | alive | read errors | goals missed | logged | result |",
           "| --- | ---: | ---: | --- | --- | --- | --- | --- |"]
    for r in rows:
        missed = [g for g, ok in r.goals.items() if not ok]
        if r.hung:
            missed.insert(0, "no hang")
        if r.wrong:
            missed.insert(0, "no wrong bytes")
        alive = "-" if r.alive is None else ("yes" if r.alive else "**no**")
        logged = "; ".join(re.sub(r"^\[[^]]*\]\s*", "", l, count=1)
                           for l in r.logged[:2]) or "nothing"
        result = r.status if not r.expected_fail else f"{r.status} ({r.expected_fail})"
        out.append(f"| {r.name} | {r.hung} | {r.wrong} | {alive} | {cell(errors_cell(r))} | "
                   f"{cell(', '.join(missed) or '-')} | {cell(logged)} | {cell(result, 200)} |")
    out += ["", "Rows:", ""]
    for r in rows:
        out.append(f"- **{r.name}** ({r.seconds} s): {r.injects}.")
        for n in r.notes:
            out.append(f"  - {cell(n, 300)}")
        for w in r.wrong_examples:
            out.append(f"  - wrong: {cell(w, 200)}")
    return "\n".join(out) + "\n"


def cleanup_everything():
    harness.kill_all_daemons()
    umount_all_tmpfs()
    harness.cleanup_all()


def on_signal(signum, frame):
    cleanup_everything()
    os._exit(128 + signum)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small dataset, short runs (CI)")
    ap.add_argument("--only", default="", help="comma-separated row names")
    ap.add_argument("--out", default=".", help="directory for fault-matrix.{md,json}")
    ap.add_argument("--list", action="store_true", help="print the rows and exit")
    args = ap.parse_args()
    if args.list:
        for name, _, injects in ROWS:
            print(f"{name}: {injects}")
        return 0
    mode = "quick" if args.quick else "full"
    params = dict(PARAMS[mode], row_timeout=120 if args.quick else 400)
    rows = ROWS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {n for n, _, _ in ROWS}
        if unknown:
            print(f"unknown row(s): {', '.join(sorted(unknown))} (see --list)", file=sys.stderr)
            return 2
        rows = [r for r in ROWS if r[0] in wanted]
    reason = skip_reason()
    if reason:
        print(f"SKIP: {reason}")
        return 77
    for binary in (harness.BIN, FAULTFS):
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            print(f"FAIL: not an executable: {binary} (set CLAIRFS_BIN and FAULTFS_BIN)")
            return 1
    if os.geteuid() != 0:
        print("SKIP: the fault matrix mounts tmpfs and acts as another user: run it as root")
        return 77
    harness.BIN = os.path.abspath(harness.BIN)
    atexit.register(cleanup_everything)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    os.makedirs(args.out, exist_ok=True)
    results = []
    for name, fn, injects in rows:
        print(f"{name}: {injects} ...", flush=True)
        row = run_row(name, fn, injects, params)
        notes = f"; {'; '.join(row.notes)}" if row.status == "FAIL" and row.notes else ""
        print(f"{name}: {row.status} (hung {row.hung}, wrong {row.wrong}, alive {row.alive}, "
              f"goals {row.goals}) {row.seconds} s{notes}", flush=True)
        results.append(row)
    md = markdown(results, mode)
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with open(os.path.join(args.out, "fault-matrix.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "fault-matrix.json"), "w") as f:
        json.dump({"mode": mode, "commit": commit, "params": params,
                   "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "rows": [r.to_json() for r in results]}, f, indent=1)
    print("\n" + md)
    leftover = leftover_mounts()
    if leftover:
        print(f"FAIL: mounts left behind: {leftover}")
        return 1
    failed = [r.name for r in results if r.status == "FAIL"]
    xpass = [r.name for r in results if r.status == "XPASS"]
    if xpass:
        print(f"XPASS: {', '.join(xpass)} now meet every goal: remove them from EXPECTED_FAIL")
    print(f"faults: {sum(r.status in ('pass', 'XPASS') for r in results)} passed, "
          f"{len(failed)} failed, {sum(r.status == 'xfail' for r in results)} expected to fail")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
