#!/usr/bin/env bash
# emulated_cluster.sh: K clairfs daemons on K emulated nodes reading one emulated PFS.
#   nodes  network namespaces on a bridge, each link capped at --link-mbit each way by tc tbf,
#          one daemon per node under hydra's mpiexec, MPI on TCP between the nodes
#          (netns_lib.sh, netns_launch.sh; docs/emulated_cluster.md)
#   PFS    an ext4 image on a loop device whose reads are throttled (--bps, --iops) by one
#          cgroup-v1 blkio group that every daemon is in: the nodes share its bandwidth, as
#          they share a PFS's (pfs_lib.sh); the memory group caps the page cache they keep of it
#   reads  node r replays its rank's order: make_manifest.py --rank r --world K --epochs E
#          (a seeded global shuffle per epoch split like DistributedSampler; with --sampler
#          locality, the global batches of --batch samples per rank, --ranks-per-node ranks a
#          node, split like clairfs.locality.LocalitySampler), the whole manifest
#          registered at the start; each epoch's list read through the node's mount by one
#          clairfs-bench (--threads readers, --verify), all nodes at once, the next epoch
#          started when every node is done (the barrier of a synchronous training epoch)
# Each node's tiers: a RAM tier of --ram MiB (default 1.25 x dataset / K: no node holds the
# dataset, together they hold it with room to spare), staging --staging MiB, fuse.keep_cache
# false (every epoch reaches the daemons, none is served by the mount's page cache).
#
# Prints, per epoch and per node: seconds (clairfs-bench's epoch time), the lower bound (below),
# bytes read through the mount, peer bytes in and out (daemon stats), the bytes the node's link
# carried each way (veth counters), backing bytes and objects (daemon stats), the daemon's CPU
# seconds, and whether the XXH3 sum of the files read matches the PFS's (summed before the
# throttle); per epoch the wall time of the whole epoch (first start to last end), its interval,
# its lower bound and how many of the machine's cores were busy (/proc/stat: anyone's work);
# last line one JSON object with the totals. Between epochs only the snapshot runs (every
# node's stats read at once); the report is computed after the last epoch.
#
# Lower bound of node n's epoch (lb_s): the time its link needs for the peer bytes its daemon
# received and sent in the epoch, each direction on its own (full duplex):
#   max(peer_in_n, peer_out_n) / L           L = the link's bytes/s
# The epoch's: the largest node's, or the time the PFS's throttle needs for what it let through
# in the epoch (the blkio group's read bytes / B and requests / I, B and I the --bps and --iops
# limits), whichever is larger. The daemons' backing bytes are not the PFS's: a read of the
# backing store may be served by the page cache the memory group keeps (--pagecache, and what
# the daemons leave of their allowance). The traffic is the difference of counters between
# snapshots taken before and after the epoch, and the daemons prefetch across that boundary
# (the next epoch's objects move while the snapshot is taken): it is the epoch's interval
# (snapshot to snapshot) that the bound bounds; the readers' own time (seconds, wall) can be
# shorter. It ignores CPU (K daemons and K readers share this machine's cores), latency (none
# is emulated) and the control traffic on the links.
#
# Usage: tools/bench/emulated_cluster.sh [--nodes K] [--files N] [--mean-kb KB] [--sigma S]
#          [--epochs E] [--link-mbit M] [--bps B] [--iops N] [--ram MIB] [--staging MIB]
#          [--threads T] [--pagecache MIB] [--overhead MIB] [--warm] [--tmp DIR] [--out FILE]
#          [--clairfs-bin PATH] [--bench-bin PATH]
#          [--sampler distributed|locality] [--batch B] [--ranks-per-node R]
# Defaults: K 8, 2000 files of mean 32 KB (lognormal, sigma 0.5), E 3, links 100 Mbit/s, PFS
#   20 MB/s (20000000) and 400 IOPS, RAM auto, staging 4 MiB (well below the 7 MB or so a node
#   gets from its peers in an epoch at the defaults: a window that holds a node's reads of all
#   epochs with its RAM tier fetches them all ahead, and the epochs then measure no network),
#   2 reader threads per node,
#   page-cache allowance 32 MiB, overhead 64 MiB per daemon (its memory beyond tiers and
#   staging, about 21 MiB measured: daemons_peak_rss_mib in the JSON; the memory group's limit
#   is pagecache + K x (ram + staging + overhead), and what the daemons leave of it the page
#   cache of the PFS may use), tmp
#   /var/tmp. --warm waits until every node holds its share before the first epoch (otherwise
#   the first epoch is the cold one, reading the PFS while the owners fill their tiers).
#   --link-mbit 0: uncapped links.
# Env: CLAIRFS_BIN, BENCH_BIN (default build/daemon/clairfs, build/tools/bench/clairfs-bench),
#   PYTHON (default /usr/bin/python3), PLAN_TIMEOUT (seconds to wait for the placement, 120).
# Report on stdout (--out FILE: also to FILE), progress on stderr. Root only. Everything set up
# (namespaces, veths, bridge, mounts, daemons, cgroups, loop device, files) is torn down on exit,
# error, INT, TERM.
set -euo pipefail

