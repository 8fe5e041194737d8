#!/usr/bin/env bash
# fuse_compare.sh: read throughput of one small-file dataset, side by side, in one run:
#   native   the dataset directory itself, page cache warm (with --drop-caches: the dataset's
#            disk, then also a row "native (page cache)" read with the page cache warm)
#   ceiling  build/tools/bench/clairfs-fuse-ceiling over the dataset: the smallest FUSE file
#            system, serving the dataset from memory with clairfs's mount options and threads;
#            the limit of a FUSE READ here, and the "ratio to ceiling" of every FUSE row
#   clairfs  build/daemon/clairfs over the dataset, RAM tier filled from a manifest of one epoch
#            per pass below (warm-up, then R per thread count), each in the read order
#            (one row group per --clairfs-bin entry and --clairfs-variants entry)
#   mergerfs one-branch mergerfs over the dataset
#   bindfs   bindfs over the dataset
#   native (again) at the end: its ratio to the first native rows shows drift (other load)
# Each source gets one warm-up pass (4 threads, --verify: its checksum must equal native's),
# then for every thread count one `clairfs-bench --epochs R` run; each epoch is one repetition
# and the table shows the median over the R epochs. With --drop-caches N (root only) each
# repetition is a run of its own after `echo N > /proc/sys/vm/drop_caches` (1: page cache;
# 3: also dentries and inodes), so every read reaches the source's file system or daemon.
# For a FUSE source the table also shows its daemon's CPU time (user + system, from
# /proc/PID/stat) per 100,000 files read over the timed repetitions, and where the daemon counts
# its READs (the ceiling, clairfs's stats read_requests) the READs per file and CPU per 100,000
# READs.
#
# Dataset: N files (default 20000) of exactly SIZE bytes (default 112640 = 110 KiB), content from
# a fixed-seed PRNG, in 100 class directories (train/cNNN/NNNNNNN.bin, ImageFolder layout); the
# read order is one fixed-seed shuffle of all files, the same for every source.
#
# Usage: tools/bench/fuse_compare.sh [--files N] [--size BYTES] [--repeats R] [--threads "1 4"]
#          [--sources native,ceiling,clairfs,mergerfs,bindfs] [--clairfs-variants "default,..."]
#          [--drop-caches 0|1|3] [--tmp DIR] [--out FILE] [--clairfs-bin PATH|LABEL=PATH,...]
#          [--ceiling-bin PATH] [--bench-bin PATH]
# --clairfs-bin: one binary, or several as LABEL=PATH (e.g. main=build/daemon/clairfs,
#   before=../old/build/daemon/clairfs): each is measured in turn, its rows named by its label.
# Env: CLAIRFS_BIN (default build/daemon/clairfs), BENCH_BIN (default
#   build/tools/bench/clairfs-bench), CEILING_BIN (default build/tools/bench/clairfs-fuse-ceiling),
#   all relative to this checkout, CEILING_ARGS (more arguments for the ceiling, e.g.
#   "--threads 4 --no-clone-fd"; split on spaces), PYTHON (default
#   /usr/bin/python3), WARM_TIMEOUT (seconds to wait for clairfs's RAM tier, default 600).
# Variants: comma separated; each is "default" or '+'-joined overrides of the clairfs config:
#   keep_cache=BOOL  -> fuse.keep_cache        timeouts=S     -> fuse.entry_timeout, attr_timeout
#   entry_timeout=S  -> fuse.entry_timeout     attr_timeout=S -> fuse.attr_timeout
#   fuse_threads=N   -> fuse.threads           ram_threads=N  -> cache.tiers[0].threads
#   clone_fd=BOOL    -> fuse.clone_fd
#   open_mode=M      -> fuse.open_mode (per_open, none)
#   stat_ahead=N     -> fuse.stat_ahead (0: each read that reaches clairfs stats its file)
#   revalidate_interval=S -> fuse.revalidate_interval   immutable=BOOL -> fuse.immutable
#   e.g. --clairfs-variants "default,keep_cache=false,timeouts=0,keep_cache=false+timeouts=0"
# Report (markdown) on stdout, progress on stderr; --out FILE also writes the report to FILE.
# Everything set up (mounts, daemons, the temp dir) is torn down on exit, error, INT and TERM.
set -euo pipefail

