#!/usr/bin/env bash
# records_bench.sh: records in big files (docs/benchmarks.md, "Records in big files"). A TFRecord
# set on an emulated parallel file system (pfs_lib.sh: throttled loop-mounted ext4, capped page
# cache), read as a training loop reads it: every record once per epoch in a new seeded shuffle
# (random.Random(seed + epoch)), with the replay of records_replay.py (W worker threads, prefetch
# factor F, batches of B records, C ms of sleep-based compute per record). Side by side, in one run:
#   lower bound   the consumer alone (--compute-only), one epoch
#   direct        os.pread of each record's range on the PFS: one request per record
#   clairfs CHUNK clairfs -f over the dataset with cache.chunk_size CHUNK, tiers [ram, ssd]
#                 (SSD tier in a fresh RocksDB dir under --tmp, not throttled), every epoch's
#                 records registered as range entries (clairfs.register_records) right before
#                 the first read; once per --chunks value
# Every run starts cold (the image is remounted) inside the same blkio group (the PFS's
# bandwidth and IOPS) and a memory group capped at the processes' memory (a reader:
# --reader MiB; clairfs: plus RAM tier + staging + --overhead) plus --pagecache for the page
# cache. Every record read is checked (TFRecord header CRC, CRC-32 of its data).
# Per run and epoch it reports the epoch time and its ratio to the lower bound, the stall, the
# requests to the PFS (direct: one per record; clairfs: its backing_reads, one per chunk
# fetched) and their bytes, and the loop device's reads and bytes; per run the totals over all
# epochs against the dataset's size.
#
# Usage: tools/bench/records_bench.sh [--quick] [--size-mb N] [--shards S] [--mean-kb KB]
#          [--epochs E] [--workers W] [--prefetch-factor F] [--batch-size B] [--compute-ms C]
#          [--bps B] [--iops N] [--chunks "4MiB 256KiB"] [--ram MIB] [--ssd MIB]
#          [--staging MIB] [--tier-threads T] [--pagecache MIB] [--overhead MIB] [--reader MIB] [--tmp DIR]
#          [--no-direct] [--out FILE] [--keep DIR]
# Defaults: N 1500 MB (10**6 B) in S 8 shards, records of lognormal size around 110 KB (sigma
#   0.5), E 3, W 4, F 2, B 16, C 1.5 ms, 25 MB/s and 400 IOPS, chunks 4MiB and 256KiB, RAM
#   tier half and SSD tier three quarters of the dataset (together 1.25 x), tier threads 2, staging 64,
#   pagecache 64, overhead 192 (the daemon beyond its RAM tier and staging, as its start-up check
#   of the cgroup's limit counts it: docs/configuration.md), reader 64 (MiB).
#   --quick: N 300 MB in 4 shards (a few minutes). --no-direct: clairfs runs only.
# --out FILE writes the markdown report to FILE too. --keep DIR copies the replays' outputs
# into DIR (lb.json, direct.json, clairfs-<CHUNK>.json: per epoch the times, and the plan as
# read right after registration, with per_epoch) and probes of the throttled store (probe-<CHUNK>.json:
# 128 MiB in CHUNK pieces at random offsets of the shards, read cold with 4 threads, as `clairfs-ctl
# plan --predict --probe` reads them), and what the page cache held of the SSD tier's files at
# the end of each clairfs run (pagecache-<CHUNK>.json), for tools/bench/predict_bench.sh.
# Env: CLAIRFS_BIN, BENCH_BIN (the throttle check; default: this checkout's build/), PYTHON
# (/usr/bin/python3). Root only. Everything set up is torn down on exit, error, INT and TERM.
set -euo pipefail