NODES=8 FILES=2000 MEAN_KB=32 SIGMA=0.5 EPOCHS=3 LINK_MBIT=100 BPS=20000000 IOPS=400
RAM="" STAGING=4 THREADS=2 PAGECACHE=32 OVERHEAD=64 WARM=0 TMPBASE=/var/tmp OUT=""
SAMPLER=distributed BATCH=32 RANKS_PER_NODE=1
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CLAIRFS_BIN=${CLAIRFS_BIN:-$REPO/build/daemon/clairfs}
BENCH_BIN=${BENCH_BIN:-$REPO/build/tools/bench/clairfs-bench}
PYTHON=${PYTHON:-/usr/bin/python3}
PLAN_TIMEOUT=${PLAN_TIMEOUT:-120}
COMMAND="tools/bench/emulated_cluster.sh $*"
MIB=1048576

NAME=emulated_cluster
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tools/bench/pfs_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pfs_lib.sh"
# shellcheck source=tools/bench/netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"

declare -A OPTIONS=([--nodes]=NODES [--files]=FILES [--mean-kb]=MEAN_KB [--sigma]=SIGMA
  [--epochs]=EPOCHS [--link-mbit]=LINK_MBIT [--bps]=BPS [--iops]=IOPS [--ram]=RAM
  [--staging]=STAGING [--threads]=THREADS [--pagecache]=PAGECACHE [--overhead]=OVERHEAD
  [--warm]=WARM=1 [--tmp]=TMPBASE [--out]=OUT [--clairfs-bin]=CLAIRFS_BIN
  [--bench-bin]=BENCH_BIN [--sampler]=SAMPLER [--batch]=BATCH
  [--ranks-per-node]=RANKS_PER_NODE)
parse_options "$@"
[[ $SAMPLER == distributed || $SAMPLER == locality ]] || die "--sampler: distributed or locality"
for v in NODES FILES EPOCHS THREADS BATCH RANKS_PER_NODE; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v,,}: a positive integer, not '${!v}'"
done
for v in LINK_MBIT BPS IOPS STAGING PAGECACHE OVERHEAD; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v: a non-negative integer, not '${!v}'"
done
[[ -z $RAM || $RAM =~ ^[1-9][0-9]*$ ]] || die "--ram: MiB, a positive integer"
((NODES >= 2)) || die "--nodes: at least 2"
[[ -x $CLAIRFS_BIN && -x $BENCH_BIN ]] || die "build first: $CLAIRFS_BIN, $BENCH_BIN"
for tool in jq "$PYTHON"; do command -v "$tool" >/dev/null || die "missing $tool"; done
reason=$(netns_usable) || die "no emulated cluster on this machine: $reason"