FILES=20000
SIZE=112640
REPEATS=3
THREADS="1 4"
SOURCES="native,ceiling,clairfs,mergerfs,bindfs"
VARIANTS="default"
DROP=0
TMPBASE=/var/tmp
OUT=""
REPO=$(cd "$(dirname "$0")/../.." && pwd)  # default binaries: build/ of this checkout
CLAIRFS_BIN=${CLAIRFS_BIN:-$REPO/build/daemon/clairfs}
BENCH_BIN=${BENCH_BIN:-$REPO/build/tools/bench/clairfs-bench}
CEILING_BIN=${CEILING_BIN:-$REPO/build/tools/bench/clairfs-fuse-ceiling}
PYTHON=${PYTHON:-/usr/bin/python3}
WARM_TIMEOUT=${WARM_TIMEOUT:-600}
CLASSES=100
SEED=20260101
# Options for the FUSE peers: page cache kept across opens and lookups/attributes cached as long
# as clairfs's defaults (3600 s), read-only like clairfs, multithreaded. Nothing skips data
# copies or lies about content, so every byte still passes through the daemon once.
MERGERFS_OPTS="ro,cache.files=auto-full,cache.attr=3600,cache.entry=3600,cache.negative_entry=3600"
MERGERFS_OPTS+=",cache.readdir=true,category.search=ff,fsname=mergerfs-bench"
BINDFS_OPTS="ro,kernel_cache,entry_timeout=3600,attr_timeout=3600,negative_timeout=3600"

NAME=fuse_compare
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

declare -A OPTIONS=([--files]=FILES [--size]=SIZE [--repeats]=REPEATS [--threads]=THREADS
  [--sources]=SOURCES [--clairfs-variants]=VARIANTS [--drop-caches]=DROP [--tmp]=TMPBASE
  [--out]=OUT [--clairfs-bin]=CLAIRFS_BIN [--ceiling-bin]=CEILING_BIN [--bench-bin]=BENCH_BIN)
parse_options "$@"
THREADS=${THREADS//,/ }  # --threads 1,4: a list
for n in "$FILES" "$SIZE" "$REPEATS" $THREADS; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "not a positive integer: '$n'"
done
[[ $DROP =~ ^[013]$ ]] || die "--drop-caches: 0, 1 or 3, not '$DROP'"
[[ $DROP == 0 || $(id -u) == 0 ]] || die "--drop-caches needs root"
[[ -x $BENCH_BIN ]] || die "bench binary not found: $BENCH_BIN (build it or set BENCH_BIN)"
for tool in jq fusermount3 "$PYTHON"; do command -v "$tool" >/dev/null || die "missing $tool"; done
BENCH_BIN=$(realpath "$BENCH_BIN")
has_source() { [[ ",$SOURCES," == *",$1,"* ]]; }


# clairfs_config VARIANT FILE: writes the YAML for one variant (RAM tier 1.25x the dataset).
clairfs_config() {
  local fuse="" ram_threads="" item key val
  if [[ $1 != default ]]; then
    IFS='+' read -ra items <<<"$1"
    for item in "${items[@]}"; do
      key=${item%%=*} val=${item#*=}
      [[ $item == *=* && -n $val ]] || die "bad variant item '$item'"
      case "$key" in
        keep_cache) fuse+="  keep_cache: $val"$'\n' ;;
        timeouts) fuse+="  entry_timeout: $val"$'\n'"  attr_timeout: $val"$'\n' ;;
        entry_timeout|attr_timeout) fuse+="  $key: $val"$'\n' ;;
        fuse_threads) fuse+="  threads: $val"$'\n' ;;
        clone_fd) fuse+="  clone_fd: $val"$'\n' ;;
        open_mode) fuse+="  open_mode: $val"$'\n' ;;
        stat_ahead) fuse+="  stat_ahead: $val"$'\n' ;;
        revalidate_interval|immutable) fuse+="  $key: $val"$'\n' ;;
        ram_threads) ram_threads="      threads: $val"$'\n' ;;
        *) die "unknown variant key '$key' in '$1'" ;;
      esac
    done
  fi
  {
    [[ -n $fuse ]] && printf 'fuse:\n%s' "$fuse"
    printf 'cache:\n  tiers:\n    - kind: ram\n      capacity: %dMiB\n%s' \
      $((DATA_BYTES * 5 / 4 / 1048576 + 64)) "$ram_threads"
  } >"$2"
}

