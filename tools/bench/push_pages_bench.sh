#!/usr/bin/env bash
# push_pages_bench.sh: fuse.push_pages (fs/page_push.h) on vs off, side by side in one run, in
# the case it is meant for: epoch N+1 after the page cache lost the dataset's pages, the data
# in clairfs's RAM tier.
# For each drop mode (--drops) and each variant (push_pages false, true; fuse.open_mode none):
# mount clairfs over a fresh copy-free dataset (one mount per variant and drop mode), register a
# manifest of 2+R epochs (each its own seeded shuffle), wait until the RAM tier holds the whole
# dataset, read epoch 0 (every name looked up, every file read through the daemon), then for
# each of R epochs: `echo DROP > /proc/sys/vm/drop_caches` (1: pages only; 3: also dentries and
# inodes, so the kernel forgets the nodes), then read it with clairfs-bench (T threads). A last
# epoch is read with --verify (after a drop): its order-free checksum must equal native's.
# Around every epoch the stats show whether consumption still moves (prefetch.position,
# files_opened, served.*) and what was pushed (push.*).
#
# Usage: tools/bench/push_pages_bench.sh [--files N] [--size BYTES] [--repeats R] [--threads T]
#          [--drops "1 3"] [--tmp DIR] [--out FILE]
# Root only (drop_caches). Report (markdown) on stdout; progress on stderr.
set -euo pipefail

FILES=20000 SIZE=112640 REPEATS=3 THREADS=4 DROPS="1 3" TMPBASE=/var/tmp OUT=""
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CLAIRFS_BIN=${CLAIRFS_BIN:-$REPO/build/tools/clairfs}
BENCH_BIN=${BENCH_BIN:-$REPO/build/tools/bench/clairfs-bench}
NAME=push_pages_bench
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --files) FILES=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --drops) DROPS=$2; shift 2 ;;
    --tmp) TMPBASE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done
[[ $(id -u) == 0 ]] || die "root needed (drop_caches)"
for t in jq fusermount3; do command -v "$t" >/dev/null || die "missing $t"; done

WORK=$(mktemp -d "$TMPBASE/clairfs-push.XXXXXX")
DATA=$WORK/data MNT=$WORK/mnt
mkdir -p "$DATA" "$MNT"
cp "$CLAIRFS_BIN" "$WORK/clairfs"; cp "$BENCH_BIN" "$WORK/clairfs-bench"
BIN_INFO="$("$WORK/clairfs" --version 2>&1 | head -1), built $(built "$CLAIRFS_BIN")"
EPOCHS=$((REPEATS + 2))
log "writing $FILES files of $SIZE bytes, $EPOCHS epoch orders"
/usr/bin/python3 - "$DATA" "$WORK" "$FILES" "$SIZE" "$EPOCHS" <<'EOF'
import os, random, sys
root, work, n, size, epochs = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
rng = random.Random(20260101)
paths = []
for i in range(n):
    d = os.path.join(root, "train", f"c{i % 100:03d}")
    os.makedirs(d, exist_ok=True)
    p = f"train/c{i % 100:03d}/{i:07d}.bin"
    with open(os.path.join(root, p), "wb") as f:
        f.write(rng.randbytes(size))
    paths.append(p)
with open(os.path.join(work, "manifest"), "w") as m:
    for e in range(epochs):
        order = paths[:]
        random.Random(1000 + e).shuffle(order)
        with open(os.path.join(work, f"epoch{e}.txt"), "w") as f:
            f.write("\n".join(order) + "\n")
        m.write("#epoch\n" + "\n".join(order) + "\n")
EOF
sync
NATIVE_SUM=$("$WORK/clairfs-bench" --root "$DATA" --list "$WORK/epoch0.txt" --threads 4 \
  --verify --json --no-stats | jq -r '.epochs[0].checksum')

snap() { jq -c '{pos: .prefetch.position, opened: .files_opened, served: (.served | add),
  given_up: .prefetch.given_up, pushed: .push.pushed, unknown: .push.unknown,
  skipped: .push.skipped, failed: .push.failed}' "$MNT/.clairfs/stats"; }
# bench EPOCH [ARGS]: reads one epoch's list through the mount; prints the bench JSON.
bench() {
  local e=$1; shift
  "$WORK/clairfs-bench" --root "$MNT" --list "$WORK/epoch$e.txt" --threads "$THREADS" --json \
    --no-stats "$@"
}

ROWS=() NOTES=()
for drop in $DROPS; do
  for push in false true; do
    v="push_pages=$push, drop_caches=$drop"
    cfg=$WORK/clairfs.yaml
    printf 'fuse:\n  open_mode: none\n  push_pages: %s\ncache:\n  tiers:\n    - kind: ram\n      capacity: %dMiB\n' \
      "$push" $((FILES * SIZE * 5 / 4 / 1048576 + 64)) >"$cfg"
    log "$v: mount"
    "$WORK/clairfs" -f -c "$cfg" "$DATA" "$MNT" >"$WORK/clairfs-$drop-$push.log" 2>&1 &
    PIDS+=($!) MOUNTS+=("$MNT")
    for ((i = 0; i < 150; i++)); do is_mounted "$MNT" && break; sleep 0.2; done
    is_mounted "$MNT" || die "no mount: $(tail "$WORK/clairfs-$drop-$push.log")"
    cat "$WORK/manifest" >"$MNT/.clairfs/manifest"
    for ((i = 0; i < 3000; i++)); do
      [[ $(jq '.readiness.tiers >= 1' "$MNT/.clairfs/stats") == true ]] && break; sleep 0.2
    done
    log "$v: RAM tier warm: $(snap)"
    bench 0 >/dev/null
    log "$v: epoch 0 read: $(snap)"
    fps=()
    for ((e = 1; e <= REPEATS; e++)); do
      sync; echo "$drop" >/proc/sys/vm/drop_caches; sleep 1
      before=$(snap)
      json=$(bench "$e")
      after=$(snap)
      f=$(jq -r '.epochs[0].files_per_s | floor' <<<"$json")
      fps+=("$f")
      errs=$(jq -r '.epochs[0].errors' <<<"$json")
      ROWS+=("| $push | $drop | $e | $f | $errs | \`$before\` | \`$after\` |")
      log "$v: epoch $e: $f files/s; stats $before -> $after"
    done
    sync; echo "$drop" >/proc/sys/vm/drop_caches; sleep 1
    sum=$(bench $((REPEATS + 1)) --verify | jq -r '.epochs[0].checksum')
    NOTES+=("- $v: verified epoch checksum $([[ $sum == "$NATIVE_SUM" ]] && echo "= native" || echo "DIFFERS ($sum vs $NATIVE_SUM)"); final stats \`$(snap)\`")
    unmount "$MNT"; stop_pid "${PIDS[-1]}"; unset 'PIDS[-1]' 'MOUNTS[-1]'
  done
done

{
  echo "push_pages_bench: $FILES files of $SIZE bytes, $THREADS reader threads, $REPEATS epochs per variant; $BIN_INFO; $(nproc) cores; load at end $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| push_pages | drop_caches | epoch | files/s | errors | stats before | stats after |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${ROWS[@]}"
  echo
  printf '%s\n' "${NOTES[@]}"
} | tee ${OUT:+"$OUT"}
