#!/usr/bin/env bash
# autotune_bench.sh: the staging tuner (cache/prefetch/autotune.h) against a grid of static
# settings, on an emulated parallel file system (pfs_lib.sh) at several speeds.
#
# The dataset (make_dataset.py: lognormal sizes, mean --mean-kb) lies on a throttled loop-mounted
# ext4 image. clairfs runs with no tier (every object is staged, so the staging window alone
# carries the epoch), inside the PFS's blkio group and a memory group of --mem MiB (the memory
# budget then gives `auto` a window of at most 256 MiB, as the grid's largest). For each PFS
# setting, the epoch reads the first entries of a shuffled one-epoch manifest: as many as the
# setting's bandwidth reads in about --epoch-seconds (all --files when unthrottled), so that no
# epoch is over before the tuner had a few rounds, and the slow one takes no minutes. Each
# configuration (the tuned default: cache.staging.threads and .capacity `auto`;
# then every static pair of --threads x --capacities) is run --repeats times, interleaved (one
# round of every configuration, then the next round), each run from a cold cache (the image is
# remounted, the daemon started afresh): the manifest of one epoch is registered and
# clairfs-bench replays it (--workers loader workers, batches of 16, no compute: the store is
# the bottleneck). The epoch time of a configuration is the median of its repeats.
# Reports, per setting: the tuned epoch time, the grid's best and worst (with their settings),
# tuned / best, and the tuner's final threads, window and state (from .clairfs/stats); then the
# whole grid. The grid's best is the least of many noisy medians, so it is lower than what that
# setting gives in general (a winner's curse): with --confirm R, the best static setting of each
# PFS setting is run again R times beside the tuned default, interleaved, and the report gives
# both medians of these new runs and their ratio.
#
# Usage: tools/bench/autotune_bench.sh [--quick] [--settings LIST] [--threads LIST]
#          [--capacities LIST] [--repeats R] [--files N] [--mean-kb KB] [--workers W]
#          [--mem MIB] [--epoch-seconds S] [--confirm R] [--tmp DIR] [--out FILE] [--logs DIR]
#   --settings  comma-separated BPS:IOPS pairs (0: unthrottled) [25000000:400,200000000:4000,0:0]
#   --threads   static staging threads of the grid [1,2,4,8,16]
#   --capacities static window capacities of the grid, MiB [16,64,256]
#   --repeats R [3], --files N [4000], --mean-kb KB [110], --workers W [8], --mem MIB [1024],
#   --epoch-seconds S [6], --confirm R [0]
#   --quick     600 files, 2 s epochs, threads 1,8, capacities 16,256, 1 repeat: about a minute
#   --out FILE  writes the markdown report to FILE too
#   --logs DIR  runs the daemons at log level debug (the tuner logs each change of its targets)
#               and keeps each run's log in DIR (<setting>.r<repeat>.<config>.log)
# Env: CLAIRFS_BIN, BENCH_BIN (default: this checkout's build/), PYTHON (/usr/bin/python3).
# Root only (loop devices, mounts, cgroups). Everything set up is torn down on exit, error,
# INT and TERM.
set -euo pipefail

SETTINGS=25000000:400,200000000:4000,0:0 THREADS=1,2,4,8,16 CAPS=16,64,256 REPEATS=3
# shellcheck disable=SC2034  # QUICK: --quick's values are set before the options are parsed
FILES=4000 MEAN_KB=110 WORKERS=8 MEM_MIB=1024 EPOCH_S=6 TMPBASE=/var/tmp OUT="" QUICK=0 LOGS=""
CONFIRM=0
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CLAIRFS_BIN=${CLAIRFS_BIN:-$REPO/build/daemon/clairfs}
BENCH_BIN=${BENCH_BIN:-$REPO/build/tools/bench/clairfs-bench}
PYTHON=${PYTHON:-/usr/bin/python3}
COMMAND="tools/bench/autotune_bench.sh $*"

NAME=autotune_bench
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tools/bench/pfs_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pfs_lib.sh"

