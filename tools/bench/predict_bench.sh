#!/usr/bin/env bash
# predict_bench.sh: predicted against measured epoch times (docs/benchmarks.md, "Predicted epochs").
# Runs HDMLP's four scenarios (scenarios.sh --quick, three epochs) and the records benchmark
# (records_bench.sh --quick, clairfs runs only), keeping each clairfs run's plan as read right after
# registration and its measured epochs (--keep), then predicts every epoch from the plan with the
# model of `clairfs-ctl plan --predict` (predict_report.py: the lower bound's compute rate, the
# emulated PFS's throttle as the backing store's bandwidth and IOPS, a cold start, the SSD tier at
# what a cold read of its directory's device in pieces of its objects gives, --probe-tier, and the
# page cache as holding what it held of the SSD tier's files at the end of the run) and prints the
# table of measured and predicted times and stalls, and the capacity the model says removes the
# stall.
#
# Usage: tools/bench/predict_bench.sh [--scenarios 1,2,3,4] [--chunks "4MiB 256KiB"]
#          [--bps B] [--iops N] [--no-records] [--no-scenarios] [--records-args "..."]
#          [--tmp DIR] [--keep DIR] [--out FILE]
# Defaults: every scenario, both chunk sizes, 25 MB/s and 400 IOPS (the benches' own defaults),
# tmp /var/tmp (where both benches put their SSD tiers, and where the tier probe writes).
# --records-args: more options for records_bench.sh (e.g. "--ram 243").
# --keep DIR keeps the runs' outputs (default: a temporary directory, removed); --out FILE
# writes the tables to FILE too. About 3-4 minutes on 2 cores. Root only (as the two benches).
# Env: CLAIRFS_BIN, BENCH_BIN, PYTHON, as for the two benches.
set -euo pipefail

SCEN=1,2,3,4 CHUNKS="4MiB 256KiB" BPS=25000000 IOPS=400 RECORDS=1 SCENARIOS=1 KEEP="" OUT=""
TMPBASE=/var/tmp RECORDS_ARGS=""
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
COMMAND="tools/bench/predict_bench.sh $*"

NAME=predict_bench
# shellcheck source=tools/bench/lib.sh
source "$HERE/lib.sh"
declare -A OPTIONS=([--scenarios]=SCEN [--chunks]=CHUNKS [--bps]=BPS [--iops]=IOPS
  [--no-records]=RECORDS=0 [--no-scenarios]=SCENARIOS=0 [--keep]=KEEP [--out]=OUT
  [--tmp]=TMPBASE [--records-args]=RECORDS_ARGS)
parse_options "$@"
((EUID == 0)) || die "run as root (the benches need loop devices, mounts, cgroups)"
if [[ -n $KEEP ]]; then
  DIR=$(realpath -m "$KEEP")
  mkdir -p "$DIR"
else
  WORK=$(mktemp -d "$TMPBASE/clairfs-predict.XXXXXX")  # removed on exit (lib.sh)
  DIR=$WORK
fi
DATE_START=$(date -u '+%Y-%m-%d %H:%M UTC')
args=(--bps "$BPS" --iops "$IOPS" --tmp "$TMPBASE")
if ((SCENARIOS)); then
  log "scenarios $SCEN (--quick, 3 epochs)"
  run "$HERE/scenarios.sh" --quick --epochs 3 --scenarios "$SCEN" "${args[@]}" \
    --keep "$DIR/scenarios" --out "$DIR/scenarios.md" >&2
fi
if ((RECORDS)); then
  log "records (--quick, clairfs runs with chunks $CHUNKS)"
  read -r -a more <<<"$RECORDS_ARGS"
  run "$HERE/records_bench.sh" --quick --no-direct --chunks "$CHUNKS" "${args[@]}" "${more[@]}" \
    --keep "$DIR/records" --out "$DIR/records.md" >&2
fi
report=()
((SCENARIOS)) && report+=(--scenarios "$DIR/scenarios")
((RECORDS)) && report+=(--records "$DIR/records")
{
  echo "Command: \`$COMMAND\` ($DATE_START; took $((SECONDS / 60)) min $((SECONDS % 60)) s)."
  echo
  "$PYTHON" "$HERE/predict_report.py" "${report[@]}" --bps "$BPS" --iops "$IOPS" \
    --probe-tier "ssd=$TMPBASE" --json "$DIR/predict.json"
} >"$DIR/predict.md"
cat "$DIR/predict.md"
if [[ -n $OUT ]]; then cp "$DIR/predict.md" "$OUT"; log "report written to $OUT"; fi
