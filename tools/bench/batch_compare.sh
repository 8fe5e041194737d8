#!/usr/bin/env bash
# batch_compare.sh: the batch path (docs/batch-path.md) beside the mount and the page cache, in
# one run over one small-file dataset (N files of 110 KiB, ImageFolder layout, one fixed-seed
# shuffled read order), no compute:
#   native   clairfs-bench (open/read/close) on the dataset directory, page cache warm
#   fuse     clairfs-bench through the clairfs mount
#   batch    the batch path: clairfs-bench --via batch --batch-samples 256 when the bench binary
#            has it, else tools/bench/batch_bench.py read (P Python processes, each its own
#            connection, batches of 256)
# each at 1 and T threads (processes for the Python reader). clairfs runs with a RAM tier that
# holds the whole dataset, warmed from a plan before the passes; before every fuse and batch
# pass the page cache is dropped (echo 1 > /proc/sys/vm/drop_caches: root), so every sample
# comes from the daemon. Also:
#   daemon CPU  user + system seconds of the daemon per 100,000 samples (/proc/PID/stat)
#   loader      a torch DataLoader (W workers, batch 256, decode = the bytes) through the mount
#               and through clairfs.BatchFiles: samples/s of epochs 2-3 (persistent workers,
#               the page cache dropped before each epoch; tools/bench/batch_bench.py loader);
#               also with a collate keeping only the count (--no-deliver): reading alone
#   copies      tools/bench/copies.py --via fuse,batch: daemon RSS growth + page cache of the
#               mount's files + page cache of the backing files, over the dataset's bytes
#   wrong_bytes every sample read once more through each path and compared with the original
# Report (markdown) on stderr; the last line of stdout one JSON object with native_page_cache_fps,
# fuse_fps, batch_fps (at T threads), their 1-thread values, loader_fuse_sps, loader_batch_sps,
# batch_copies, fuse_copies, wrong_bytes and the daemon CPU figures.
#
# Every figure is the median of R runs (--repeats, default 3; the passes take turns, round by
# round, so drift in the load falls on all of them alike), all values shown in the report. A
# run is one process reading the list twice, and its last epoch is the figure: the first
# epoch of a process runs slower (native reads from the page cache at 0.5-0.7 of the second on
# a 2-core machine), so every row is taken past it. Through the mount and the batch path the
# page cache is dropped before each epoch (clairfs-bench --drop-caches 1). Native reads three
# times: the first fills the page cache from the disk, the second finds pages read once (the
# kernel activates each at that second touch: 0.8 of the third's speed), the third is the
# steady state of a warm page cache.
#
# Usage: tools/bench/batch_compare.sh [--files N] [--threads T] [--size BYTES]
#          [--loader-workers W] [--repeats R] [--tmp DIR]
# Defaults: N=8000, T=4, SIZE=112640, W=8, R=3, /var/tmp. Needs root (drop_caches), jq, fusermount3,
# fincore; /usr/bin/python3 with torch for the loader rows (null without it).
# Env: CLAIRFS_BIN (default build/daemon/clairfs), BENCH_BIN (default
#   build/tools/bench/clairfs-bench), PYTHON (default /usr/bin/python3), WARM_TIMEOUT (600 s).
set -euo pipefail

FILES=8000
THREADS=4
SIZE=112640
WORKERS=8
TMPBASE=/var/tmp
BATCH=256
REPEATS=3
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CLAIRFS_BIN=${CLAIRFS_BIN:-$REPO/build/daemon/clairfs}
BENCH_BIN=${BENCH_BIN:-$REPO/build/tools/bench/clairfs-bench}
PYTHON=${PYTHON:-/usr/bin/python3}
WARM_TIMEOUT=${WARM_TIMEOUT:-600}
HERE=$REPO/tools/bench
CLASSES=100
SEED=20260101

NAME=batch_compare
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

declare -A OPTIONS=([--files]=FILES [--threads]=THREADS [--size]=SIZE
  [--loader-workers]=WORKERS [--repeats]=REPEATS [--tmp]=TMPBASE)
parse_options "$@"
for n in "$FILES" "$THREADS" "$SIZE" "$WORKERS" "$REPEATS"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "not a positive integer: '$n'"
done
[[ $(id -u) == 0 ]] || die "needs root (drop_caches)"
[[ -x $CLAIRFS_BIN ]] || die "clairfs not found: $CLAIRFS_BIN"
[[ -x $BENCH_BIN ]] || die "bench binary not found: $BENCH_BIN"
for tool in jq fusermount3 fincore "$PYTHON"; do command -v "$tool" >/dev/null || die "missing $tool"; done

