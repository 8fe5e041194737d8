#!/usr/bin/env bash
# The clairfs demo: generates a small dataset, mounts clairfs over the dataset path itself,
# registers a 2-epoch manifest, reads the first epoch in manifest order (checking every byte
# against the generator's seed-determined contents), prints the stats, and unmounts.
set -euo pipefail
cd "$(dirname "$0")/.."
CLAIRFS=${CLAIRFS:-clairfs}
PY=/usr/bin/python3
work=$(mktemp -d /tmp/clairfs-demo.XXXXXX)
data="$work/data"
cleanup() {
  if mountpoint -q "$data" 2>/dev/null; then timeout 20 fusermount3 -u "$data" || fusermount3 -uz "$data"; fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

$PY tools/make_dataset.py "$data" --files 1000 --classes 10 --mean-kb 110 --seed 1
# Keep a checksum of every file from before the mount, to compare what clairfs serves.
(cd "$data" && find . -type f -print0 | sort -z | xargs -0 sha256sum) > "$work/before.sha256"
cat > "$work/clairfs.yaml" <<YAML
cache:
  tiers:
    - {kind: ram, capacity: 32MiB, threads: 2}                    # the most-read files
    - {kind: ssd, capacity: 48MiB, threads: 2, dir: $work/ssd}    # the next (RocksDB)
  staging: {capacity: 16MiB, threads: 4}                          # the rest, in read order
YAML

echo "== mount clairfs over $data (same path: training code keeps its paths)"
"$CLAIRFS" -c "$work/clairfs.yaml" "$data"
mountpoint "$data"
echo "== register the order this node will read: 2 epochs, seeded shuffle"
$PY tools/make_manifest.py "$data" --epochs 2 --seed 42 > "$work/manifest"
cp "$work/manifest" "$data/.clairfs/manifest"
cat "$data/.clairfs/plan"
sleep 1  # let the prefetcher run ahead
echo "== read epoch 1 in manifest order"
$PY - "$data" "$work/manifest" <<'PY'
import sys, time, os
root, manifest = sys.argv[1], sys.argv[2]
epochs = open(manifest).read().split("#epoch\n")[1:]
paths = [p for p in epochs[0].splitlines() if p]
start, total = time.monotonic(), 0
for p in paths:
    with open(os.path.join(root, p), "rb") as f:
        total += len(f.read())
secs = time.monotonic() - start
print(f"read {len(paths)} files, {total / 1e6:.1f} MB in {secs:.2f} s "
      f"({len(paths) / secs:.0f} files/s)")
PY
echo "== stats"
cat "$data/.clairfs/stats"
echo "== every byte equals the original"
(cd "$data" && sha256sum --quiet -c "$work/before.sha256") && echo "all $(wc -l < "$work/before.sha256") files match"
timeout 20 fusermount3 -u "$data"
echo "== unmounted; the dataset is untouched at $data"
