#!/usr/bin/env bash
# tier_bench.sh: three shuffled epochs over a dataset larger than clairfs's RAM tier but smaller
# than RAM + SSD, read through clairfs (RAM tier, SSD tier, staging window) and natively.
#   native   the dataset directory itself, page cache warm (read once before the measured run)
#   clairfs  build/daemon/clairfs over the dataset with tiers [ram, ssd] (SSD tier in a fresh
#            RocksDB directory under --tmp), the 3-epoch manifest registered, tiers filled
# Both are read by one `clairfs-bench --list MANIFEST --threads T --verify --json` run, which
# reads each '#epoch' section as one epoch; the per-epoch XXH3 sums must be equal.
#
# Dataset: tools/make_dataset.py --files N --mean-kb KB --sigma 0.5 --classes 100 --seed 1
# (lognormal sizes, default 6000 files of 110 KB on average, about 660 MB); manifest:
# tools/make_manifest.py DATA --epochs 3 --seed 1.
#
# Usage: tools/bench/tier_bench.sh [--files N] [--mean-kb KB] [--sigma S] [--threads T]
#          [--ram SIZE] [--ssd SIZE] [--staging SIZE] [--keep-cache BOOL] [--no-warm]
#          [--tmp DIR] [--out FILE] [--clairfs-bin PATH] [--bench-bin PATH]
# Defaults: 6000 files, 110 KB, sigma 0.5, 4 threads, RAM 256MiB, SSD 1GiB, staging 64MiB,
#   keep_cache false (every epoch's bytes come from clairfs's tiers, not the kernel's page
#   cache of the mount), tmp /var/tmp. --no-warm starts reading right after the manifest is
#   registered instead of waiting until the RAM and SSD tiers are filled.
# Env: CLAIRFS_BIN, BENCH_BIN (default build/daemon/clairfs, build/tools/bench/clairfs-bench of
#   this checkout), PYTHON (default /usr/bin/python3), WARM_TIMEOUT (seconds, default 600).
# Report (markdown) on stdout, progress on stderr; --out FILE also writes the report to FILE.
# Everything set up (the mount, the daemon, the temp dir) is torn down on exit, error, INT, TERM.
set -euo pipefail

FILES=6000
MEAN_KB=110
SIGMA=0.5
THREADS=4
RAM=256MiB
SSD=1GiB
STAGING=64MiB
KEEP_CACHE=false
WARM=1
TMPBASE=/var/tmp
OUT=""
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CLAIRFS_BIN=${CLAIRFS_BIN:-$REPO/build/daemon/clairfs}
BENCH_BIN=${BENCH_BIN:-$REPO/build/tools/bench/clairfs-bench}
PYTHON=${PYTHON:-/usr/bin/python3}
WARM_TIMEOUT=${WARM_TIMEOUT:-600}
EPOCHS=3

NAME=tier_bench
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

declare -A OPTIONS=([--files]=FILES [--mean-kb]=MEAN_KB [--sigma]=SIGMA [--threads]=THREADS
  [--ram]=RAM [--ssd]=SSD [--staging]=STAGING [--keep-cache]=KEEP_CACHE [--no-warm]=WARM=0
  [--tmp]=TMPBASE [--out]=OUT [--clairfs-bin]=CLAIRFS_BIN [--bench-bin]=BENCH_BIN)
parse_options "$@"
[[ $FILES =~ ^[1-9][0-9]*$ && $THREADS =~ ^[1-9][0-9]*$ ]] || die "--files/--threads: positive integers"
[[ $KEEP_CACHE == true || $KEEP_CACHE == false ]] || die "--keep-cache: true or false"
[[ -x $CLAIRFS_BIN ]] || die "clairfs binary not found: $CLAIRFS_BIN (build it or set CLAIRFS_BIN)"
[[ -x $BENCH_BIN ]] || die "bench binary not found: $BENCH_BIN (build it or set BENCH_BIN)"
for tool in jq fusermount3 "$PYTHON"; do command -v "$tool" >/dev/null || die "missing $tool"; done

MNT="" DAEMON=""