WORK=$(mktemp -d "$TMPBASE/clairfs-batch.XXXXXX")
DATA=$WORK/data MNT=$WORK/mnt LIST=$WORK/list.txt
mkdir -p "$DATA" "$MNT"
snapshot_binaries
DATA_BYTES=$((FILES * SIZE))
BENCH_HAS_BATCH=$("$BENCH_BIN" --help 2>&1 | grep -q -- '--via' && echo 1 || echo 0)

# ---- dataset ---------------------------------------------------------------------------------
log "writing $FILES files of $SIZE bytes to $DATA"
run "$PYTHON" "$(dirname "${BASH_SOURCE[0]}")/flat_dataset.py" "$DATA" "$LIST" "$FILES" "$SIZE" "$CLASSES" "$SEED"
sync

cpu_seconds() {  # user + system CPU seconds of process $1 so far
  local stat
  stat=$(cat "/proc/$1/stat")
  awk -v tck="$(getconf CLK_TCK)" '{ printf "%.3f", ($12 + $13) / tck }' <<<"${stat##*) }"
}
drop() { sync; echo 1 >/proc/sys/vm/drop_caches; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
fps_of() { jq -r '.epochs[-1].files_per_s' "$1"; }
errors_of() { jq -r '[.epochs[].errors] | add' "$1"; }

declare -A R=()   # result name -> value
CMDS=()

# ---- clairfs ---------------------------------------------------------------------------------
CFG=$WORK/clairfs.yaml
printf 'cache:\n  tiers:\n    - kind: ram\n      capacity: %dMiB\n' \
  $((DATA_BYTES * 5 / 4 / 1048576 + 64)) >"$CFG"
log "clairfs: mount"
"$CLAIRFS_BIN" -f -c "$CFG" "$DATA" "$MNT" >"$WORK/clairfs.log" 2>&1 &
DAEMON=$!
PIDS+=("$DAEMON") MOUNTS+=("$MNT")
wait_mounted "$MNT" "$DAEMON" "$WORK/clairfs.log"
# The plan: one epoch per pass below and some to spare, each in the list's order.
for ((e = 0; e < 24 * REPEATS + 8; e++)); do echo "#epoch"; cat "$LIST"; done >"$MNT/.clairfs/manifest" ||
  die "manifest rejected: $(cat "$MNT/.clairfs/errors" 2>/dev/null)"
for ((i = 0; i < WARM_TIMEOUT * 5; i++)); do
  jq -e --argjson b "$DATA_BYTES" '(.ram_bytes // 0) >= $b' "$MNT/.clairfs/stats" >/dev/null 2>&1 &&
    break
  sleep 0.2
done
jq -e --argjson b "$DATA_BYTES" '(.ram_bytes // 0) >= $b' "$MNT/.clairfs/stats" >/dev/null ||
  die "RAM tier not warm after $WARM_TIMEOUT s"
log "clairfs: RAM tier warm"
[[ -e $MNT/.clairfs/batch ]] && HAS_BATCH=1 || HAS_BATCH=0


# once KEY THREADS CMD...: drop the page cache, run CMD once; appends its files/s to
# R[KEY_THREADS_all] and the daemon's CPU seconds during it to CPU[KEY_THREADS].
declare -A CPU=()
once() {
  local key=$1 t=$2 cpu0 cpu1 v
  shift 2
  drop
  cpu0=$(cpu_seconds "$DAEMON")
  run timeout 900 "$@" >"$WORK/b.json" || die "$key: failed: $(tail -c 600 "$WORK/b.json")"
  cpu1=$(cpu_seconds "$DAEMON")
  if [[ $key == batch_py ]]; then
    v=$(jq -r .fps "$WORK/b.json")
  else
    [[ $(errors_of "$WORK/b.json") == 0 ]] || die "$key: read errors"
    v=$(fps_of "$WORK/b.json")
  fi
  R[${key}_${t}_all]+="$(printf '%.0f' "$v") "
  CPU[${key}_$t]=$(awk -v c="${CPU[${key}_$t]:-0}" -v a="$cpu0" -v b="$cpu1" 'BEGIN { print c + b - a }')
  ((k > 0)) || CMDS+=("$key $t: $*")
  log "$key, $t threads: $v files/s"
}
# finish KEY THREADS: the median of its runs, and the daemon's CPU per 100k samples over them.
finish() {
  local key=$1 t=$2
  R[${key}_$t]=$(tr ' ' '\n' <<<"${R[${key}_${t}_all]}" | grep . | median)
  # Both epochs of every run are the daemon's work.
  R[${key}_cpu_$t]=$(awk -v c="${CPU[${key}_$t]}" -v n=$((FILES * REPEATS * 2)) 'BEGIN { printf "%.2f", c * 100000 / n }')
  log "$key, $t threads: median ${R[${key}_$t]} files/s (${R[${key}_${t}_all]}), daemon CPU ${R[${key}_cpu_$t]} s / 100k"
}

# The passes take turns (native, fuse, batch, Python batch at 1 thread, then at T, REPEATS
# rounds), so that a change of the machine's load over the run falls on every row alike.
BATCH_KEY=none KEYS=(native fuse)
if ((HAS_BATCH)); then
  if ((BENCH_HAS_BATCH)); then BATCH_KEY=batch KEYS+=(batch batch_py); else BATCH_KEY=batch_py KEYS+=(batch_py); fi
else
  log "no batch path on this daemon ($MNT/.clairfs/batch absent): batch rows skipped"
fi
for ((k = 0; k < REPEATS; k++)); do
  for t in 1 "$THREADS"; do
    for key in "${KEYS[@]}"; do
      case $key in
        native) once native "$t" "$BENCH_BIN" --root "$DATA" --list "$LIST" --threads "$t" \
          --epochs 3 --json ;;
        fuse) once fuse "$t" "$BENCH_BIN" --root "$MNT" --list "$LIST" --threads "$t" \
          --epochs 2 --drop-caches 1 --json ;;
        batch) once batch "$t" "$BENCH_BIN" --root "$MNT" --list "$LIST" --threads "$t" \
          --via batch --batch-samples "$BATCH" --epochs 2 --drop-caches 1 --json ;;
        batch_py) once batch_py "$t" "$PYTHON" "$HERE/batch_bench.py" read --mount "$MNT" \
          --list "$LIST" --procs "$t" --batch "$BATCH" --warmup ;;
      esac
    done
  done
