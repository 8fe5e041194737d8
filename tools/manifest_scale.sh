#!/usr/bin/env bash
# Measures what a large manifest costs: FILES empty files in 1000 directories, a manifest of
# EPOCHS seeded shuffles of all of them written to a clairfs mount, the time until close()
# returns (parsing, resolving every path, planning) and the daemon's memory per entry.
# Usage: tools/manifest_scale.sh [FILES=1280000] [EPOCHS=8]. Cleans up everything it made.
set -euo pipefail
FILES=${1:-1280000}
EPOCHS=${2:-8}
CLAIRFS=${CLAIRFS:-$(cd "$(dirname "$0")/.." && pwd)/build/tools/clairfs}
work=$(mktemp -d /var/tmp/clairfs-scale.XXXXXX)
pid=""
cleanup() {
  mountpoint -q "$work/mnt" 2>/dev/null && { timeout 20 fusermount3 -u "$work/mnt" || fusermount3 -uz "$work/mnt"; }
  [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
mkdir -p "$work/data" "$work/mnt"
/usr/bin/python3 - "$work/data" "$FILES" "$EPOCHS" "$work/manifest" <<'PY'
import os, random, sys
root, n, epochs, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
names = []
for d in range(1000):
    os.mkdir(os.path.join(root, f"n{d:08d}"))
for i in range(n):
    p = f"n{i % 1000:08d}/n{i % 1000:08d}_{i:07d}.JPEG"
    os.close(os.open(os.path.join(root, p), os.O_CREAT | os.O_WRONLY, 0o644))
    names.append(p)
with open(out, "w") as f:
    for e in range(epochs):
        random.Random(e).shuffle(names)
        f.write("#epoch\n")
        f.write("\n".join(names))
        f.write("\n")
PY
cat > "$work/cfg.yaml" <<'YAML'
cache: {tiers: [{kind: ram, capacity: 1GiB}]}  # no SSD tier: nothing left behind in /var/tmp
log: {level: info}
YAML
"$CLAIRFS" -f -c "$work/cfg.yaml" "$work/data" "$work/mnt" 2>"$work/log" &
pid=$!
for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
rss() { awk -v k="$1" '$1==k":" {print $2}' "/proc/$pid/status"; }
lines=$(wc -l < "$work/manifest")
bytes=$(stat -c %s "$work/manifest")
before=$(rss VmRSS)
start=$(date +%s.%N)
cp "$work/manifest" "$work/mnt/.clairfs/manifest"
end=$(date +%s.%N)
after=$(rss VmRSS)
peak=$(rss VmHWM)
entries=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['entries'])" "$work/mnt/.clairfs/plan")
/usr/bin/python3 - "$FILES" "$EPOCHS" "$lines" "$bytes" "$entries" "$before" "$after" "$peak" "$start" "$end" <<'PY'
import sys
files, epochs, lines, size, entries, before, after, peak = map(int, sys.argv[1:9])
secs = float(sys.argv[10]) - float(sys.argv[9])
print(f"manifest: {lines} lines ({size / 1e6:.0f} MB), {files} files x {epochs} epochs; plan entries: {entries}")
print(f"write + validate + plan: {secs:.1f} s ({entries / secs / 1e6:.2f} M entries/s)")
print(f"daemon RSS: {before / 1024:.0f} MiB before, {after / 1024:.0f} MiB after "
      f"({(after - before) * 1024 / entries:.1f} B per entry, "
      f"{(after - before) * 1024 / files:.0f} B per file), peak {peak / 1024:.0f} MiB "
      f"({(peak - before) * 1024 / entries:.1f} B per entry)")
PY
grep -h "manifest" "$work/log" | sed "s/^/daemon: /"