DATA_BYTES=$((FILES * SIZE))
IFS=',' read -ra VARIANT_LIST <<<"$VARIANTS"
for v in "${VARIANT_LIST[@]}"; do clairfs_config "$v" /dev/null; done  # dies on a bad variant

WORK=$(mktemp -d "$TMPBASE/clairfs-compare.XXXXXX")
DATA=$WORK/data MNT=$WORK/mnt LIST=$WORK/list.txt
mkdir -p "$DATA" "$MNT"
# Run snapshots of the binaries, so a rebuild of build/ during the run cannot mix versions.
BIN_INFO="clairfs-bench copied from $BENCH_BIN (built $(built "$BENCH_BIN"))"
cp "$BENCH_BIN" "$WORK/clairfs-bench"
BENCH_BIN=$WORK/clairfs-bench
# The clairfs builds: LABEL=PATH entries, or one PATH (label "clairfs"). CLAIRFS_LABELS[i] names
# CLAIRFS_BINS[i], its snapshot ("" when not built: pending rows).
CLAIRFS_LABELS=() CLAIRFS_BINS=()
IFS=',' read -ra bin_items <<<"$CLAIRFS_BIN"
for item in "${bin_items[@]}"; do
  label=clairfs path=$item
  if [[ $item == *=* ]]; then label=${item%%=*} path=${item#*=}; fi
  [[ $label =~ ^[A-Za-z0-9._-]+$ ]] || die "bad clairfs label '$label' (letters, digits, ._-)"
  CLAIRFS_LABELS+=("$label")
  if [[ -x $path ]]; then
    BIN_INFO+=", $label: $("$path" --version 2>&1 | head -1) copied from"
    BIN_INFO+=" $(realpath "$path") (built $(built "$path"))"
    cp "$path" "$WORK/clairfs-$label"
    CLAIRFS_BINS+=("$WORK/clairfs-$label")
  else
    CLAIRFS_BINS+=("")
  fi
done
if [[ -x $CEILING_BIN ]]; then
  BIN_INFO+=", clairfs-fuse-ceiling copied from $(realpath "$CEILING_BIN")"
  BIN_INFO+=" (built $(built "$CEILING_BIN"))"
  cp "$CEILING_BIN" "$WORK/clairfs-fuse-ceiling"
  CEILING_BIN=$WORK/clairfs-fuse-ceiling
fi
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
FSTYPE=$(findmnt -no FSTYPE -T "$WORK" || stat -f -c %T "$WORK")

# ---- dataset ---------------------------------------------------------------------------------
log "writing $FILES files of $SIZE bytes to $DATA ($FSTYPE)"
run "$PYTHON" "$(dirname "${BASH_SOURCE[0]}")/flat_dataset.py" "$DATA" "$LIST" "$FILES" "$SIZE" "$CLASSES" "$SEED"

# ---- measurement -----------------------------------------------------------------------------
ROWS=() NOTES=() SETUP=()
declare -A NATIVE_FPS=() CEILING_FPS=()
NATIVE_SUM=""
JQ_MEDIAN='def median: sort | if length % 2 == 1 then .[length / 2 | floor]
  else (.[length / 2 - 1] + .[length / 2]) / 2 end;'


# cpu_seconds PID: user + system CPU seconds of process PID so far ("" if it is gone).
cpu_seconds() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  # After "pid (comm) " the fields are numbered from state (1): utime 12, stime 13.
  awk -v tck="$(getconf CLK_TCK)" '{ printf "%.3f", ($12 + $13) / tck }' <<<"${stat##*) }"
}