done
for t in 1 "$THREADS"; do
  for key in "${KEYS[@]}"; do finish "$key" "$t"; done
done

# ---- wrong bytes -----------------------------------------------------------------------------
WRONG=0
for via in fuse $( ((HAS_BATCH)) && echo batch); do
  drop
  w=$(run timeout 900 "$PYTHON" "$HERE/batch_bench.py" verify --mount "$MNT" --orig "$DATA" \
    --list "$LIST" --via "$via" | tail -1 | jq -r .wrong_bytes)
  log "verify via $via: wrong_bytes $w"
  WRONG=$((WRONG + w))
done

# ---- DataLoader ------------------------------------------------------------------------------
LOADER_RUNS=$REPEATS
"$PYTHON" -c 'import torch' 2>/dev/null || { LOADER_RUNS=0; log "no torch for $PYTHON: loader rows skipped"; }
for ((k = 0; k < LOADER_RUNS; k++)); do  # the two alternate, so drift hits both alike
  for via in fuse $( ((HAS_BATCH)) && echo batch); do
    for deliver in "" --no-deliver; do  # the batches to the training process, or counts only
      drop
      v=$(run timeout 900 "$PYTHON" "$HERE/batch_bench.py" loader --mount "$MNT" \
        --list "$LIST" --via "$via" --workers "$WORKERS" --batch "$BATCH" --epochs 3 --drop \
        $deliver |
        tail -1 | jq -r .sps)
      key=loader_$via${deliver:+_read}
      R[${key}_all]+="$v "
      log "DataLoader via $via ($WORKERS workers, batch $BATCH${deliver:+, counts only}): $v samples/s"
    done
  done
done
for via in fuse $( ((HAS_BATCH && LOADER_RUNS)) && echo batch); do
  ((LOADER_RUNS)) || break
  for key in loader_$via loader_${via}_read; do
    R[$key]=$(tr ' ' '\n' <<<"${R[${key}_all]}" | grep . | median)
  done
done
CMDS+=("loader: $PYTHON $HERE/batch_bench.py loader --mount $MNT --list $LIST --via fuse|batch --workers $WORKERS --batch $BATCH --epochs 3 --drop")
STATS=$(jq -c '{file_reads, served, batch}' "$MNT/.clairfs/stats" 2>/dev/null || echo '{}')
teardown

# ---- copies ----------------------------------------------------------------------------------
VIAS=fuse
((HAS_BATCH)) && VIAS=fuse,batch
log "copies: copies.py --files $FILES --via $VIAS"
run timeout 1800 "$PYTHON" "$HERE/copies.py" --files "$FILES" --size "$SIZE" \
  --clairfs-bin "clairfs=$CLAIRFS_BIN" --backing-pages default --via "$VIAS" --tmp "$WORK" \
  >"$WORK/copies.txt"
COPIES=$(tail -1 "$WORK/copies.txt")
R[fuse_copies]=$(jq -r '.rows[] | select(.via == "fuse") | .copies' <<<"$COPIES")
R[batch_copies]=$(jq -r '[.rows[] | select(.via == "batch") | .copies][0] // "null"' <<<"$COPIES")

