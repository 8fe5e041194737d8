#!/usr/bin/env bash
# Runs every test: unit tests, real-mount tests and Python tests on the release build, then the
# unit tests again built with AddressSanitizer and UndefinedBehaviorSanitizer.
# Expects tools/setup.sh to have run. Ends with one line "tests: N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
meson test -C build --print-errorlogs --num-processes 2 || status=1

if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan --buildtype=debugoptimized -Db_sanitize=address,undefined \
    -Db_lundef=false -Dfs_tests=false >/dev/null || status=1
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
meson test -C build-asan --suite unit --print-errorlogs --num-processes 2 || status=1

/usr/bin/python3 - build/meson-logs/testlog.json build-asan/meson-logs/testlog.json <<'PY'
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0}
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        r = json.loads(line).get("result", "FAIL")
        counts["OK" if r == "OK" else "SKIP" if r == "SKIP" else "FAIL"] += 1
print(f"tests: {counts['OK']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
PY
exit $status
