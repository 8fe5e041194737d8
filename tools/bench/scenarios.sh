#!/usr/bin/env bash
# shellcheck disable=SC2034  # COMMAND, LOAD_*, DATE_START: read by scenarios_report.sh
# scenarios.sh: HDMLP's four scenarios (thesis section 4.1) at this machine's scale, on an
# emulated parallel file system (pfs_lib.sh: throttled loop-mounted ext4, capped page cache).
#   1  dataset < RAM tier                    (0.65 x RAM)
#   2  RAM tier < dataset < RAM + SSD tiers  (RAM + 0.5 x SSD)
#   3  one node's tiers < dataset < all nodes' tiers: N ranks under mpiexec, one mount and
#      one manifest (make_manifest.py --rank r --world N) per rank; skipped unless the
#      clairfs binary's --help mentions MPI and mpiexec exists
#   4  dataset > all tiers                   (1.5 x (RAM + SSD), one node; 3 reuses it)
# Each scenario runs the same replay (clairfs-bench: W workers, prefetch factor F, batches of B,
# C ms of sleep-based compute per sample, E epochs) three ways:
#   lower bound  the consumer alone (--compute-only), one epoch (all epochs have the same
#                samples, so the same compute)
#   direct       reading the emulated PFS itself, what the job does without clairfs
#   clairfs      build/daemon/clairfs -f over the dataset, tiers [ram, ssd] (SSD tier in a fresh
#                RocksDB dir under --tmp), the E-epoch manifest registered right before reading
# Direct and clairfs runs start from a cold cache (the image is remounted); both run inside the
# same blkio group (the PFS's bandwidth) and a memory group capped at the processes' memory
# (clairfs: RAM tier + staging + --overhead) plus --pagecache for the page cache.
# Per epoch it reports stall time, epoch time / lower bound and loop-device bytes / dataset
# bytes; per scenario the device bytes over all E epochs (clairfs: from manifest registration
# on) and clairfs's own backing_bytes.
#
# Usage: tools/bench/scenarios.sh [--quick] [--scenarios 1,2,3,4] [--epochs E] [--ranks N]
#          [--workers W] [--prefetch-factor F] [--batch-size B] [--compute-ms C]
#          [--bps B] [--iops N] [--ram MIB] [--ssd MIB] [--staging MIB] [--pagecache MIB]
#          [--overhead MIB] [--mean-kb KB] [--tmp DIR] [--out FILE] [--docs FILE] [--plots DIR]
#          [--s4-mib MIB] [--keep DIR]
# Defaults: E 3, N 2, W 4, F 2, B 16, C 1.5 ms, 25 MB/s and 400 IOPS, RAM 256, SSD 512,
#   staging 64, pagecache 64, overhead 192 (MiB; the daemon beyond its tiers and staging: RocksDB
#   memtables and block cache, plan, threads; 50 MiB measured, but the daemon's start-up check
#   of its cgroup's limit counts 160 MiB for this configuration plus a headroom of 1/16 of the
#   limit: docs/configuration.md, "Memory and cgroup limits"), mean 110 KB (lognormal, sigma
#   0.5).
#   --quick: RAM 32, SSD 64, staging 16, pagecache 16 MiB, E 2: about 2 minutes.
# --out FILE writes the markdown report to FILE too; --docs FILE replaces the text between
# "<!-- scenarios:begin -->" and "<!-- scenarios:end -->" in FILE with it (appends if absent).
# Figures (tools/bench/plot_scenarios.py, needs python3-matplotlib; skipped with a message
# without it): --plots DIR writes DIR/scenarios-epochs.svg and DIR/scenarios-tiers.svg; without
# --plots, --out FILE writes them next to FILE: FILE minus .md, plus -epochs.svg, -tiers.svg.
# --s4-mib MIB: the dataset of scenarios 3 and 4 holds MIB MiB instead of 1.5 x (RAM + SSD), so
# that the tiers can change with the dataset the same (what the capacity predicted by `clairfs-ctl
# plan --predict` to remove a stall does, checked: docs/benchmarks.md, "Predicted epochs").
# --keep DIR copies per scenario the lower bound's and the clairfs run's replay outputs
# (s<N>.lb.json, s<N>.clairfs.json) and each rank's plan as read right after registration (and
# placement), with per_epoch (s<N>.plan.r<R>.json), into DIR, and a probe of the throttled
# store (probe.json: 1000 files read cold with 4 threads, as `clairfs-ctl plan --predict --probe`
# reads them), and what the page cache held of the SSD tiers' files at the end of the run
# (s<N>.pagecache.json): tools/bench/predict_bench.sh predicts the epochs from them.
# Env: CLAIRFS_BIN, BENCH_BIN (default: this checkout's build/), PYTHON (/usr/bin/python3),
#   PLOT_FORMAT (the figures' formats: svg, png or svg,png; default svg).
# Root only. Everything set up is torn down on exit, error, INT and TERM.
set -euo pipefail