# timed ARGS...: the timed repetitions of one row into $WORK/bench.json: one run of
# --epochs REPEATS, or with --drop-caches one run per repetition after a drop.
timed() {
  local k
  if [[ $MEASURE_DROP == 0 ]]; then
    run timeout 900 "$@" --epochs "$REPEATS" >"$WORK/bench.json"
    return
  fi
  for ((k = 0; k < REPEATS; k++)); do
    sync
    echo "$MEASURE_DROP" >/proc/sys/vm/drop_caches
    run timeout 900 "$@" --epochs 1 >"$WORK/bench-$k.json" || return 1
  done
  jq -s '{epochs: [.[].epochs[]]}' "$WORK"/bench-[0-9]*.json >"$WORK/bench.json"
  rm -f "$WORK"/bench-[0-9]*.json
}

DAEMON_PID=""  # the FUSE daemon measured now (start_fuse), "" for native
MEASURE_DROP=$DROP  # the drop before each timed repetition of the rows measured now
# daemon_reads: the READs the daemon measured now has answered so far ("" if it does not say).
READS_OF=none
daemon_reads() {
  case $READS_OF in
    ceiling) "$PYTHON" -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.ceiling.reads").decode())' \
      "$MNT" 2>/dev/null || true ;;
    clairfs) jq -r '.read_requests // empty' "$MNT/.clairfs/stats" 2>/dev/null || true ;;
  esac
}

# measure SOURCE ROOT: warm-up pass with checksum, then one row per thread count.
measure() {
  local source=$1 root=$2 json=$WORK/bench.json sum same t fps mbs p50 p99 errs ratio
  local cpu0 cpu1 cpu reads0 reads1 per_file cpu_reads to_ceiling
  local -a base=("$BENCH_BIN" --root "$root" --list "$LIST") args
  args=("${base[@]}" --threads 4 --verify --json)
  log "$source: warm-up: ${args[*]}"
  run timeout 900 "${args[@]}" >"$json" ||
    die "$source: warm-up pass failed: $(jq -c '.epochs[0].first_error' "$json" 2>/dev/null)"
  sum=$(jq -r '.epochs[0].checksum' "$json")
  [[ $source == native ]] && NATIVE_SUM=$sum
  same=$([[ $sum == "$NATIVE_SUM" ]] && echo yes || echo "NO ($sum)")
  for t in $THREADS; do
    args=("${base[@]}" --threads "$t" --json)
    log "$source: ${args[*]} (drop_caches $DROP)"
    cpu0=$(if [[ -n $DAEMON_PID ]]; then cpu_seconds "$DAEMON_PID"; fi)
    reads0=$(daemon_reads)
    timed "${args[@]}" ||
      die "$source: bench failed: $(jq -c '[.epochs[].first_error]' "$json" 2>/dev/null)"
    cpu1=$(if [[ -n $DAEMON_PID ]]; then cpu_seconds "$DAEMON_PID"; fi)
    reads1=$(daemon_reads)
    cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v n=$((FILES * REPEATS)) \
      'BEGIN { if (a != "" && b != "") printf "%.2f", (b - a) * 100000 / n; else printf "n/a" }')
    per_file=$(awk -v a="$reads0" -v b="$reads1" -v n=$((FILES * REPEATS)) \
      'BEGIN { if (a != "" && b != "") printf "%.2f", (b - a) / n; else printf "n/a" }')
    cpu_reads=$(awk -v a="$cpu0" -v b="$cpu1" -v r0="$reads0" -v r1="$reads1" \
      'BEGIN { if (a != "" && b != "" && r0 != "" && r1 > r0)
                 printf "%.2f", (b - a) * 100000 / (r1 - r0); else printf "n/a" }')
    read -r fps mbs p50 p99 errs < <(jq -r "$JQ_MEDIAN"' [([.epochs[].files_per_s] | median),
        ([.epochs[].mb_per_s] | median), ([.epochs[].p50_us] | median),
        ([.epochs[].p99_us] | median), ([.epochs[].errors] | add)] | @tsv' "$json")
    [[ $source == native ]] && NATIVE_FPS[$t]=$fps
    [[ $source == ceiling ]] && CEILING_FPS[$t]=$fps
    ratio=$(awk -v a="$fps" -v b="${NATIVE_FPS[$t]:-0}" \
      'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }')
    to_ceiling=$(awk -v a="$fps" -v b="${CEILING_FPS[$t]:-0}" \
      'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }')
    # shellcheck disable=SC2016  # backticks are markdown
    ROWS+=("$(printf '| %s | %s | %.0f | %.1f | %s | %s | %.1f | %.1f | %s | %s | %s | %s | `%s` |' \
      "$source" "$t" "$fps" "$mbs" "$ratio" "$to_ceiling" "$p50" "$p99" "$per_file" "$cpu" \
      "$cpu_reads" "$same" "${args[*]}")")
    log "$source threads=$t: $(printf '%.0f' "$fps") files/s, ratio $ratio," \
      "to ceiling $to_ceiling, errors $errs"
  done
}