for a in "$@"; do [[ $a == --quick ]] && FILES=600 EPOCH_S=2 THREADS=1,8 CAPS=16,256 REPEATS=1; done
declare -A OPTIONS=([--quick]=QUICK=1 [--settings]=SETTINGS [--threads]=THREADS
  [--capacities]=CAPS [--repeats]=REPEATS [--files]=FILES [--mean-kb]=MEAN_KB
  [--workers]=WORKERS [--mem]=MEM_MIB [--epoch-seconds]=EPOCH_S [--tmp]=TMPBASE [--out]=OUT
  [--logs]=LOGS [--confirm]=CONFIRM)
parse_options "$@"
((EUID == 0)) || die "run as root (loop devices, mounts, cgroups)"
for v in REPEATS FILES MEAN_KB WORKERS MEM_MIB EPOCH_S; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer: ${!v}"
done
[[ $CONFIRM =~ ^[0-9]+$ ]] || die "--confirm must be a number of rounds: $CONFIRM"
[[ $SETTINGS =~ ^[0-9]+:[0-9]+(,[0-9]+:[0-9]+)*$ ]] || die "--settings: BPS:IOPS[,BPS:IOPS...]"
[[ $THREADS =~ ^[0-9]+(,[0-9]+)*$ && $CAPS =~ ^[0-9]+(,[0-9]+)*$ ]] ||
  die "--threads, --capacities: comma-separated integers"
if [[ -n $LOGS ]]; then LOGS=$(realpath -m "$LOGS") && mkdir -p "$LOGS"; fi
[[ -x $CLAIRFS_BIN && -x $BENCH_BIN ]] || die "build first: $CLAIRFS_BIN, $BENCH_BIN"
for tool in jq fusermount3 "$PYTHON"; do command -v "$tool" >/dev/null || die "missing $tool"; done

WORK=$(mktemp -d "$TMPBASE/clairfs-tune.XXXXXX")
BIN_INFO="clairfs $(realpath "$CLAIRFS_BIN") built $(built "$CLAIRFS_BIN")"
snapshot_binaries
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
DATE_START=$(date -u '+%Y-%m-%d %H:%M UTC')

pfs_setup "$WORK/pfs.img" "$(awk -v n="$FILES" -v kb="$MEAN_KB" 'BEGIN {printf "%d", n * kb * 1150 / 1048576 + 64}')" "$WORK/pfs"
pfs_cgroups "clairfs-tune.$$"
pfs_memlimit $((MEM_MIB << 20))
DATA=$PFS_MNT/data
log "dataset: $FILES files, mean $MEAN_KB KB"
run "$PYTHON" "$REPO/tools/make_dataset.py" "$DATA" --files "$FILES" --classes 100 \
  --mean-kb "$MEAN_KB" --sigma 0.5 --seed 1 >&2
"$PYTHON" "$REPO/tools/make_manifest.py" "$DATA" --epochs 1 --seed 1 >"$WORK/manifest"
DATA_BYTES=$(find "$DATA" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}')

# The configurations: "auto" (the tuned default), then "T:C" (T threads, C MiB window).
CONFIGS=(auto)
IFS=, read -ra TLIST <<<"$THREADS"
IFS=, read -ra CLIST <<<"$CAPS"
for t in "${TLIST[@]}"; do for c in "${CLIST[@]}"; do CONFIGS+=("$t:$c"); done; done

# entries_for BPS: the epoch's entries at that bandwidth (0: all).
entries_for() {
  awk -v b="$1" -v s="$EPOCH_S" -v n="$FILES" -v t="$DATA_BYTES" 'BEGIN {
    k = b > 0 ? int(s * b / (t / n)) : n; if (k > n) k = n; if (k < 1) k = 1; print k }'
}

