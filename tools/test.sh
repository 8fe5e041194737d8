#!/usr/bin/env bash
# Runs every test: unit, real-mount, Python, MPI and fault-matrix tests on the release build;
# unit, real-mount and Python tests again with everything (the daemon too) built with
# AddressSanitizer and UndefinedBehaviorSanitizer; unit and real-mount tests once more built
# with ThreadSanitizer. Expects tools/setup.sh --with-tests to have run (without PyTorch the
# torch tests skip). Ends with the time each stage took and one line "tests: N passed, N
# failed, N skipped".
#
# The sanitizer builds are configured and built in the background while the release tests run
# (most of a real-mount test's time is waiting on mounts, daemons and deadlines: the release
# file-system tests keep 2 cores about a quarter busy); their tests then run one suite set after
# the other. Test suites of different builds do not overlap: run at once on 2 cores, they miss
# their deadlines (a mount within 10 s, a page drop within 100 ms) now and then.
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
TIMES=$(mktemp -d)  # one file per stage: "seconds<TAB>stage", printed in order at the end
LOGS=$(mktemp -d)   # the background runs' output
trap 'rm -rf "$TIMES" "$LOGS"' EXIT
# stage N NAME CMD...: runs CMD, records its wall time under NAME as the N-th stage; returns 1
# if it failed.
stage() {
  local n=$1 name=$2 start=$SECONDS rc=0
  shift 2
  "$@" || rc=1
  printf '%s\t%s\n' "$((SECONDS - start))" "$name" >"$TIMES/$n"
  return "$rc"
}

# A sanitizer build in its own directory, configured once. $1 directory, $2 -Db_sanitize value.
# -O1 with line tables only (-g1), assertions on: what the sanitizers need for their reports,
# and half the compile time of -O2 -g (cache/prefetch/prefetcher.cc under ASan: 22 s against 51 s).
# Warnings are errors in the release build above (the project's default); here they are shown
# but not fatal: GCC's range analysis under instrumentation warns on code the release build
# compiles clean, and a test run must not hinge on that.
# Then builds it (the log in $1/ninja.log, its end shown on failure), so that the stage times
# tell building from testing.
# The debug prefix map names the build directory "." in the debug information, so that ccache
# (used by meson when installed) does not hash the directory: a clone elsewhere hits the cache.
# shellcheck disable=SC2317  # called through stage
sanitizer_build() {
  if [ ! -f "$1/build.ninja" ]; then
    meson setup "$1" -Doptimization=1 -Ddebug=true -Db_ndebug=false \
      -Dcpp_args="-g1 -fdebug-prefix-map=$(pwd)/$1=." \
      -Db_sanitize="$2" -Db_lundef=false -Dwerror=false >/dev/null || return 1
  fi
  ninja -C "$1" >"$1/ninja.log" 2>&1 || { tail -40 "$1/ninja.log"; return 1; }
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
start=$SECONDS
# Both sanitizer builds, one after the other, in the background (their output in a log shown
# after the release tests).
# shellcheck disable=SC2317  # called in the background below
builds() {
  local rc=0
  stage 2 "asan+ubsan: configure and build (beside the release tests)" \
    sanitizer_build build-asan address,undefined || rc=1
  stage 4 "tsan: configure and build (beside the release tests)" \
    sanitizer_build build-tsan thread || rc=1
  return "$rc"
}
builds >"$LOGS/builds" 2>&1 &
builds_pid=$!
stage 1 "release: build and tests" meson test -C build --print-errorlogs --num-processes 2 || status=1
wait "$builds_pid" || status=1
echo "==== the sanitizer builds (run in the background) ===="
cat "$LOGS/builds"
# The real-mount, Python and unit suites: the benchmark and lint suites check nothing more with
# an instrumented daemon (the benchmark programs are not even built there: tools/bench/meson.build).
stage 3 "asan+ubsan: tests" meson test -C build-asan --print-errorlogs --num-processes 2 \
  --suite unit --suite fs --suite python || status=1
# TSAN_OPTIONS (the suppressions of tests/tsan.supp) is set per test by tests/meson.build.
stage 5 "tsan: tests" meson test -C build-tsan --print-errorlogs --num-processes 2 \
  --suite unit --suite fs || status=1

/usr/bin/python3 - build/meson-logs/testlog.json build-asan/meson-logs/testlog.json \
  build-tsan/meson-logs/testlog.json <<'PY'
# Counts test cases, not executables: gtest's per-case lines and the summary line of the fs
# python and slurm runners (the last one: the fs runner prints its two processes' first) ("fs: N passed, N failed, N skipped"), the fault matrix's rows ("faults: N
# passed, N failed, N expected to fail": an expected failure counts as skipped).
import json, re, sys
passed = failed = skipped = 0
failures = []  # "build/test: case" for each failed case, printed above the count
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        failed += 1
        continue
    for line in lines:
        t = json.loads(line)
        out = t.get("stdout", "") + t.get("stderr", "")
        # The last such line: the fs runner prints each of its processes' counts, then the sum.
        summary = ([None] + list(re.finditer(
            r"^(?:fs|mpi|python|faults|slurm): (\d+) passed, (\d+) failed, (\d+) "
            r"(?:skipped|expected to fail)$", out, re.M)))[-1]
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
        if f:
            where = f"{path.split('/')[0]}/{t['name']}"
            cases = re.findall(r"^(?:FAIL|ERROR): (.+)$", out, re.M)
            cases += re.findall(r"^\[  FAILED  \] (\S+) \(", out, re.M)
            cases += re.findall(r"^(\S+: FAIL \(.*)$", out, re.M)  # fault matrix rows
            failures += [f"{where}: {c}" for c in cases] or [f"{where}: {t['result']}"]
        passed, failed, skipped = passed + p, failed + f, skipped + s
for line in failures:
    print(f"failed: {line}")
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
PY
echo "stage times (wall seconds; the sanitizer builds overlap the release tests):"
for f in "$TIMES"/*; do printf '  %s\n' "$(cat "$f")"; done
echo "  $((SECONDS - start))	all stages (wall)"
exit $status