SIZE_MB=1500 SHARDS=8 MEAN_KB=110 EPOCHS=3 WORKERS=4 PF=2 BATCH=16 COMPUTE_MS=1.5
BPS=25000000 IOPS=400 CHUNKS="4MiB 256KiB" RAM="" SSD="" STAGING=64 PAGECACHE=64 OVERHEAD=192 TIER_THREADS=2
READER_MIB=64 TMPBASE=/var/tmp OUT="" DIRECT=1 KEEP=""
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CLAIRFS_BIN=${CLAIRFS_BIN:-$REPO/build/daemon/clairfs}
BENCH_BIN=${BENCH_BIN:-$REPO/build/tools/bench/clairfs-bench}
PYTHON=${PYTHON:-/usr/bin/python3}
REPLAY_PY=$REPO/tools/bench/records_replay.py
COMMAND="tools/bench/records_bench.sh $*"

NAME=records_bench
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tools/bench/pfs_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pfs_lib.sh"

args=("$@")
for a in "${args[@]}"; do [[ $a == --quick ]] && SIZE_MB=300 SHARDS=4; done
declare -A OPTIONS=([--quick]=QUICK=1 [--size-mb]=SIZE_MB [--shards]=SHARDS [--mean-kb]=MEAN_KB
  [--epochs]=EPOCHS [--workers]=WORKERS [--prefetch-factor]=PF [--batch-size]=BATCH
  [--compute-ms]=COMPUTE_MS [--bps]=BPS [--iops]=IOPS [--chunks]=CHUNKS [--ram]=RAM [--ssd]=SSD
  [--staging]=STAGING [--tier-threads]=TIER_THREADS [--pagecache]=PAGECACHE [--overhead]=OVERHEAD [--reader]=READER_MIB
  [--tmp]=TMPBASE [--no-direct]=DIRECT=0 [--out]=OUT [--keep]=KEEP)
