#!/usr/bin/env bash
# Runs every test: unit, real-mount and Python tests on the release build, then all again with
# everything (the daemon too) built with AddressSanitizer and UndefinedBehaviorSanitizer.
# Expects tools/setup.sh --with-tests to have run (without PyTorch the torch tests skip).
# Ends with one line "tests: N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
meson test -C build --print-errorlogs --num-processes 2 || status=1

if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan --buildtype=debugoptimized -Db_sanitize=address,undefined \
    -Db_lundef=false >/dev/null || status=1
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
meson test -C build-asan --print-errorlogs --num-processes 2 || status=1

/usr/bin/python3 - build/meson-logs/testlog.json build-asan/meson-logs/testlog.json <<'PY'
# Counts test cases, not executables: gtest's per-case lines and the summary line of the fs
# and python runners ("fs: N passed, N failed, N skipped").
import json, re, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        failed += 1
        continue
    for line in lines:
        t = json.loads(line)
        out = t.get("stdout", "") + t.get("stderr", "")
        summary = re.search(r"^(?:fs|mpi|python): (\d+) passed, (\d+) failed, (\d+) skipped$", out, re.M)
        ok = len(re.findall(r"^\[       OK \] ", out, re.M))
        bad = len(re.findall(r"^\[  FAILED  \] \S+ \(", out, re.M))
        if summary:
            p, f, s = map(int, summary.groups())
        elif ok or bad:
            p, f, s = ok, bad, len(re.findall(r"^\[  SKIPPED \] \S+ \(", out, re.M))
        else:
            p, f, s = (1, 0, 0) if t["result"] == "OK" else (0, 0, 1) if t["result"] == "SKIP" else (0, 1, 0)
        if t["result"] not in ("OK", "SKIP") and f == 0:
            f = 1  # crashed or timed out before reporting
        passed, failed, skipped = passed + p, failed + f, skipped + s
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