pending() {  # pending SOURCE REASON: placeholder rows
  local t
  for t in $THREADS; do ROWS+=("| $1 | $t | pending | pending | pending | | | | | | | | $2 |"); done
}

# start_fuse NAME CMD...: runs a foreground FUSE daemon in the background, waits for $MNT.
start_fuse() {
  local name=$1 i
  shift
  log "$name: mount: $*"
  SETUP+=("- $name: \`$*\`")
  "$@" >"$WORK/${name//[^A-Za-z0-9_]/_}.log" 2>&1 &
  PIDS+=($!)
  DAEMON_PID=$!
  MOUNTS+=("$MNT")
  wait_mounted "$MNT" "${PIDS[-1]}" "$WORK/${name//[^A-Za-z0-9_]/_}.log" "$name"
}

# Waits until the RAM tier holds the whole dataset; returns 1 on timeout.
wait_ram_warm() {
  local stats i
  for ((i = 0; i < WARM_TIMEOUT * 5; i++)); do
    stats=$(cat "$MNT/.clairfs/stats" 2>/dev/null) || stats="{}"
    if jq -e --argjson n "$FILES" --argjson b "$DATA_BYTES" \
      '(.prefetch.fetches // 0) >= $n or (.ram_bytes // 0) >= $b' <<<"$stats" \
      >/dev/null 2>&1; then
      log "clairfs: RAM tier warm after $((i / 5)) s: $(jq -c '{prefetch, ram_bytes}' <<<"$stats")"
      return 0
    fi
    ((i % 50 == 0)) &&
      log "clairfs: waiting for RAM tier: $(jq -c '{prefetch, ram_bytes}' <<<"$stats" 2>/dev/null)"
    sleep 0.2
  done
  return 1
}

nthreads=$(wc -w <<<"$THREADS")
PLANNED_EPOCHS=$((1 + nthreads * REPEATS))
has_source native || die "native is required (the ratios are relative to it)"
log "native: page cache warm-up"
measure native "$DATA"
if [[ $DROP != 0 ]]; then  # the page cache warm after native's timed runs: its own warm-up
  MEASURE_DROP=0
  measure "native (page cache)" "$DATA"
  MEASURE_DROP=$DROP
fi

if has_source ceiling; then
  [[ -x $CEILING_BIN ]] || die "ceiling binary not found: $CEILING_BIN (build it or set CEILING_BIN)"
  read -ra ceiling_args <<<"${CEILING_ARGS:-}"
  start_fuse ceiling "$CEILING_BIN" "${ceiling_args[@]}" "$DATA" "$MNT"
  READS_OF=ceiling
  measure ceiling "$MNT"
  READS_OF=none
  teardown
fi

