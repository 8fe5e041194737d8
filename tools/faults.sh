#!/usr/bin/env bash
# Runs the clairfs fault matrix (docs/reliability.md) against the release build: each row
# injects one fault on a real mount under byte-checking readers and reports hung reads, wrong
# bytes, whether the daemon lives, and what it logged. Run as root (tmpfs mounts, setpriv).
#
#   tools/faults.sh                 the full matrix (about 10 minutes)
#   tools/faults.sh --quick         the small one CI runs (meson test --suite fault)
#   tools/faults.sh --only ROW,ROW  some rows; --list names them
#
# Writes fault-matrix.md and fault-matrix.json to --out DIR (default build/fault-matrix).
# Exit status 1 when a row not listed as an expected failure misses a goal.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || meson setup build --buildtype=release >/dev/null
ninja -C build daemon/clairfs tests/faultfs >/dev/null
out=build/fault-matrix
for arg in "$@"; do [ "$arg" = "--out" ] && out=""; done
export CLAIRFS_BIN="$PWD/build/daemon/clairfs" FAULTFS_BIN="$PWD/build/tests/faultfs"
exec /usr/bin/python3 tests/fault/fault_matrix.py ${out:+--out "$out"} "$@"