WORK=$(mktemp -d "$TMPBASE/clairfs-ecl.XXXXXX")
chmod 755 "$WORK"
BIN_INFO="$("$CLAIRFS_BIN" --version 2>&1 | head -1) from $(realpath "$CLAIRFS_BIN") (built $(built "$CLAIRFS_BIN"))"
snapshot_binaries
mkdir -p "$WORK/lists" "$WORK/out"
DATE_START=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the PFS and the dataset ------------------------------------------------------------------
netns_sweep
IMG_MIB=$(awk -v n="$FILES" -v kb="$MEAN_KB" 'BEGIN {printf "%d", n * kb * 1000 * 1.15 / 1048576 + 64}')
pfs_setup "$WORK/pfs.img" "$IMG_MIB" "$WORK/pfs"
pfs_cgroups "clairfs-ecl.$$"
DATA=$PFS_MNT/data
log "dataset: $FILES files, mean $MEAN_KB KB, sigma $SIGMA"
run "$PYTHON" "$REPO/tools/make_dataset.py" "$DATA" --files "$FILES" --classes 100 \
  --mean-kb "$MEAN_KB" --sigma "$SIGMA" --seed 1 >&2
DATA_BYTES=$(find "$DATA" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f\n", s}')
[[ -n $RAM ]] || RAM=$(awk -v b="$DATA_BYTES" -v k="$NODES" \
  'BEGIN {r = int(b * 1.25 / k / 1048576) + 1; print (r < 8 ? 8 : r)}')

# Each node's manifest (all epochs), its per-epoch lists, and each list's XXH3 sum read from the
# PFS before it is throttled (page cache warm: cheap).
for ((r = 0; r < NODES; r++)); do
  PYTHONPATH=$REPO/python "$PYTHON" "$REPO/tools/make_manifest.py" "$DATA" \
    --epochs "$EPOCHS" --seed 1 --rank "$r" --world "$NODES" --sampler "$SAMPLER" \
    --batch "$BATCH" --ranks-per-node "$RANKS_PER_NODE" >"$WORK/lists/n$r.manifest"
  awk -v p="$WORK/lists/n$r.e" '/^#epoch/ {f = p (e++); printf "" > f; next} {print > f}' \
    "$WORK/lists/n$r.manifest"
  for ((e = 0; e < EPOCHS; e++)); do
    "$BENCH_BIN" --root "$DATA" --list "$WORK/lists/n$r.e$e" --verify --json --no-stats |
      jq -r '.epochs[0].checksum' >"$WORK/lists/n$r.e$e.sum"
  done
done
log "dataset: $DATA_BYTES bytes; per node $((FILES / NODES)) files an epoch; reference sums done"

# ---- the nodes and the daemons ----------------------------------------------------------------
netns_setup "$NODES" "$LINK_MBIT" "$WORK/hosts.map"
mapfile -t MPIEXEC_ARGS < <(netns_mpiexec_args)
netns_mpi_env
CFG=$WORK/clairfs.yaml
KEY_ENTRY=$(cluster_key_entry "$CLAIRFS_BIN" "$WORK/cluster.key")
cat >"$CFG" <<EOF
fuse: {keep_cache: false}
cache:
  tiers:
    - {kind: ram, capacity: ${RAM}MiB, threads: 2}
  staging: {capacity: ${STAGING}MiB, threads: 4}
cluster: {plan_timeout: 60, peer_timeout: 2, down_for: 60${KEY_ENTRY}}
log: {level: info, file: "$WORK/clairfs.log"}
EOF
for ((r = 0; r < NODES; r++)); do mkdir -p "$WORK/mnt$r"; MOUNTS+=("$WORK/mnt$r"); done
pfs_remount
pfs_throttle "$BPS" "$IOPS"
pfs_memlimit $(((PAGECACHE + (RAM + STAGING + OVERHEAD) * NODES) * MIB))
log "start: $NODES daemons (RAM $RAM MiB, staging $STAGING MiB each) under mpiexec ${MPIEXEC_ARGS[*]}"
(pfs_exec mpiexec -disable-auto-cleanup "${MPIEXEC_ARGS[@]}" -n "$NODES" "$CLAIRFS_BIN" \
  --cluster -c "$CFG" "$DATA" "$WORK/mnt{rank}" >"$WORK/mpiexec.log" 2>&1) &
MPIEXEC=$!
PIDS+=("$MPIEXEC")

# wait_until SECONDS WHAT COMMAND...: polls COMMAND every 0.1 s; dies after SECONDS or when
# mpiexec has ended.
wait_until() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    kill -0 "$MPIEXEC" 2>/dev/null || die "mpiexec ended while waiting for $what: $(tail -20 "$WORK/mpiexec.log")"
    ((SECONDS < deadline)) || die "timed out waiting for $what: $(tail -5 "$WORK/mpiexec.log")"
    sleep 0.1
  done
}
all_mounted() { for ((r = 0; r < NODES; r++)); do is_mounted "$WORK/mnt$r" || return 1; done; }
all_placed() {
  for ((r = 0; r < NODES; r++)); do
    [[ $(jq -r '.cluster.state' "$WORK/mnt$r/.clairfs/plan" 2>/dev/null) == placed ]] || return 1
  done
}
all_filled() {
  local owned held
  for ((r = 0; r < NODES; r++)); do
    owned=$(jq '.cluster.owned.bytes' "$WORK/mnt$r/.clairfs/plan")
    held=$(jq '[.tiers[].bytes] | add' "$WORK/mnt$r/.clairfs/stats")
    ((held >= owned)) || return 1
  done
}
wait_until 120 "the $NODES mounts" all_mounted
for ((r = 0; r < NODES; r++)); do
  cat "$WORK/lists/n$r.manifest" >"$WORK/mnt$r/.clairfs/manifest"
  [[ -z $(cat "$WORK/mnt$r/.clairfs/errors") ]] ||
    die "node $r: manifest rejected: $(cat "$WORK/mnt$r/.clairfs/errors")"