WORK=$(mktemp -d "$TMPBASE/clairfs-tier.XXXXXX")
DATA=$WORK/data MNT=$WORK/mnt SSD_DIR=$WORK/ssd LIST=$WORK/manifest.txt CFG=$WORK/clairfs.yaml
mkdir -p "$DATA" "$MNT"
# Snapshots of the binaries: a rebuild of build/ during the run cannot mix versions.
BIN_INFO="$("$CLAIRFS_BIN" --version 2>&1 | head -1) from $(realpath "$CLAIRFS_BIN")"
BIN_INFO+=" (built $(built "$CLAIRFS_BIN")), clairfs-bench built $(built "$BENCH_BIN")"
snapshot_binaries
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
FSTYPE=$(findmnt -no FSTYPE -T "$WORK" | tail -1)

# ---- dataset and manifest --------------------------------------------------------------------
log "dataset: $FILES files, mean $MEAN_KB KB, sigma $SIGMA in $DATA ($FSTYPE)"
run "$PYTHON" "$REPO/tools/make_dataset.py" "$DATA" --files "$FILES" --classes 100 \
  --mean-kb "$MEAN_KB" --sigma "$SIGMA" --seed 1 >&2
"$PYTHON" "$REPO/tools/make_manifest.py" "$DATA" --epochs "$EPOCHS" --seed 1 >"$LIST"
log "dataset: sync (its writeback must not overlap the measured reads)"
run sync -f "$DATA"
DATA_BYTES=$(find "$DATA" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
log "dataset: $DATA_BYTES bytes"

# bench ROOT OUTFILE: one clairfs-bench run over the 3 epochs of the manifest.
BENCH_ARGS=(--list "$LIST" --threads "$THREADS" --verify --json)
bench() {
  log "bench: $BENCH_BIN --root $1 ${BENCH_ARGS[*]}"
  run timeout 1800 "$BENCH_BIN" --root "$1" "${BENCH_ARGS[@]}" >"$2" ||
    die "bench over $1 failed: $(jq -c '[.epochs[].first_error]' "$2" 2>/dev/null)"
}

# ---- native ----------------------------------------------------------------------------------
log "native: page cache warm-up (one pass)"
run timeout 1800 "$BENCH_BIN" --root "$DATA" --list "$LIST" --threads "$THREADS" --epochs 1 \
  >/dev/null || die "native warm-up failed"
bench "$DATA" "$WORK/native.json"

# ---- clairfs ---------------------------------------------------------------------------------
cat >"$CFG" <<EOF
fuse:
  keep_cache: $KEEP_CACHE
cache:
  tiers:
    - kind: ram
      capacity: $RAM
      threads: 2
    - kind: ssd
      capacity: $SSD
      threads: 2
      dir: $SSD_DIR
  staging:
    capacity: $STAGING
EOF
log "clairfs: mount: $CLAIRFS_BIN -f -c $CFG $DATA $MNT"
"$CLAIRFS_BIN" -f -c "$CFG" "$DATA" "$MNT" >"$WORK/clairfs.log" 2>&1 &
DAEMON=$!
PIDS+=("$DAEMON")
MOUNTS+=("$MNT")
wait_mounted "$MNT" "$DAEMON" "$WORK/clairfs.log"
cat "$LIST" >"$MNT/.clairfs/manifest"
[[ -z $(cat "$MNT/.clairfs/errors") ]] || die "manifest rejected: $(cat "$MNT/.clairfs/errors")"
PLAN=$(jq -c '{files, bytes, tiers, staging, predicted_backing_bytes}' "$MNT/.clairfs/plan")
log "clairfs: plan $PLAN"
TIER_FILES=$(jq '[.tiers[].objects] | add' <<<"$PLAN")
WARM_S="not waited (--no-warm)" WARM_NOTE=""
if ((WARM)); then
  start=$(date +%s.%N)
  last=-1 same_since=0
  for ((i = 0; ; i++)); do
    fetched=$(jq '.prefetch.fetches' "$MNT/.clairfs/stats")
    ((fetched >= TIER_FILES)) && break
    if ((fetched != last)); then last=$fetched same_since=$i; fi
    if ((i - same_since >= 50)); then  # 10 s without progress: read what is there
      log "clairfs: prefetch stopped at $fetched of $TIER_FILES files"
      WARM_NOTE=" (stopped at $fetched of $TIER_FILES files)"
      break
    fi
    ((i >= WARM_TIMEOUT * 5)) && die "tiers not filled after $WARM_TIMEOUT s: $fetched of $TIER_FILES"
    ((i % 25 == 0)) && log "clairfs: filling tiers: $fetched of $TIER_FILES files"
    sleep 0.2
  done
  WARM_S=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f s", b - a}')$WARM_NOTE
  log "clairfs: tiers filled ($TIER_FILES files) after $WARM_S"
fi
bench "$MNT" "$WORK/clairfs.json"
STATS=$(cat "$MNT/.clairfs/stats")
teardown

# ---- report ----------------------------------------------------------------------------------
report() {
  local e nf nm cf cm ratio same
  echo "Dataset: $FILES files, $DATA_BYTES bytes ($((DATA_BYTES / 1000000)) MB; make_dataset.py" \
    "--mean-kb $MEAN_KB --sigma $SIGMA --seed 1), $FSTYPE under $TMPBASE; manifest: 3 epochs," \
    "make_manifest.py --epochs 3 --seed 1. clairfs tiers: RAM $RAM, SSD $SSD (RocksDB in" \
    "$FSTYPE under $TMPBASE), staging $STAGING, keep_cache $KEEP_CACHE; tiers filled before" \
    "reading: $WARM_S. Reader: clairfs-bench ${BENCH_ARGS[*]} (one run per source, one row per" \
    "epoch); native page cache warm."
  echo
  echo "| epoch | native files/s | native MB/s | clairfs files/s | clairfs MB/s | ratio (files/s) | same bytes |"
  echo "|---|---|---|---|---|---|---|"
  for ((e = 0; e < EPOCHS; e++)); do
    read -r nf nm < <(jq -r ".epochs[$e] | [.files_per_s, .mb_per_s] | @tsv" "$WORK/native.json")
    read -r cf cm < <(jq -r ".epochs[$e] | [.files_per_s, .mb_per_s] | @tsv" "$WORK/clairfs.json")
    ratio=$(awk -v a="$cf" -v b="$nf" 'BEGIN {printf "%.2f", a / b}')
    same=$([[ $(jq -r ".epochs[$e].checksum" "$WORK/native.json") == \
      $(jq -r ".epochs[$e].checksum" "$WORK/clairfs.json") ]] && echo yes || echo NO)
    printf '| %d | %.0f | %.1f | %.0f | %.1f | %s | %s |\n' $((e + 1)) "$nf" "$nm" "$cf" "$cm" \
      "$ratio" "$same"
  done
  echo
  jq -r --argjson d "$DATA_BYTES" '
    def pct(x): (x * 1000 / (if .file_reads > 0 then .file_reads else 1 end) | round) / 10;
    "| files opened | served.ram | served.ssd | served.staging | served.backing | backing_bytes / dataset bytes | errors.checksum |",
    "|---|---|---|---|---|---|---|",
    "| \(.file_reads) | \(.served.ram) (\(pct(.served.ram)) %) | \(.served.ssd) (\(pct(.served.ssd)) %) | \(.served.staging) (\(pct(.served.staging)) %) | \(.served.backing) (\(pct(.served.backing)) %) | \(.backing_bytes) / \($d) = \(.backing_bytes * 100 / $d | round / 100) | \(.errors.checksum) |"
  ' <<<"$STATS"
  echo
  echo "Plan: \`$PLAN\`"
  echo
  echo "Stats after the run (tiers): \`$(jq -c '{tiers, ram_bytes, ssd_bytes, backing_reads,
    stall_ns, errors}' <<<"$STATS")\`"
  echo
  echo "Machine: nproc $(nproc), kernel $(uname -r)," \
    "$(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo)," \
    "date $(date -u '+%Y-%m-%d %H:%M UTC'), load average before the run $LOAD_START;" \
    "$BIN_INFO."
}
report
if [[ -n $OUT ]]; then report >"$OUT"; log "report written to $OUT"; fi