SCEN=1,2,3,4 EPOCHS=3 RANKS=2 WORKERS=4 PF=2 BATCH=16 COMPUTE_MS=1.5 BPS=25000000 IOPS=400
RAM=256 SSD=512 STAGING=64 PAGECACHE=64 OVERHEAD=192 MEAN_KB=110 TMPBASE=/var/tmp
OUT="" DOCS="" PLOTS="" KEEP="" S4_MIB=""
BENCH_MIB=16  # a reader's own memory (10 MiB measured for 20k entries)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CLAIRFS_BIN=${CLAIRFS_BIN:-$REPO/build/daemon/clairfs}
BENCH_BIN=${BENCH_BIN:-$REPO/build/tools/bench/clairfs-bench}
PYTHON=${PYTHON:-/usr/bin/python3}
PLOT_FORMAT=${PLOT_FORMAT:-svg}
COMMAND="tools/bench/scenarios.sh $*"

NAME=scenarios
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tools/bench/pfs_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pfs_lib.sh"

args=("$@")
for a in "${args[@]}"; do [[ $a == --quick ]] && RAM=32 SSD=64 STAGING=16 PAGECACHE=16 EPOCHS=2; done
declare -A OPTIONS=([--quick]=QUICK=1 [--scenarios]=SCEN [--epochs]=EPOCHS [--ranks]=RANKS
  [--workers]=WORKERS [--prefetch-factor]=PF [--batch-size]=BATCH [--compute-ms]=COMPUTE_MS
  [--bps]=BPS [--iops]=IOPS [--ram]=RAM [--ssd]=SSD [--staging]=STAGING [--pagecache]=PAGECACHE
  [--overhead]=OVERHEAD [--mean-kb]=MEAN_KB [--tmp]=TMPBASE [--out]=OUT [--docs]=DOCS
  [--plots]=PLOTS [--keep]=KEEP [--s4-mib]=S4_MIB)
parse_options "$@"
if [[ -n $DOCS ]]; then DOCS=$(realpath -m "$DOCS"); fi
if [[ -n $KEEP ]]; then KEEP=$(realpath -m "$KEEP") && mkdir -p "$KEEP"; fi
if [[ -n $PLOTS ]]; then PLOTS=$(realpath -m "$PLOTS"); fi
((EUID == 0)) || die "run as root (loop devices, mounts, cgroups)"
for v in EPOCHS RANKS WORKERS PF BATCH BPS IOPS RAM SSD STAGING PAGECACHE OVERHEAD ${S4_MIB:+S4_MIB}; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer: ${!v}"
done
[[ -x $CLAIRFS_BIN && -x $BENCH_BIN ]] || die "build first: $CLAIRFS_BIN, $BENCH_BIN"
for tool in jq fusermount3 "$PYTHON"; do command -v "$tool" >/dev/null || die "missing $tool"; done

WORK=$(mktemp -d "$TMPBASE/clairfs-scen.XXXXXX")
BIN_INFO="clairfs from $(realpath "$CLAIRFS_BIN") (built $(built "$CLAIRFS_BIN")),"
BIN_INFO+=" clairfs-bench built $(built "$BENCH_BIN")"
snapshot_binaries
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
DATE_START=$(date -u '+%Y-%m-%d %H:%M UTC')
REPLAY=(--workers "$WORKERS" --prefetch-factor "$PF" --batch-size "$BATCH" --compute-ms "$COMPUTE_MS")