parse_options "$@"
if [[ -n $KEEP ]]; then KEEP=$(realpath -m "$KEEP") && mkdir -p "$KEEP"; fi
((EUID == 0)) || die "run as root (loop devices, mounts, cgroups)"
[[ -n $RAM ]] || RAM=$((SIZE_MB * 1000000 / 2 / 1048576))
[[ -n $SSD ]] || SSD=$((SIZE_MB * 1000000 * 3 / 4 / 1048576))
for v in SIZE_MB SHARDS EPOCHS WORKERS PF BATCH BPS IOPS RAM SSD STAGING PAGECACHE OVERHEAD READER_MIB; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer: ${!v}"
done
for v in MEAN_KB COMPUTE_MS; do
  [[ ${!v} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "$v must be a non-negative number: ${!v}"
done
read -r -a CHUNK_LIST <<<"$CHUNKS"
((${#CHUNK_LIST[@]})) || die "--chunks: at least one chunk size"
for c in "${CHUNK_LIST[@]}"; do
  [[ $c =~ ^[1-9][0-9]*(KiB|MiB)$ ]] || die "--chunks: sizes like 4MiB or 256KiB, got: $c"
done
[[ -x $CLAIRFS_BIN && -x $BENCH_BIN ]] || die "build first: $CLAIRFS_BIN, $BENCH_BIN"
for tool in fusermount3 "$PYTHON"; do command -v "$tool" >/dev/null || die "missing $tool"; done

WORK=$(mktemp -d "$TMPBASE/clairfs-records.XXXXXX")
BIN_INFO="clairfs from $(realpath "$CLAIRFS_BIN") (built $(built "$CLAIRFS_BIN"))"
snapshot_binaries
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
DATE_START=$(date -u '+%Y-%m-%d %H:%M UTC')
REPLAY=(--epochs "$EPOCHS" --seed 1 --workers "$WORKERS" --prefetch-factor "$PF"
  --batch-size "$BATCH" --compute-ms "$COMPUTE_MS")
MIB=1048576

# ---- the dataset on the emulated PFS ---------------------------------------------------------
pfs_setup "$WORK/pfs.img" $((SIZE_MB * 1000000 * 105 / 100 / MIB + 64)) "$WORK/pfs"
pfs_cgroups "clairfs-records.$$"
DATA=$PFS_MNT/data
log "dataset: $SIZE_MB MB of TFRecord records (mean $MEAN_KB KB) in $SHARDS shards"
run "$PYTHON" "$REPLAY_PY" make "$DATA" --index "$WORK/index.json" --size-mb "$SIZE_MB" \
  --shards "$SHARDS" --mean-kb "$MEAN_KB" --seed 1
read -r DATA_BYTES NRECORDS < <("$PYTHON" -c 'import json, sys
i = json.load(open(sys.argv[1])); print(i["bytes"], len(i["records"]))' "$WORK/index.json")
(cd "$DATA" && ls) >"$WORK/shards.list"
log "throttle check (4 s per limit, whole shards)"
CHECK_TABLE=$(pfs_check 4 "$BPS" "$IOPS" "$BENCH_BIN" "$DATA" "$WORK/shards.list")
log "throttle check: $(tr '\n' ' ' <<<"$CHECK_TABLE")"
pfs_throttle "$BPS" "$IOPS"
if [[ -n $KEEP ]]; then  # the backing store as `clairfs-ctl plan --predict --probe` reads it
  for chunk in "${CHUNK_LIST[@]}"; do
    piece=$(($(sed 's/KiB/*1024/; s/MiB/*1048576/' <<<"$chunk")))
    pfs_remount
    (pfs_exec "$PYTHON" "$REPO/tools/bench/predict_report.py" probe "$DATA" \
      --objects $((128 * MIB / piece)) --piece "$piece") >"$KEEP/probe-$chunk.json"
    log "probe of the backing store, $chunk pieces: $(cat "$KEEP/probe-$chunk.json")"
  done
fi

# ---- the runs --------------------------------------------------------------------------------
log "lower bound: compute only, one epoch"
"$PYTHON" "$REPLAY_PY" replay --root "$DATA" --index "$WORK/index.json" --out "$WORK/lb.json" \
  "${REPLAY[@]}" --compute-only

RUNS=()
if ((DIRECT)); then
  pfs_remount
  pfs_memlimit $(((PAGECACHE + READER_MIB) * MIB))
  log "direct: records read from $DATA"
  run pfs_exec "$PYTHON" "$REPLAY_PY" replay --root "$DATA" --index "$WORK/index.json" \
    --out "$WORK/direct.json" "${REPLAY[@]}" --block-dev "$PFS_DEV" ||
    log "direct: the replay reported errors"
  RUNS+=(--run "direct=$WORK/direct.json")
fi
DAEMONS=""

for chunk in "${CHUNK_LIST[@]}"; do
  tag=clairfs-$chunk mnt=$WORK/mnt
  pfs_remount
  pfs_memlimit $(((PAGECACHE + READER_MIB + RAM + STAGING + OVERHEAD) * MIB))
  rm -rf "$WORK/ssd"
  cat >"$WORK/$tag.yaml" <<EOF
cache:
  tiers:
    - {kind: ram, capacity: ${RAM}MiB, threads: $TIER_THREADS}
    - {kind: ssd, capacity: ${SSD}MiB, threads: $TIER_THREADS, dir: "$WORK/ssd"}
  staging: {capacity: ${STAGING}MiB, threads: 4}
  chunk_size: $chunk
  record_chunk_size: $chunk
EOF
  mkdir -p "$mnt"
  MOUNTS+=("$mnt")
  (pfs_exec "$CLAIRFS_BIN" -f -c "$WORK/$tag.yaml" "$DATA" "$mnt" >"$WORK/$tag.log" 2>&1) &
  pid=$!
  PIDS+=("$pid")
  wait_mounted "$mnt" "$pid" "$WORK/$tag.log" "$tag: clairfs"
  log "$tag: records registered as range entries, then read through $mnt"
  run pfs_exec "$PYTHON" "$REPLAY_PY" replay --root "$mnt" --index "$WORK/index.json" \
    --out "$WORK/$tag.json" "${REPLAY[@]}" --block-dev "$PFS_DEV" --register ||
    log "$tag: the replay reported errors"
  rss=$(for p in $(cat "$PFS_MEMCG/cgroup.procs"); do
    # Only the daemons: the control mount's auto_unmount helper (fusermount3) is there too.
    if [[ $(cat "/proc/$p/comm" 2>/dev/null) == clairfs ]]; then
      awk '/VmHWM/ {print $2}' "/proc/$p/status"
    fi
  done | awk '{s += $1} END {printf "%.0f", s / 1024}')
  DAEMONS+="${DAEMONS:+, }chunk_size $chunk: peak RSS $rss MiB, OOM kills in the group so far $(pfs_oom_kills)"
  # What the page cache held of the SSD tier's files at the end (for predict_report.py).
  read -r cached ssd_files < <(page_cached "$WORK/ssd")
  echo "{\"ssd\": {\"cached\": $cached, \"files\": $ssd_files}}" >"$WORK/pagecache-$chunk.json"
  log "$tag: the page cache holds $((cached / MIB)) MiB of the SSD tier's $((ssd_files / MIB)) MiB"
  RUNS+=(--run "clairfs $chunk=$WORK/$tag.json")
  teardown  # unmount, stop the daemon
  rm -rf "$WORK/ssd"
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report ----------------------------------------------------------------------------------
{
  echo "Command: \`$COMMAND\` ($DATE_START; took $((SECONDS / 60)) min $((SECONDS % 60)) s)."
  echo
  echo "Machine: nproc $(nproc), $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo)," \
    "kernel $(uname -r); load average $LOAD_START before the run, $LOAD_END after it; $BIN_INFO."
  echo
  echo "Dataset: $NRECORDS TFRecord records, $DATA_BYTES bytes in $SHARDS shards (data sizes" \
    "lognormal around $MEAN_KB KB, sigma 0.5; records_replay.py make --seed 1). Emulated PFS:" \
    "ext4 image on $PFS_LOOP (direct I/O on) under $TMPBASE, reads throttled to" \
    "$(awk -v b="$BPS" 'BEGIN {printf "%.1f", b / 1e6}') MB/s and $IOPS IOPS (0: none); page" \
    "cache capped at the processes' memory plus $PAGECACHE MiB (a reader: $READER_MIB MiB;" \
    "clairfs: plus RAM tier + staging + $OVERHEAD MiB); image remounted before every run. What" \
    "the group read under each limit (clairfs-bench, 4 threads reading whole shards, cold" \
    "cache, 4 s each):"
  echo
  echo "| read_bps limit | read_iops limit | seconds | group MB/s | group IOPS (bios/s) | KB per bio |"
  echo "|---|---|---|---|---|---|"
  echo "$CHECK_TABLE"
  echo
  echo "Replay: $WORKERS workers, prefetch factor $PF, batches of $BATCH records, $COMPUTE_MS ms" \
    "of sleep-based compute per record, $EPOCHS epochs, each a new shuffle of every record" \
    "(seed 1 + epoch). clairfs: RAM tier $RAM MiB, SSD tier $SSD MiB (RocksDB under $TMPBASE," \
    "not throttled), staging $STAGING MiB, other keys default; the $EPOCHS epochs registered" \
    "as range entries right before the first read (no warm-up). Daemons: $DAEMONS."
  echo
  "$PYTHON" "$REPLAY_PY" report --index "$WORK/index.json" --lb "$WORK/lb.json" "${RUNS[@]}"
} >"$WORK/report.md"
cat "$WORK/report.md"
if [[ -n $OUT ]]; then cp "$WORK/report.md" "$OUT"; log "report written to $OUT"; fi
if [[ -n $KEEP ]]; then
  cp "$WORK/lb.json" "$KEEP/"
  for f in "$WORK"/direct.json "$WORK"/clairfs-*.json; do
    if [[ -f $f ]]; then cp "$f" "$KEEP/"; fi
  done
  for f in "$WORK"/pagecache-*.json; do if [[ -f $f ]]; then cp "$f" "$KEEP/"; fi; done
  log "replay outputs kept in $KEEP"
fi
