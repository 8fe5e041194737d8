#!/usr/bin/env bash
# emulated_pfs.sh: a generated ImageNet-like dataset on a throttled, loop-mounted ext4 image (an
# emulated parallel file system, see pfs_lib.sh), for the life of one command.
#
# Usage: tools/bench/emulated_pfs.sh [--files N] [--mean-kb KB] [--sigma S] [--bps B]
#          [--iops N] [--mem SIZE_MIB] [--spare SIZE_MIB] [--tmp DIR] [--check]
#          [-- COMMAND [ARGS...]]
#   Generates the dataset (tools/make_dataset.py: lognormal sizes, --classes 100 --seed 1) into
#   the image, drops its page cache, then:
#   --check      measures what the group reads per second under the limits (bytes/s alone,
#                IOPS alone, both; 4 reader threads, cold cache) and prints a markdown table;
#   -- COMMAND   runs COMMAND inside the throttled groups with PFS_DATA (the dataset directory),
#                PFS_DEV (loopN, for clairfs-bench --block-dev) and PFS_BLKIO, PFS_MEMCG (the
#                cgroup directories) in its environment; exits with COMMAND's status.
#   --spare      room left in the image beyond the dataset, for COMMAND's own files (e.g. a
#                dataset of its own made next to PFS_DATA), in MiB (default 0)
#   Then tears everything down (also on error, INT, TERM): mount, loop device, cgroups, files.
# Defaults: 2000 files, mean 110 KB, sigma 0.5, 25 MB/s (25000000), 400 IOPS, memory group
#   limit 64 MiB (the page cache COMMAND may hold, plus its own memory), tmp /var/tmp.
# Env: BENCH_BIN (default build/tools/bench/clairfs-bench), PYTHON (default /usr/bin/python3).
# Example: tools/bench/emulated_pfs.sh --check -- sh -c \
#   'build/tools/bench/clairfs-bench --root "$PFS_DATA" --walk --threads 4 --block-dev "$PFS_DEV"'
# Root only (loop devices, mounts, cgroups).
set -euo pipefail

FILES=2000 MEAN_KB=110 SIGMA=0.5 BPS=25000000 IOPS=400 MEM_MIB=64 SPARE_MIB=0 TMPBASE=/var/tmp
CHECK=0
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_BIN=${BENCH_BIN:-$REPO/build/tools/bench/clairfs-bench}
PYTHON=${PYTHON:-/usr/bin/python3}

NAME=emulated_pfs
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tools/bench/pfs_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pfs_lib.sh"

declare -A OPTIONS=([--files]=FILES [--mean-kb]=MEAN_KB [--sigma]=SIGMA [--bps]=BPS [--iops]=IOPS
  [--mem]=MEM_MIB [--spare]=SPARE_MIB [--tmp]=TMPBASE [--check]=CHECK=1 [--]=ARGS)
parse_options "$@"
set -- "${ARGS[@]}"
((EUID == 0)) || die "run as root (loop devices, mounts, cgroups)"
[[ $FILES =~ ^[1-9][0-9]*$ && $BPS =~ ^[0-9]+$ && $IOPS =~ ^[0-9]+$ && $MEM_MIB =~ ^[1-9][0-9]*$ &&
  $SPARE_MIB =~ ^[0-9]+$ ]] || die "--files, --bps, --iops, --mem, --spare: integers"
((CHECK || $# > 0)) || die "nothing to do: give --check and/or -- COMMAND"
((CHECK == 0)) || [[ -x $BENCH_BIN ]] || die "bench binary not found: $BENCH_BIN"

WORK=$(mktemp -d "$TMPBASE/clairfs-pfs.XXXXXX")
# Image: the expected bytes, 15 % for small-file slack and ext4 metadata, plus 64 MiB.
IMG_MIB=$(awk -v n="$FILES" -v kb="$MEAN_KB" -v spare="$SPARE_MIB" \
  'BEGIN {printf "%d", n * kb * 1000 * 1.15 / 1048576 + 64 + spare}')
pfs_setup "$WORK/pfs.img" "$IMG_MIB" "$WORK/pfs"
pfs_cgroups "clairfs-pfs.$$"
pfs_memlimit $((MEM_MIB << 20))
DATA=$PFS_MNT/data
log "dataset: $FILES files, mean $MEAN_KB KB, sigma $SIGMA"
run "$PYTHON" "$REPO/tools/make_dataset.py" "$DATA" --files "$FILES" --classes 100 \
  --mean-kb "$MEAN_KB" --sigma "$SIGMA" --seed 1 >&2
"$PYTHON" "$REPO/tools/make_manifest.py" "$DATA" --seed 1 >"$WORK/list.txt"

if ((CHECK)); then
  log "check: $BPS B/s, $IOPS IOPS on $PFS_LOOP, 4 threads, 8 s per limit, cold cache"
  echo "| read_bps limit | read_iops limit | seconds | group MB/s | group IOPS (bios/s) | KB per bio |"
  echo "|---|---|---|---|---|---|"
  pfs_check 8 "$BPS" "$IOPS" "$BENCH_BIN" "$DATA" "$WORK/list.txt"
fi
((CHECK)) && (($# == 0)) && exit 0

pfs_remount
pfs_throttle "$BPS" "$IOPS"
log "run: $* (inside $PFS_BLKIO, $PFS_MEMCG)"
export PFS_DATA=$DATA PFS_DEV PFS_BLKIO PFS_MEMCG
rc=0
run pfs_exec "$@" || rc=$?
exit "$rc"