# one_run SETTING_TAG CONFIG REPEAT [SUFFIX]: one cold-cache epoch of $WORK/$tag.manifest;
# appends "config seconds" to the setting's results ($WORK/$tag$SUFFIX.runs), and for auto the
# tuner's final state ($WORK/$tag$SUFFIX.tuner).
one_run() {
  local tag=$1 config=$2 rep=$3 suffix=${4:-} cfg="$WORK/run.yaml" mnt="$WORK/mnt" pid secs
  pfs_remount
  if [[ $config == auto ]]; then
    printf 'cache:\n  tiers: []\n' >"$cfg"
  else
    printf 'cache:\n  tiers: []\n  staging: {threads: %s, capacity: %sMiB}\n' \
      "${config%%:*}" "${config#*:}" >"$cfg"
  fi
  mkdir -p "$mnt"
  MOUNTS+=("$mnt")
  local level=()
  if [[ -n $LOGS ]]; then level=(-o log_level=debug); fi
  (pfs_exec "$CLAIRFS_BIN" -f -c "$cfg" "${level[@]}" "$DATA" "$mnt" >"$WORK/daemon.log" 2>&1) &
  pid=$!
  PIDS+=("$pid")
  wait_mounted "$mnt" "$pid" "$WORK/daemon.log"
  cat "$WORK/$tag.manifest" >"$mnt/.clairfs/manifest"
  [[ -z $(cat "$mnt/.clairfs/errors") ]] || die "manifest rejected: $(cat "$mnt/.clairfs/errors")"
  (pfs_exec timeout 1200 "$BENCH_BIN" --root "$mnt" --list "$WORK/$tag.manifest" --replay \
    --workers "$WORKERS" --batch-size 16 --json >"$WORK/bench.json" 2>"$WORK/bench.err") ||
    die "$tag $config: clairfs-bench failed: $(tail -3 "$WORK/bench.err")"
  secs=$(jq -r '.epochs[0].seconds' "$WORK/bench.json")
  [[ $(jq -r '.epochs[0].errors' "$WORK/bench.json") == 0 ]] ||
    die "$tag $config: read errors: $(jq -c .first_error "$WORK/bench.json")"
  echo "$config $secs" >>"$WORK/$tag$suffix.runs"
  if [[ $config == auto ]]; then
    jq -r '.prefetch | "\(.staging_threads) \(.staging_capacity) \(.staging_max_capacity) \(.tuner_state)"' \
      "$mnt/.clairfs/stats" >>"$WORK/$tag$suffix.tuner"
  fi
  log "$tag$suffix r$rep $config: $secs s"
  teardown
  if [[ -n $LOGS ]]; then cp "$WORK/daemon.log" "$LOGS/$tag$suffix.r$rep.${config/:/x}.log"; fi
}

human_setting() {  # BPS:IOPS -> "25 MB/s + 400 IOPS" or "unthrottled"
  awk -v s="$1" 'BEGIN { split(s, x, ":");
    if (x[1] == 0 && x[2] == 0) { print "unthrottled (local disk)"; exit }
    printf "%s + %s\n", x[1] ? sprintf("%g MB/s", x[1] / 1e6) : "any MB/s",
      x[2] ? sprintf("%d IOPS", x[2]) : "any IOPS" }'
}

median() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
median_of() { awk -v c="$2" '$1 == c {print $2}' "$1" | median; }  # FILE CONFIG: its runs' median
# best_static TAG: the static configuration of the least median in $WORK/$tag.runs.
best_static() {
  local c
  for c in "${CONFIGS[@]:1}"; do echo "$c $(median_of "$WORK/$1.runs" "$c")"; done | sort -g -k2 | head -1 | cut -d' ' -f1
}