# ---- report ----------------------------------------------------------------------------------
T=$THREADS
num() { local v=${R[$1]:-}; [[ -n $v ]] && echo "$v" || echo null; }
ratio() { awk -v a="${R[$1]:-}" -v b="${R[$2]:-}" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else printf "null" }'; }
{
  echo "Dataset: $FILES files x $SIZE bytes, RAM tier holding all; drop_caches 1 before each fuse/batch pass."
  echo "| path | 1 thread files/s | $T threads files/s | daemon CPU s/100k (1) | ($T) |"
  echo "|---|---|---|---|---|"
  echo "(median of $REPEATS; all: native ${R[native_1_all]}/ ${R[native_${T}_all]}; fuse ${R[fuse_1_all]:-}/ ${R[fuse_${T}_all]:-}; batch ${R[batch_1_all]:-}/ ${R[batch_${T}_all]:-}; python ${R[batch_py_1_all]:-}/ ${R[batch_py_${T}_all]:-})"
  echo "| native page cache | $(num native_1) | $(num native_$T) | | |"
  echo "| FUSE (clairfs-bench) | $(num fuse_1) | $(num fuse_$T) | $(num fuse_cpu_1) | $(num fuse_cpu_$T) |"
  [[ $BATCH_KEY == batch ]] && echo "| batch (clairfs-bench --via batch) | $(num batch_1) | $(num batch_$T) | $(num batch_cpu_1) | $(num batch_cpu_$T) |"
  ((HAS_BATCH)) && echo "| batch (Python, processes) | $(num batch_py_1) | $(num batch_py_$T) | $(num batch_py_cpu_1) | $(num batch_py_cpu_$T) |"
  echo "DataLoader ($WORKERS workers, batch $BATCH): fuse $(num loader_fuse) samples/s (${R[loader_fuse_all]:-}), batch $(num loader_batch) samples/s (${R[loader_batch_all]:-})"
  echo "DataLoader, counts only (--no-deliver): fuse $(num loader_fuse_read) samples/s (${R[loader_fuse_read_all]:-}), batch $(num loader_batch_read) samples/s (${R[loader_batch_read_all]:-})"
  echo "copies: $(jq -c .rows <<<"$COPIES")"
  echo "wrong_bytes: $WRONG; stats after: $STATS"
  printf '%s\n' "${CMDS[@]}"
} >&2
BATCH_FPS_KEY=$([[ $BATCH_KEY == batch ]] && echo batch || echo batch_py)
jq -cn --argjson files "$FILES" --argjson size "$SIZE" --argjson threads "$T" \
  --argjson native1 "$(num native_1)" --argjson nativeT "$(num native_$T)" \
  --argjson fuse1 "$(num fuse_1)" --argjson fuseT "$(num fuse_$T)" \
  --argjson batch1 "$(num "${BATCH_FPS_KEY}_1")" --argjson batchT "$(num "${BATCH_FPS_KEY}_$T")" \
  --argjson batchpy1 "$(num batch_py_1)" --argjson batchpyT "$(num batch_py_$T)" \
  --argjson fcpu1 "$(num fuse_cpu_1)" --argjson fcpuT "$(num fuse_cpu_$T)" \
  --argjson bcpu1 "$(num "${BATCH_FPS_KEY}_cpu_1")" --argjson bcpuT "$(num "${BATCH_FPS_KEY}_cpu_$T")" \
  --argjson lf "$(num loader_fuse)" --argjson lb "$(num loader_batch)" \
  --argjson lfr "$(num loader_fuse_read)" --argjson lbr "$(num loader_batch_read)" \
  --argjson fc "$(num fuse_copies)" --argjson bc "$(num batch_copies)" \
  --argjson wrong "$WRONG" --arg reader "$BATCH_KEY" \
  --argjson r1 "$(ratio "${BATCH_FPS_KEY}_$T" "fuse_$T")" --argjson r2 "$(ratio loader_batch loader_fuse)" \
  --argjson repeats "$REPEATS" '{files: $files, size: $size, threads: $threads, repeats: $repeats, batch_reader: $reader,
    native_page_cache_fps: $nativeT, native_page_cache_fps_1: $native1,
    fuse_fps: $fuseT, fuse_fps_1: $fuse1, batch_fps: $batchT, batch_fps_1: $batch1,
    batch_python_fps: $batchpyT, batch_python_fps_1: $batchpy1,
    fuse_daemon_cpu_s_per_100k: $fcpuT, fuse_daemon_cpu_s_per_100k_1: $fcpu1,
    batch_daemon_cpu_s_per_100k: $bcpuT, batch_daemon_cpu_s_per_100k_1: $bcpu1,
    loader_fuse_sps: $lf, loader_batch_sps: $lb, loader_fuse_read_sps: $lfr, loader_batch_read_sps: $lbr, batch_over_fuse: $r1, loader_batch_over_fuse: $r2,
    batch_copies: $bc, fuse_copies: $fc, wrong_bytes: $wrong}'
