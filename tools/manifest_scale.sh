#!/usr/bin/env bash
# Measures what a large manifest costs: FILES empty files in 1000 directories, a manifest of
# EPOCHS seeded shuffles of all of them in FORM (text or compact, docs/control-interface.md)
# written to a clairfs mount, or (FORM=loader) registered by the Python package as a PyTorch
# job does it: register_loader over a DataLoader with a DistributedSampler (needs torch); the seconds until close() returns and until the plan is
# installed (parsing, resolving every path, planning), and the daemon's memory per entry,
# steady and peak. Usage: tools/manifest_scale.sh [FILES=1280000] [EPOCHS=8] [FORM=text].
# CLAIRFS_SCALE_DATA=DIR keeps the files in DIR for the next run (made if absent).
# CLAIRFS_SCALE_AS=UID:GROUP (text and compact, as root): the manifest is written by uid UID, a
# member of GROUP, set as control.group, so that its paths are checked with that user's rights
# (docs/permissions.md). CLAIRFS_SCALE_BS=SIZE writes the manifest with dd bs=SIZE instead of
# cp (128 KiB writes). Cleans up everything else it made.
set -euo pipefail
FILES=${1:-1280000}
EPOCHS=${2:-8}
FORM=${3:-text}
case "$FORM" in text|compact|loader) ;; *) echo "FORM must be text, compact or loader" >&2; exit 2;; esac
REPO=$(cd "$(dirname "$0")/.." && pwd)
CLAIRFS=${CLAIRFS:-$(cd "$(dirname "$0")/.." && pwd)/build/daemon/clairfs}
work=$(mktemp -d /var/tmp/clairfs-scale.XXXXXX)
data=${CLAIRFS_SCALE_DATA:-$work/data}
pid=""
cleanup() {
  mountpoint -q "$work/mnt" 2>/dev/null && { timeout 20 fusermount3 -u "$work/mnt" || fusermount3 -uz "$work/mnt"; }
  [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
mkdir -p "$work/mnt"
/usr/bin/python3 - "$data" "$FILES" "$EPOCHS" "$work/manifest" "$FORM" <<'PY'
import array, os, random, struct, sys
root, n, epochs, out, form = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
names = [f"n{i % 1000:08d}/n{i % 1000:08d}_{i:07d}.JPEG" for i in range(n)]
stamp = os.path.join(root, f".made-{n}")
if not os.path.exists(stamp):
    os.makedirs(root, exist_ok=True)
    for d in range(1000):
        os.makedirs(os.path.join(root, f"n{d:08d}"), exist_ok=True)
    for p in names:
        os.close(os.open(os.path.join(root, p), os.O_CREAT | os.O_WRONLY, 0o644))
    open(stamp, "w").close()
order = list(range(n))
if form == "loader":
    sys.exit(0)  # registered by the package itself, below
with open(out, "wb") as f:
    if form == "text":
        for e in range(epochs):
            random.Random(e).shuffle(order)
            f.write(b"#epoch\n")
            f.write("\n".join(names[i] for i in order).encode())
            f.write(b"\n")
    else:  # the compact form, byte by byte as docs/control-interface.md lays it out
        items = b"".join(p.encode() + b"\0" for p in names)
        magic = b"\0clairfs"
        f.write(magic + struct.pack("<IIQQQQH", 1, 0, n, len(items), epochs, n * epochs, 0))
        f.write(items)
        try:
            import numpy
        except ImportError:
            numpy = None
        for e in range(epochs):
            f.write(struct.pack("<I", n))
            if numpy is not None:  # the same kind of order, much faster for 90 epochs
                f.write(numpy.random.default_rng(e).permutation(n).astype("<u4").tobytes())
            else:
                random.Random(e).shuffle(order)
                f.write(array.array("I", order).tobytes())
        f.write(struct.pack("<Q", n * epochs) + magic)
PY
cat > "$work/cfg.yaml" <<'YAML'
cache: {tiers: [{kind: ram, capacity: 1GiB}]}  # no SSD tier: nothing left behind in /var/tmp
log: {level: debug}
YAML
writer=()
if [ -n "${CLAIRFS_SCALE_AS:-}" ]; then
  as_uid=${CLAIRFS_SCALE_AS%%:*}
  as_group=${CLAIRFS_SCALE_AS#*:}
  as_gid=$(getent group "$as_group" | cut -d: -f3)
  [ -n "$as_gid" ] || { echo "no group named $as_group" >&2; exit 2; }
  printf 'control: {group: "%s"}\n' "$as_group" >> "$work/cfg.yaml"
  chmod 755 "$work"  # the writer reaches the manifest it copies and the mount
  chmod 644 "$work/manifest"
  writer=(setpriv "--reuid=$as_uid" "--regid=$as_gid" "--groups=$as_gid")
fi
"$CLAIRFS" -f -c "$work/cfg.yaml" "$data" "$work/mnt" 2>"$work/log" &
pid=$!
for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
rss() { awk -v k="$1" '$1==k":" {print $2}' "/proc/$pid/status"; }
# The daemon's CPU time (user + system, all threads) in clock ticks: less disturbed by other
# load on the machine than the wall-clock times.
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
before=$(rss VmRSS)
cpu_before=$(cpu)
if [ "$FORM" = loader ]; then
  bytes=0
  # The dataset object is built first (as a job has it before registering); the clock runs
  # for register_loader alone: the orders, the compact text, the write and its close().
  start=$(PYTHONPATH="$REPO/python" /usr/bin/python3 - "$work/mnt" "$FILES" "$EPOCHS" <<'PY'
import os, sys, time
import torch, clairfs
from torch.utils.data import DataLoader, Dataset, DistributedSampler
mnt, n, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
class Images(Dataset):
    def __init__(self):
        self.samples = [(os.path.join(mnt, f"n{i % 1000:08d}/n{i % 1000:08d}_{i:07d}.JPEG"), 0)
                        for i in range(n)]
    def __len__(self):
        return len(self.samples)
    def __getitem__(self, i):
        return i
ds = Images()
loader = DataLoader(ds, batch_size=256, sampler=DistributedSampler(ds, num_replicas=1, rank=0))
start = time.time()
clairfs.register_loader(mnt, loader, epochs)
print(f"{start:.3f}")
PY
)
else
  bytes=$(stat -c %s "$work/manifest")
  start=$(date +%s.%N)
  if [ -n "${CLAIRFS_SCALE_BS:-}" ]; then  # writes of this size (dd bs=), as a program writes
    "${writer[@]}" dd if="$work/manifest" of="$work/mnt/.clairfs/manifest" bs="$CLAIRFS_SCALE_BS" status=none
  else
    "${writer[@]}" cp "$work/manifest" "$work/mnt/.clairfs/manifest"
  fi
fi
closed=$(date +%s.%N)
peak_closed=$(rss VmHWM)  # the peak of parsing and validating, before the installation
# A read of plan waits for the installation that the close() began.
entries=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['entries'])" "$work/mnt/.clairfs/plan")
installed=$(date +%s.%N)
cpu_after=$(cpu)
echo "daemon CPU time for the registration: $(( (cpu_after - cpu_before) * 1000 / $(getconf CLK_TCK) )) ms"
after=$(rss VmRSS)
peak=$(rss VmHWM)
grep -h "manifest\|stream" "$work/log" | sed "s/^/daemon: /"
/usr/bin/python3 - "$FILES" "$EPOCHS" "$FORM" "$bytes" "$entries" "$before" "$after" "$peak" "$start" "$closed" "$installed" "$peak_closed" <<'PY'
import sys
files, epochs = int(sys.argv[1]), int(sys.argv[2])
form = sys.argv[3]
size, entries, before, after, peak = map(int, sys.argv[4:9])
start, closed, installed = map(float, sys.argv[9:12])
want = files * epochs
print(f"{form} manifest ({size / 1e6:.0f} MB), {files} files x {epochs} epochs = {want} entries; "
      f"plan entries: {entries}")
print(f"close() returned after {closed - start:.1f} s, plan installed after {installed - start:.1f} s "
      f"({want / (installed - start) / 1e6:.2f} M entries/s)")
print(f"daemon RSS: {before / 1024:.0f} MiB before, {after / 1024:.0f} MiB after "
      f"({(after - before) * 1024 / want:.2f} B per entry, {(after - before) * 1024 / files:.0f} B "
      f"per file), peak {peak / 1024:.0f} MiB ({(peak - before) * 1024 / want:.2f} B per entry; "
      f"{(int(sys.argv[12]) - before) * 1024 / want:.2f} until close() returned)")
sys.exit(0 if entries == want else 1)
PY