# ---- datasets on the emulated PFS ------------------------------------------------------------
MIB=1048576
files_for() { awk -v b="$1" -v kb="$MEAN_KB" 'BEGIN {printf "%d", b / (kb * 1000)}'; }
S1_FILES=$(files_for $((RAM * MIB * 65 / 100)))
S2_FILES=$(files_for $(((RAM + SSD / 2) * MIB)))
S4_FILES=$(files_for $(((RAM + SSD) * MIB * 3 / 2)))
if [[ -n $S4_MIB ]]; then S4_FILES=$(files_for $((S4_MIB * MIB))); fi
want() { [[ ,$SCEN, == *,$1,* ]]; }
declare -A DATA_OF=([1]=s1 [2]=s2 [3]=s4 [4]=s4) FILES_OF=([s1]=$S1_FILES [s2]=$S2_FILES [s4]=$S4_FILES)
need=()
for s in 1 2 3 4; do want $s && need+=("${DATA_OF[$s]}"); done
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
((${#need[@]})) || die "no scenario selected: --scenarios $SCEN"
total=0
for d in "${need[@]}"; do total=$((total + FILES_OF[$d])); done
pfs_setup "$WORK/pfs.img" "$(awk -v n="$total" -v kb="$MEAN_KB" 'BEGIN {printf "%d", n * kb * 1150 / 1048576 + 64}')" "$WORK/pfs"
pfs_cgroups "clairfs-scen.$$"
declare -A BYTES_OF
for d in "${need[@]}"; do
  log "dataset $d: ${FILES_OF[$d]} files, mean $MEAN_KB KB"
  run "$PYTHON" "$REPO/tools/make_dataset.py" "$PFS_MNT/$d" --files "${FILES_OF[$d]}" \
    --classes 100 --mean-kb "$MEAN_KB" --sigma 0.5 --seed 1 >&2
  BYTES_OF[$d]=$(find "$PFS_MNT/$d" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
  "$PYTHON" "$REPO/tools/make_manifest.py" "$PFS_MNT/$d" --epochs "$EPOCHS" --seed 1 >"$WORK/data-$d.m0"
done
log "throttle check (4 s per limit, dataset ${need[-1]})"
CHECK_TABLE=$(pfs_check 4 "$BPS" "$IOPS" "$BENCH_BIN" "$PFS_MNT/${need[-1]}" "$WORK/data-${need[-1]}.m0")
log "throttle check: $(tr '\n' ' ' <<<"$CHECK_TABLE")"
pfs_throttle "$BPS" "$IOPS"
if [[ -n $KEEP ]]; then  # the backing store as `clairfs-ctl plan --predict --probe 200` reads it
  pfs_remount
  (pfs_exec "$PYTHON" "$REPO/tools/bench/predict_report.py" probe "$PFS_MNT/${need[-1]}" \
    --objects 1000 --piece $((4 * MIB))) >"$KEEP/probe.json"
  log "probe of the backing store: $(cat "$KEEP/probe.json")"
fi

# ---- one run: lower bound, direct, clairfs ---------------------------------------------------
dev_bytes() { pfs_dev_reads | cut -d' ' -f1; }

# combine OUT IN...: one JSON for the N ranks' bench outputs: per epoch the slowest rank's
# seconds and stall, summed files/bytes/errors/backing_bytes, and rank 0's device bytes (the
# device is shared, so every rank's probe sees all ranks' traffic).
combine() {
  local out=$1; shift
  jq -s '{ranks: length, epochs: [range(0; .[0].epochs | length) as $e | {
    epoch: $e, seconds: (map(.epochs[$e].seconds) | max), stall_s: (map(.epochs[$e].stall_s) | max),
    files: (map(.epochs[$e].files) | add), bytes: (map(.epochs[$e].bytes) | add),
    errors: (map(.epochs[$e].errors) | add), p99_us: (map(.epochs[$e].p99_us) | max),
    device_read_bytes: .[0].epochs[$e].device_read_bytes,
    backing_bytes: (map(.epochs[$e].stats_delta.backing_bytes // null) | if any(. == null) then null else add end)}],
    first_error: (map(.epochs[].first_error // empty) | first)}' "$@" >"$out"
}

# bench_ranks TAG N ROOT_TEMPLATE MANIFEST_PREFIX: N clairfs-bench replays in parallel inside
# the groups, rank r over ROOT_TEMPLATE with {rank} = r and manifest MANIFEST_PREFIX.m<r>.
bench_ranks() {
  local tag=$1 n=$2 root=$3 m=$4 r pids=() rc=0
  for ((r = 0; r < n; r++)); do
    (pfs_exec timeout 3600 "$BENCH_BIN" --root "${root//\{rank\}/$r}" --list "$m.m$r" \
      "${REPLAY[@]}" --block-dev "$PFS_DEV" --json >"$WORK/$tag.r$r.json" 2>"$WORK/$tag.r$r.err") &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  local files=()
  for ((r = 0; r < n; r++)); do files+=("$WORK/$tag.r$r.json"); done
  combine "$WORK/$tag.json" "${files[@]}" || die "$tag: bench output unreadable: $(cat "$WORK/$tag".r*.err)"
  ((rc == 0)) || log "$tag: a bench reported errors: $(jq -c .first_error "$WORK/$tag.json")"
}

lower_bound() {  # TAG MANIFEST: one compute-only epoch, outside the groups (it reads nothing)
  "$BENCH_BIN" --root "$WORK" --list "$2" --epochs 1 --compute-only "${REPLAY[@]}" --json \
    >"$WORK/$1.lb.json"
}

run_direct() {  # TAG N DATA MPREFIX
  pfs_remount
  pfs_memlimit $(((PAGECACHE + BENCH_MIB * $2) * MIB))
  local d0; d0=$(dev_bytes)
  log "$1 direct: $2 reader(s) over $3"
  bench_ranks "$1.direct" "$2" "$3" "$4"
  echo $(($(dev_bytes) - d0)) >"$WORK/$1.direct.dev"
}

# run_clairfs TAG N DATA MPREFIX: starts clairfs (N > 1: under mpiexec), registers each rank's
# manifest, replays, records stats, plan, daemon peak RSS, device bytes; stops it again.
run_clairfs() {
  local tag=$1 n=$2 data=$3 m=$4 r i d0 pid mnt="$WORK/mnt-{rank}" cfg="$WORK/$1.yaml" cached ssd_files
  pfs_remount
  pfs_memlimit $(((PAGECACHE + (BENCH_MIB + RAM + STAGING + OVERHEAD) * n) * MIB))
  rm -rf "$WORK"/ssd-*
  cat >"$cfg" <<EOF
cache:
  tiers:
    - {kind: ram, capacity: ${RAM}MiB, threads: 2}
    - {kind: ssd, capacity: ${SSD}MiB, threads: 2, dir: "$WORK/ssd-{rank}"}
  staging: {capacity: ${STAGING}MiB, threads: 4}
EOF
  for ((r = 0; r < n; r++)); do mkdir -p "${mnt//\{rank\}/$r}"; MOUNTS+=("${mnt//\{rank\}/$r}"); done
  if ((n == 1)); then
    sed -i "s|{rank}|0|" "$cfg"
    (pfs_exec "$CLAIRFS_BIN" -f -c "$cfg" "$data" "$WORK/mnt-0" >"$WORK/$tag.log" 2>&1) &
  else
    printf 'cluster: {enabled: true%s}\n' "$(cluster_key_entry "$CLAIRFS_BIN" "$WORK/$tag.key")" >>"$cfg"
    (pfs_exec mpiexec -disable-auto-cleanup -n "$n" "$CLAIRFS_BIN" --cluster -f -c "$cfg" "$data" "$mnt" >"$WORK/$tag.log" 2>&1) &
  fi
  pid=$!
  PIDS+=("$pid")
  for ((r = 0; r < n; r++)); do wait_mounted "$WORK/mnt-$r" "$pid" "$WORK/$tag.log" "$tag: clairfs"; done
  d0=$(dev_bytes)
  for ((r = 0; r < n; r++)); do
    cat "$m.m$r" >"$WORK/mnt-$r/.clairfs/manifest"
    [[ -z $(cat "$WORK/mnt-$r/.clairfs/errors") ]] || die "$tag: manifest rejected: $(cat "$WORK/mnt-$r/.clairfs/errors")"
  done
  # Under mpiexec the placement waits for every rank's plan: read the plans once it is made.
  for ((r = 0; r < n && n > 1; r++)); do
    for ((i = 0; i < 300; i++)); do
      [[ $(jq -r '.cluster.state' "$WORK/mnt-$r/.clairfs/plan") == placed ]] && break
      sleep 0.1
    done
  done
  for ((r = 0; r < n; r++)); do cat "$WORK/mnt-$r/.clairfs/plan" >"$WORK/$tag.plan.r$r.json"; done
  # Predicted backing bytes: the sum of the nodes' plans, or the cluster's prediction.
  for ((r = 0; r < n; r++)); do cat "$WORK/$tag.plan.r$r.json"; done | jq -s -c '{
    files: map(.files), bytes: map(.bytes), tiers: map([.tiers[] | {name, files, bytes}]),
    staging: map(.staging), from_peers: map(.from_peers.files // 0),
    predicted_backing_bytes: (if .[0].cluster then .[0].cluster.predicted_cluster_backing_bytes
                              else (map(.predicted_backing_bytes) | add) end)}' \
    >"$WORK/$tag.clairfs.plan"
  log "$tag clairfs: $n rank(s), plan (per rank) $(cat "$WORK/$tag.clairfs.plan")"
  bench_ranks "$tag.clairfs" "$n" "$mnt" "$m"
  echo $(($(dev_bytes) - d0)) >"$WORK/$tag.clairfs.dev"
  for ((r = 0; r < n; r++)); do cat "$WORK/mnt-$r/.clairfs/stats"; done | jq -s -c '{
    served: (map(.served | to_entries[]) | group_by(.key)
      | map({key: .[0].key, value: (map(.value) | add)}) | from_entries),
    backing_bytes: (map(.backing_bytes) | add), stall_ns: (map(.stall_ns) | add),
    errors: (map(.errors | to_entries[] | select(.value > 0)) | from_entries)}' >"$WORK/$tag.clairfs.stats"
  # Peak RSS of the daemon(s): every clairfs process in the memory group.
  for i in $(cat "$PFS_MEMCG/cgroup.procs"); do
    # Only the daemons: the control mount's auto_unmount helper (fusermount3) is there too.
    if [[ $(cat "/proc/$i/comm" 2>/dev/null) == clairfs ]]; then
      awk '/VmHWM/ {print $2}' "/proc/$i/status"
    fi
  done | awk '{s += $1} END {printf "%.0f\n", s / 1024}' >"$WORK/$tag.clairfs.rss"
  pfs_oom_kills >"$WORK/$tag.clairfs.oom"
  # What the page cache held of the SSD tiers' files at the end (for predict_report.py).
  read -r cached ssd_files < <(page_cached "$WORK"/ssd-*)
  echo "{\"ssd\": {\"cached\": $cached, \"files\": $ssd_files}}" >"$WORK/$tag.pagecache.json"
  teardown  # unmount, stop the daemon(s)
  rm -rf "$WORK"/ssd-*
}

# scenario ID: the three runs for one scenario (3: N ranks, others: one).
scenario() {
  local s=$1 d=${DATA_OF[$1]} n=1 r
  if ((s == 3)); then
    n=$RANKS
    if ! command -v mpiexec >/dev/null; then
      echo "skipped: mpiexec is not on PATH" >"$WORK/s3.skip"
    elif ! "$CLAIRFS_BIN" --help 2>&1 | grep -qiE 'mpi|cluster|rank' &&
      ! ldd "$CLAIRFS_BIN" 2>/dev/null | grep -q 'libmpi'; then
      echo "skipped: this clairfs has no MPI peer tier (its --help does not mention MPI and it does not link libmpi)" >"$WORK/s3.skip"
    fi
    if [[ -f $WORK/s3.skip ]]; then
      log "scenario 3: $(cat "$WORK/s3.skip")"
      return 0
    fi
    for ((r = 0; r < n; r++)); do
      "$PYTHON" "$REPO/tools/make_manifest.py" "$PFS_MNT/$d" --epochs "$EPOCHS" --seed 1 \
        --rank "$r" --world "$n" >"$WORK/s3.m$r"
    done
  else
    cp "$WORK/data-$d.m0" "$WORK/s$s.m0"
  fi
  log "scenario $s: dataset $d (${BYTES_OF[$d]} bytes), $n rank(s)"
  lower_bound "s$s" "$WORK/s$s.m0"
  run_direct "s$s" "$n" "$PFS_MNT/$d" "$WORK/s$s"
  run_clairfs "s$s" "$n" "$PFS_MNT/$d" "$WORK/s$s"
}

for s in 1 2 3 4; do
  want $s || continue
  scenario $s
  if [[ -n $KEEP && -f $WORK/s$s.clairfs.json ]]; then
    cp "$WORK/s$s.lb.json" "$WORK/s$s.clairfs.json" "$WORK"/s$s.plan.r*.json \
      "$WORK/s$s.pagecache.json" "$KEEP/"
  fi
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report ----------------------------------------------------------------------------------
# shellcheck source=tools/bench/scenarios_report.sh
source "$(dirname "${BASH_SOURCE[0]}")/scenarios_report.sh"
report >"$WORK/report.md"
cat "$WORK/report.md"
if [[ -n $OUT ]]; then cp "$WORK/report.md" "$OUT"; log "report written to $OUT"; fi
if [[ -n $DOCS ]]; then splice_docs "$DOCS" "$WORK/report.md"; log "report spliced into $DOCS"; fi
if [[ -n $PLOTS ]]; then
  plot_figures "$PLOTS/scenarios"
elif [[ -n $OUT ]]; then
  plot_figures "${OUT%.md}"
else
  log "figures: not drawn (give --out FILE or --plots DIR to keep them)"
fi