for b in "${!CLAIRFS_LABELS[@]}"; do
  has_source clairfs || break
  label=${CLAIRFS_LABELS[b]} bin=${CLAIRFS_BINS[b]}
  name=$([[ $label == clairfs ]] && echo clairfs || echo "clairfs $label")
  if [[ -z $bin ]]; then
    for v in "${VARIANT_LIST[@]}"; do pending "$name ($v)" "binary of $label not built yet"; done
  else
    for v in "${VARIANT_LIST[@]}"; do
      cfg=$WORK/clairfs-$(tr -c 'A-Za-z0-9_\n' '_' <<<"$v").yaml
      clairfs_config "$v" "$cfg"
      start_fuse "$name ($v)" "$bin" -f -c "$cfg" "$DATA" "$MNT"
      SETUP+=("  config $cfg:" '  ```yaml' "$(sed 's/^/  /' "$cfg")" '  ```')
      # The plan is the job's: one epoch per pass the benchmark makes (the warm-up, then
      # REPEATS per thread count), each in the list's order.
      for ((e = 0; e < PLANNED_EPOCHS; e++)); do echo "#epoch"; cat "$LIST"; done \
        >"$MNT/.clairfs/manifest" ||
        die "manifest rejected: $(cat "$MNT/.clairfs/errors" 2>/dev/null)"
      wait_ram_warm ||
        die "$name ($v): RAM tier not warm after $WARM_TIMEOUT s: $(cat "$MNT/.clairfs/stats")"
      READS_OF=clairfs
      measure "$name ($v)" "$MNT"
      READS_OF=none
      stats=$(jq -c '{file_reads, read_requests, served, backing_reads, unplanned_file_reads,
        ram_bytes, stall_ns, stat_ahead, metadata, fresh, errors}' "$MNT/.clairfs/stats" 2>/dev/null) ||
        stats=unavailable
      NOTES+=("- $name ($v): \`$stats\`")
      teardown
    done
  fi
done

if has_source mergerfs; then
  start_fuse mergerfs mergerfs -f -o "$MERGERFS_OPTS" "$DATA" "$MNT"
  measure mergerfs "$MNT"
  teardown
fi

if has_source bindfs; then
  start_fuse bindfs bindfs -f --multithreaded -o "$BINDFS_OPTS" "$DATA" "$MNT"
  measure bindfs "$MNT"
  teardown
fi

# Native once more: its ratio to the first native rows shows how much the machine drifted.
DAEMON_PID=""
measure "native (again)" "$DATA"

# ---- report ----------------------------------------------------------------------------------
report() {
  echo "Dataset: $FILES files x $SIZE bytes (fixed size; $((DATA_BYTES / 1000000)) MB)," \
    "$CLASSES class directories, $FSTYPE under $TMPBASE; read order: one" \
    "fixed-seed shuffle, same for every source."
  if [[ $DROP == 0 ]]; then
    echo "Each row: median of $REPEATS repetitions (epochs of one clairfs-bench run) after one" \
      "4-thread warm-up pass (page cache warm);"
  else
    echo "Each row: median of $REPEATS repetitions, each a clairfs-bench run of one epoch after" \
      "\`echo $DROP > /proc/sys/vm/drop_caches\`, after one 4-thread warm-up pass;"
  fi
  echo "ratio = files/s / native (or ceiling) files/s at the same thread count; daemon CPU =" \
    "user + system seconds of the FUSE daemon per 100,000 files (or READs) over the timed" \
    "repetitions; READs/file = READ requests the daemon answered per file read (n/a: it does" \
    "not count them); 'same bytes' = XXH3 sum of the warm-up pass equals native's."
  echo
  echo "| source | threads | files/s | MB/s | ratio to native | ratio to ceiling | p50 us |" \
    "p99 us | READs/file | daemon CPU s / 100k files | daemon CPU s / 100k READs |" \
    "same bytes | command |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
  echo
  echo "Mounts:"
  ((${#SETUP[@]})) && printf '%s\n' "${SETUP[@]}"
  if ((${#NOTES[@]})); then
    echo
    echo "clairfs stats after the runs:"
    printf '%s\n' "${NOTES[@]}"
  fi
  echo
  echo "Machine: nproc $(nproc), kernel $(uname -r)," \
    "$(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo)," \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), date" \
    "$(date -u '+%Y-%m-%d %H:%M UTC'), load average before the run $LOAD_START (during the" \
    "run it includes the benchmark's own threads)."
  echo "Versions: $(mergerfs --version 2>&1 | head -1), $(bindfs --version 2>&1 | head -1)," \
    "fusermount3 $(fusermount3 --version 2>&1 | awk '{print $NF}'); $BIN_INFO."
}
report
if [[ -n $OUT ]]; then report >"$OUT"; log "report written to $OUT"; fi