done
wait_until "$PLAN_TIMEOUT" "the placement" all_placed
log "placed: $(jq -c '.cluster | {predicted_cluster_backing_bytes, from_peers, owned}' \
  "$WORK/mnt0/.clairfs/plan" 2>/dev/null || true)"
# Each node's serving daemon (the child of its supervisor; PMI_RANK in its environment), for
# its CPU time.
DAEMON=()
while read -r p; do
  [[ $(cat "/proc/$p/comm" 2>/dev/null) == clairfs ]] || continue
  pp=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) || continue
  [[ $(cat "/proc/$pp/comm" 2>/dev/null) == clairfs ]] || continue
  r=$(tr '\0' '\n' <"/proc/$p/environ" | sed -n 's/^PMI_RANK=//p')
  [[ $r =~ ^[0-9]+$ ]] && DAEMON[r]=$p
done <"$PFS_MEMCG/cgroup.procs"
((${#DAEMON[@]} == NODES)) || die "found ${#DAEMON[@]} serving daemons, not $NODES"
if ((WARM)); then
  wait_until 600 "the tiers to fill" all_filled
  log "warm: every node holds its share"
fi

# ---- the epochs -------------------------------------------------------------------------------
# snapshot I: the daemons' stats files and the links' counters of every node, read at once (in
# parallel: the next epoch starts right after), into $WORK/snap/I.<node>.{json,link}, and the
# time it was taken into $WORK/snap/I.time.
snapshot() {
  local r pids=()
  date +%s.%N >"$WORK/snap/$1.time"
  head -1 /proc/stat >"$WORK/snap/$1.cpu"
  pfs_group_reads >"$WORK/snap/$1.pfs"
  for ((r = 0; r < NODES; r++)); do
    cat "$WORK/mnt$r/.clairfs/stats" >"$WORK/snap/$1.$r.json" &
    pids+=($!)
    echo "$(netns_link_bytes "$r") $(awk '{print $14 + $15}' "/proc/${DAEMON[r]}/stat" 2>/dev/null || echo 0)" \
      >"$WORK/snap/$1.$r.link"
  done
  wait "${pids[@]}"
}
# counters I: per node "peer_in peer_out backing_bytes backing_reads bytes_read link_rx link_tx
# daemon_cpu_ticks" of snapshot I.
counters() {
  local r
  for ((r = 0; r < NODES; r++)); do
    echo "$(jq -r '"\(.peer_bytes_in) \(.peer_bytes_out) \(.backing_bytes) \(.backing_reads) \(.bytes_read)"' \
      "$WORK/snap/$1.$r.json") $(cat "$WORK/snap/$1.$r.link")"
  done
}
# epoch E: one clairfs-bench per node on its list of epoch E, all at once; waits for them all.
# Run through `run`: on INT/TERM the readers go with it.
epoch() {
  local e=$1 r pids=()
  trap 'kill "${pids[@]}" 2>/dev/null; exit 143' TERM
  for ((r = 0; r < NODES; r++)); do
    "$BENCH_BIN" --root "$WORK/mnt$r" --list "$WORK/lists/n$r.e$e" --threads "$THREADS" \
      --verify --json --no-stats >"$WORK/out/n$r.e$e.json" 2>"$WORK/out/n$r.e$e.err" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || true; done
}

mkdir -p "$WORK/snap"
snapshot 0
for ((e = 0; e < EPOCHS; e++)); do
  date +%s.%N >"$WORK/out/e$e.start"
  run epoch "$e"
  date +%s.%N >"$WORK/out/e$e.end"
  snapshot $((e + 1))
done
log "epochs done; the report:"

# ---- the report -------------------------------------------------------------------------------
L=$(awk -v m="$LINK_MBIT" 'BEGIN {printf "%.0f", m * 1e6 / 8}')
{
  echo "# emulated cluster: $NODES nodes, links ${LINK_MBIT} Mbit/s each way, PFS $BPS B/s $IOPS IOPS"
  echo "# $COMMAND"
  echo "# $BIN_INFO; started $DATE_START, load $LOAD_START"
  echo "# dataset $FILES files, $DATA_BYTES bytes; RAM tier $RAM MiB per node; $THREADS readers per node"
  printf '%-5s %-4s %8s %8s %9s %9s %9s %9s %9s %9s %7s %6s %s\n' epoch node seconds lb_s read_MB \
    peer_inMB peer_outMB link_rxMB link_txMB backingMB objects cpu_s sum
} | tee "$WORK/report.txt"
TOTALS=$WORK/totals.txt
: >"$TOTALS"
counters 0 >"$WORK/snap/0.txt"
awk '{bb += $3; bo += $4; pin += $1}
  END {printf "# before epoch 0 (placement%s): backing %.2f MB, %d objects; peer in %.2f MB\n",
    w ? ", warm-up" : "", bb / 1e6, bo, pin / 1e6}' w="$WARM" "$WORK/snap/0.txt" | tee -a "$WORK/report.txt"
for ((e = 0; e < EPOCHS; e++)); do
  counters $((e + 1)) >"$WORK/snap/$((e + 1)).txt"
  for ((r = 0; r < NODES; r++)); do
    secs=$(jq -r '.epochs[0].seconds // "nan"' "$WORK/out/n$r.e$e.json" 2>/dev/null || echo nan)
    sum=$(jq -r '.epochs[0].checksum // "none"' "$WORK/out/n$r.e$e.json" 2>/dev/null || echo none)
    errs=$(jq -r '.epochs[0].errors // 1' "$WORK/out/n$r.e$e.json" 2>/dev/null || echo 1)
    ok=ok
    [[ $sum == "$(cat "$WORK/lists/n$r.e$e.sum")" && $errs == 0 ]] || ok="WRONG($errs errors)"
    paste -d' ' <(sed -n "$((r + 1))p" "$WORK/snap/$e.txt") <(sed -n "$((r + 1))p" "$WORK/snap/$((e + 1)).txt") |
      awk -v e="$e" -v r="$r" -v s="$secs" -v L="$L" -v ok="$ok" -v tf="$TOTALS" -v hz="$(getconf CLK_TCK)" '{
        pin = $9 - $1; pout = $10 - $2; bb = $11 - $3; bo = $12 - $4; rd = $13 - $5
        rx = $14 - $6; tx = $15 - $7; cpu = ($16 - $8) / hz
        lb = 0
        if (L > 0) { if (pin / L > lb) lb = pin / L; if (pout / L > lb) lb = pout / L }
        printf "%-5d %-4d %8.2f %8.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %7d %6.2f %s\n", e, r, s,
          lb, rd / 1e6, pin / 1e6, pout / 1e6, rx / 1e6, tx / 1e6, bb / 1e6, bo, cpu, ok
        # for the totals: T epoch node seconds lb read pin pout rx tx bb bo ok
        printf "T %d %d %s %.6f %.0f %.0f %.0f %.0f %.0f %.0f %d %s\n", e, r, s, lb, rd, pin, pout,
          rx, tx, bb, bo, ok >> tf
      }'
  done | tee -a "$WORK/report.txt"
  w=$(awk '{t[NR] = $1} END {print t[2] - t[1]}' "$WORK/out/e$e.start" "$WORK/out/e$e.end")
  iv=$(awk '{t[NR] = $1} END {print t[2] - t[1]}' "$WORK/snap/$e.time" "$WORK/snap/$((e + 1)).time")
  # The machine's CPU busy in the interval, in cores (all but idle and iowait in /proc/stat).
  busy=$(cat "$WORK/snap/$e.cpu" "$WORK/snap/$((e + 1)).cpu" | awk -v hz="$(getconf CLK_TCK)" -v iv="$iv" '
    {b[NR] = $2 + $3 + $4 + $7 + $8 + $9} END {printf "%.2f", (b[2] - b[1]) / hz / iv}')
  # What the PFS's throttle let through in the interval: bytes and requests of the blkio group.
  read -r db di < <(cat "$WORK/snap/$e.pfs" "$WORK/snap/$((e + 1)).pfs" |
    awk '{b[NR] = $1; i[NR] = $2} END {printf "%.0f %.0f\n", b[2] - b[1], i[2] - i[1]}')
  awk -v e="$e" -v w="$w" -v iv="$iv" -v busy="$busy" -v nc="$(nproc)" -v B="$BPS" -v I="$IOPS" \
    -v db="$db" -v di="$di" '$1 == "T" && $2 == e { if ($5 > lb) lb = $5; bb += $11 }
    END { if (B > 0 && db / B > lb) lb = db / B; if (I > 0 && di / I > lb) lb = di / I
      printf "# epoch %d: %.2f s wall (readers), %.2f s interval (snapshot to snapshot), lower bound %.2f s;" \
        " backing %.2f MB (daemons), PFS device %.2f MB in %d requests; machine busy %.2f of %d cores\n",
        e, w, iv, lb, bb / 1e6, db / 1e6, di, busy, nc
      printf "E %d %.3f %.3f %.3f %.2f %.0f %.0f\n", e, w, lb, iv, busy, db, di >> FILENAME }' "$TOTALS" |
    tee -a "$WORK/report.txt"
done

# ---- totals -----------------------------------------------------------------------------------
read -r GROUP_BYTES GROUP_IOS < <(pfs_group_reads)
# The daemons' peak RSS, summed (VmHWM): what the memory group's overhead allowance is for.
RSS_MIB=$(for p in "${DAEMON[@]}"; do awk '/VmHWM/ {print $2}' "/proc/$p/status"; done |
  awk '{s += $1} END {printf "%.0f\n", s / 1024}')
# Backing bytes and objects since the daemons started (placement and warm-up included).
read -r ALL_BB ALL_BO < <(awk '{bb += $3; bo += $4} END {printf "%.0f %.0f\n", bb, bo}' "$WORK/snap/$EPOCHS.txt")
JSON=$(awk -v k="$NODES" -v files="$FILES" -v data="$DATA_BYTES" -v ep="$EPOCHS" -v m="$LINK_MBIT" \
  -v B="$BPS" -v I="$IOPS" -v ram="$RAM" -v gb="$GROUP_BYTES" -v gi="$GROUP_IOS" \
  -v sampler="$SAMPLER" -v batch="$BATCH" -v rpn="$RANKS_PER_NODE" \
  -v oom="$(pfs_oom_kills)" -v abb="$ALL_BB" -v abo="$ALL_BO" -v rss="$RSS_MIB" '
  $1 == "T" { rd += $6; pin += $7; pout += $8; rx += $9; tx += $10; bb += $11; bo += $12
              erd[$2] += $6; epin[$2] += $7
              if ($13 != "ok") wrong++ }
  $1 == "E" { w[$2] = $3; lb[$2] = $4; iv[$2] = $5; busy[$2] = $6; db[$2] = $7; n++ }
  END {
    printf "{\"nodes\": %d, \"files\": %d, \"dataset_bytes\": %.0f, \"epochs\": %d, ", k, files, data, ep
    printf "\"link_mbit\": %d, ", m
    printf "\"pfs_bps\": %d, \"pfs_iops\": %d, \"ram_mib_per_node\": %d, \"epoch_seconds\": [", B, I, ram
    for (i = 0; i < n; i++) printf "%s%.2f", (i ? ", " : ""), w[i]
    printf "], \"epoch_interval_seconds\": ["
    for (i = 0; i < n; i++) printf "%s%.2f", (i ? ", " : ""), iv[i]
    printf "], \"epoch_lower_bound_seconds\": ["
    for (i = 0; i < n; i++) printf "%s%.2f", (i ? ", " : ""), lb[i]
    printf "], \"epoch_machine_busy_cores\": ["
    for (i = 0; i < n; i++) printf "%s%.2f", (i ? ", " : ""), busy[i]
    printf "], \"epoch_pfs_device_bytes\": ["
    for (i = 0; i < n; i++) printf "%s%.0f", (i ? ", " : ""), db[i]
    printf "], \"epoch_peer_fraction\": ["
    for (i = 0; i < n; i++) printf "%s%.4f", (i ? ", " : ""), (erd[i] ? epin[i] / erd[i] : 0)
    printf "], \"sampler\": \"%s\", \"batch\": %d, \"ranks_per_node\": %d, ", sampler, batch, rpn
    printf "\"peer_fraction\": %.4f, ", rd ? pin / rd : 0
    printf "\"bytes_read\": %.0f, \"peer_bytes_in\": %.0f, \"peer_bytes_out\": %.0f, ", rd, pin, pout
    printf "\"link_bytes_rx\": %.0f, \"link_bytes_tx\": %.0f, \"backing_bytes_in_epochs\": %.0f, ", rx, tx, bb
    printf "\"backing_bytes\": %.0f, \"backing_objects\": %.0f, \"backing_over_dataset\": %.3f, ", abb, abo, abb / data
    printf "\"pfs_group_bytes\": %.0f, \"pfs_group_ios\": %.0f, \"daemons_peak_rss_mib\": %d, ", gb, gi, rss
    printf "\"oom_kills\": %d, \"wrong_epochs\": %d}\n", oom, wrong
  }' "$TOTALS")
echo "$JSON" | tee -a "$WORK/report.txt"
if [[ -n $OUT ]]; then cp "$WORK/report.txt" "$OUT"; fi
grep -q '"wrong_epochs": 0}' <<<"$JSON" || die "some node read wrong bytes (see the sum column)"
log "done; stopping the daemons (MPI_Finalize over TCP may take its 10 s deadline)"