IFS=, read -ra SLIST <<<"$SETTINGS"
declare -A ENTRIES BYTES BEST
for s in "${SLIST[@]}"; do
  tag=s${s//:/_}
  # shellcheck disable=SC2086
  pfs_throttle ${s/:/ }
  head -n $(($(entries_for "${s%%:*}") + 1)) "$WORK/manifest" >"$WORK/$tag.manifest"  # + #epoch
  ENTRIES[$tag]=$(($(wc -l <"$WORK/$tag.manifest") - 1))
  BYTES[$tag]=$(tail -n +2 "$WORK/$tag.manifest" | (cd "$DATA" && xargs -d '\n' stat -c %s) | awk '{s += $1} END {printf "%.0f", s}')
  log "setting $(human_setting "$s"): ${#CONFIGS[@]} configurations x $REPEATS"
  for ((rep = 1; rep <= REPEATS; rep++)); do
    for config in "${CONFIGS[@]}"; do one_run "$tag" "$config" "$rep"; done
  done
  if ((CONFIRM > 0)); then
    BEST[$tag]=$(best_static "$tag")
    log "setting $(human_setting "$s"): the tuned default against ${BEST[$tag]} again x $CONFIRM"
    for ((rep = 1; rep <= CONFIRM; rep++)); do
      for config in auto "${BEST[$tag]}"; do one_run "$tag" "$config" "$rep" .confirm; done
    done
  fi
done
pfs_throttle 0 0
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report ----------------------------------------------------------------------------------
cfg_name() { [[ $1 == auto ]] && echo auto || echo "${1%%:*} thr, ${1#*:} MiB"; }
# tuner_of FILE: the tuner's final states of the runs in FILE, "threads, window MiB, state; ..."
tuner_of() { awk '{printf "%s%s, %.0f, %s", sep, $1, $2 / 1048576, $4; sep = "; "}' "$1"; }
# md_head COLUMN...: a markdown table's header and separator lines.
md_head() {
  local c
  printf '|'; for c in "$@"; do printf ' %s |' "$c"; done; echo
  printf '|'; for c in "$@"; do printf -- '---|'; done; echo
}
TUNER_COL="tuner at the end (threads, window MiB, state)"
{
  echo "Command: \`$COMMAND\` ($DATE_START; $BIN_INFO; load average $LOAD_START at the start, $LOAD_END at the end)."
  echo "Dataset: $FILES files, $DATA_BYTES bytes (mean $MEAN_KB KB); one epoch per run, $WORKERS loader workers, no tier (all staged); median of $REPEATS run(s) per configuration."
  echo
  md_head "PFS setting" epoch "tuned (s)" "best of grid (s)" "worst of grid (s)" "tuned / best" "$TUNER_COL"
  for s in "${SLIST[@]}"; do
    tag=s${s//:/_}
    : >"$WORK/$tag.med"
    for config in "${CONFIGS[@]}"; do
      echo "$config $(median_of "$WORK/$tag.runs" "$config")" >>"$WORK/$tag.med"
    done
    tuned=$(awk '$1 == "auto" {print $2}' "$WORK/$tag.med")
    read -r bestc best < <(awk '$1 != "auto"' "$WORK/$tag.med" | sort -g -k2 | head -1)
    read -r worstc worst < <(awk '$1 != "auto"' "$WORK/$tag.med" | sort -g -k2 | tail -1)
    tuner=$(tuner_of "$WORK/$tag.tuner")
    awk -v n="$(human_setting "$s")" -v e="${ENTRIES[$tag]} files, $((BYTES[$tag] / 1000000)) MB" -v t="$tuned" -v b="$best" -v bc="$(cfg_name "$bestc")" \
      -v w="$worst" -v wc="$(cfg_name "$worstc")" -v tu="$tuner" 'BEGIN {
      printf "| %s | %s | %.2f | %.2f (%s) | %.2f (%s) | %.3f | %s |\n", n, e, t, b, bc, w, wc, t / b, tu }'
  done
  if ((CONFIRM > 0)); then
    echo
    echo "The grid's best static setting run again beside the tuned default ($CONFIRM rounds, interleaved; median epoch seconds of these runs):"
    echo
    md_head "PFS setting" "best static of the grid" "tuned (s)" "that setting (s)" "tuned / it" "$TUNER_COL"
    for s in "${SLIST[@]}"; do
      tag=s${s//:/_}
      awk -v n="$(human_setting "$s")" -v c="$(cfg_name "${BEST[$tag]}")" \
        -v t="$(median_of "$WORK/$tag.confirm.runs" auto)" \
        -v b="$(median_of "$WORK/$tag.confirm.runs" "${BEST[$tag]}")" \
        -v tu="$(tuner_of "$WORK/$tag.confirm.tuner")" \
        'BEGIN { printf "| %s | %s | %.2f | %.2f | %.3f | %s |\n", n, c, t, b, t / b, tu }'
    done
  fi
  echo
  echo "Every configuration (median epoch seconds; columns: static threads, rows: static window MiB):"
  echo
  for s in "${SLIST[@]}"; do
    tag=s${s//:/_}
    echo "$(human_setting "$s"): tuned $(awk '$1 == "auto" {printf "%.2f", $2}' "$WORK/$tag.med") s"
    echo
    md_head 'window \ threads' "${TLIST[@]}"
    for c in "${CLIST[@]}"; do
      printf '| %s MiB |' "$c"
      for t in "${TLIST[@]}"; do
        awk -v k="$t:$c" '$1 == k {printf " %.2f |", $2}' "$WORK/$tag.med"
      done
      echo
    done
    echo
  done
} >"$WORK/report.md"
cat "$WORK/report.md"
if [[ -n $OUT ]]; then cp "$WORK/report.md" "$OUT"; log "report written to $OUT"; fi
