# pfs_lib.sh: an emulated parallel file system for the benchmark scripts (source lib.sh first).
#
# A slow shared file system, on one machine: an ext4 image on a loop device, mounted with
# noatime, whose reads are throttled by a cgroup-v1 blkio group (read bytes/s and read IOPS on
# the loop device), with a cgroup-v1 memory group of the same name that caps how much of it the
# processes inside may keep in the page cache. Processes run inside both groups through
# pfs_exec; the throttle is shared by everything inside, like a node's share of a PFS.
#
# Why the memory group: this machine has 24 GiB of page cache and every dataset here is far
# smaller, so without a cap every read after the first would come from memory, for the data
# loader reading the PFS directly and for clairfs's own reads of the backing store alike. A
# PFS holding a training set does not fit in a node's page cache either. The cap is the
# memory of the processes inside (a clairfs daemon's tiers) plus a small page-cache allowance;
# page cache charged to the group is reclaimed first, as the group has no swap to push to.
#
# Why the loop device has direct I/O on: otherwise the image file's own pages would be cached
# a second time, outside the cap. pfs_remount drops the file system's page cache between runs
# without touching the rest of the machine's (what `echo 3 > /proc/sys/vm/drop_caches` would
# do, to everyone).
#
# Everything set up is registered in CLEANUPS (lib.sh) and undone on exit, error, INT, TERM:
# the ext4 mount, the loop device, both cgroups (after killing any process left inside).
# shellcheck shell=bash

PFS_IMG="" PFS_MNT="" PFS_LOOP="" PFS_DEV="" PFS_DEVNUM="" PFS_BLKIO="" PFS_MEMCG=""

# pfs_setup IMAGE SIZE_MIB MOUNTPOINT: creates the image, attaches it (direct I/O), mounts it.
# Sets PFS_LOOP (/dev/loopN), PFS_DEV (loopN), PFS_DEVNUM (major:minor).
pfs_setup() {
  PFS_IMG=$1 PFS_MNT=$3
  command -v mkfs.ext4 >/dev/null || die "need mkfs.ext4 (e2fsprogs)"
  command -v losetup >/dev/null || die "need losetup (util-linux)"
  truncate -s "${2}M" "$PFS_IMG"
  mkfs.ext4 -F -q -m 0 -E lazy_itable_init=0,lazy_journal_init=0 "$PFS_IMG" ||
    die "mkfs.ext4 $PFS_IMG failed"
  CLEANUPS+=("pfs_detach")
  PFS_LOOP=$(losetup --direct-io=on -f --show "$PFS_IMG") || die "losetup failed"
  PFS_DEV=${PFS_LOOP#/dev/}
  PFS_DEVNUM=$(cat "/sys/block/$PFS_DEV/dev")
  [[ $(cat "/sys/block/$PFS_DEV/loop/dio" 2>/dev/null) == 1 ]] ||
    log "pfs: warning: $PFS_LOOP has direct I/O off; the image file is cached outside the cap"
  mkdir -p "$PFS_MNT"
  CLEANUPS+=("pfs_umount")
  mount -o noatime "$PFS_LOOP" "$PFS_MNT" || die "mount $PFS_LOOP $PFS_MNT failed"
  log "pfs: $PFS_IMG (${2} MiB ext4) on $PFS_LOOP ($PFS_DEVNUM, dio on) at $PFS_MNT"
}

# Unmounts the image (lazily if busy after 10 tries). Safe to call when not mounted.
pfs_umount() {
  local i
  [[ -n $PFS_MNT ]] || return 0
  for ((i = 0; i < 10; i++)); do
    is_mounted "$PFS_MNT" || return 0
    umount "$PFS_MNT" 2>/dev/null && return 0
    sleep 0.5
  done
  log "pfs: $PFS_MNT busy; lazy unmount"
  umount -l "$PFS_MNT"
}

# Detaches every loop device backed by the image (found by its backing file).
pfs_detach() {
  local dev
  [[ -n $PFS_IMG ]] || return 0
  for dev in $(losetup -j "$PFS_IMG" -O NAME -n 2>/dev/null); do
    losetup -d "$dev" || log "pfs: could not detach $dev"
  done
}

# Drops the file system's page cache and its inode and dentry caches: sync, unmount, mount.
pfs_remount() {
  sync -f "$PFS_MNT"
  umount "$PFS_MNT" || die "pfs: cannot unmount $PFS_MNT to drop its cache (still in use?)"
  mount -o noatime "$PFS_LOOP" "$PFS_MNT" || die "pfs: cannot mount $PFS_LOOP again"
}

# pfs_cgroups NAME: creates /sys/fs/cgroup/{blkio,memory}/NAME (cgroup v1).
pfs_cgroups() {
  local root=/sys/fs/cgroup
  [[ -f $root/blkio/blkio.throttle.read_bps_device ]] ||
    die "pfs: cgroup-v1 blkio controller not mounted at $root/blkio"
  [[ -f $root/memory/memory.limit_in_bytes ]] || die "pfs: cgroup-v1 memory controller missing"
  PFS_BLKIO=$root/blkio/$1 PFS_MEMCG=$root/memory/$1
  CLEANUPS+=("pfs_rmcg $PFS_BLKIO")
  mkdir "$PFS_BLKIO" || die "pfs: cannot create $PFS_BLKIO"
  CLEANUPS+=("pfs_rmcg $PFS_MEMCG")
  mkdir "$PFS_MEMCG" || die "pfs: cannot create $PFS_MEMCG"
}

# pfs_throttle BYTES_PER_S IOPS: read limits on the loop device for the group (0 = no limit).
pfs_throttle() {
  echo "$PFS_DEVNUM $1" >"$PFS_BLKIO/blkio.throttle.read_bps_device"
  echo "$PFS_DEVNUM $2" >"$PFS_BLKIO/blkio.throttle.read_iops_device"
}

# pfs_memlimit BYTES: caps the memory group (processes' memory plus the page cache they use).
pfs_memlimit() {
  echo "$1" >"$PFS_MEMCG/memory.limit_in_bytes" || die "pfs: cannot set memory limit $1"
  echo 0 >"$PFS_MEMCG/memory.max_usage_in_bytes" 2>/dev/null || true  # reset the peak
}

# Kills what is left in a cgroup (only processes this script started can be there), removes it.
pfs_rmcg() {
  local dir=$1 i p
  [[ -d $dir ]] || return 0
  for ((i = 0; i < 20; i++)); do
    [[ -s $dir/cgroup.procs ]] || break
    for p in $(cat "$dir/cgroup.procs"); do kill -KILL "$p" 2>/dev/null; done
    sleep 0.25
  done
  for ((i = 0; i < 20; i++)); do rmdir "$dir" 2>/dev/null && return 0; sleep 0.25; done
  log "pfs: could not remove $dir"
}

# pfs_exec CMD...: replaces the calling subshell by CMD inside both groups. Call it only in a
# child: `pfs_exec cmd &` or `run pfs_exec cmd`; threads and children started by CMD stay in.
pfs_exec() {
  [[ $BASHPID != "$$" ]] || die "pfs_exec must run in a subshell"
  echo "$BASHPID" >"$PFS_BLKIO/cgroup.procs" || exit 125
  echo "$BASHPID" >"$PFS_MEMCG/cgroup.procs" || exit 125
  exec "$@"
}

# Bytes and requests read from the loop device since boot, by everyone: "BYTES IOS".
pfs_dev_reads() { awk '{printf "%.0f %.0f\n", $3 * 512, $1}' "/sys/block/$PFS_DEV/stat"; }

# Bytes and bios the group read from the loop device (what the throttle counted): "BYTES IOS".
pfs_group_reads() {
  local b i
  b=$(awk -v d="$PFS_DEVNUM" '$1 == d && $2 == "Read" {print $3}' "$PFS_BLKIO/blkio.throttle.io_service_bytes")
  i=$(awk -v d="$PFS_DEVNUM" '$1 == d && $2 == "Read" {print $3}' "$PFS_BLKIO/blkio.throttle.io_serviced")
  echo "${b:-0} ${i:-0}"
}

# OOM kills in the memory group so far (0 when the kernel does not report them).
pfs_oom_kills() { awk '$1 == "oom_kill" {print $2; f = 1} END {if (!f) print 0}' "$PFS_MEMCG/memory.oom_control"; }

# pfs_check SECONDS BPS IOPS BENCH ROOT LIST: reads the files of LIST (relative to ROOT) with
# 4 threads inside the group under three limits in turn (bytes/s only, IOPS only, both), each
# from a cold cache for at most SECONDS, and prints one markdown table row per limit with what
# the group read per second. Leaves the limits unset.
pfs_check() {
  local secs=$1 bps=$2 iops=$3 bench=$4 root=$5 list=$6 l b0 i0 b1 i1 t0 t1
  for l in "$bps 0" "0 $iops" "$bps $iops"; do
    pfs_remount
    # shellcheck disable=SC2086
    pfs_throttle $l
    read -r b0 i0 < <(pfs_group_reads)
    t0=$(date +%s.%N)
    (pfs_exec timeout -s INT "$secs" "$bench" --root "$root" --list "$list" --threads 4 \
      >/dev/null 2>&1) || true
    t1=$(date +%s.%N)
    read -r b1 i1 < <(pfs_group_reads)
    # shellcheck disable=SC2086
    awk -v l="$l" -v b=$((b1 - b0)) -v i=$((i1 - i0)) -v t0="$t0" -v t1="$t1" 'BEGIN {
      split(l, x, " "); t = t1 - t0
      printf "| %s | %s | %.1f | %.1f | %.0f | %.1f |\n", x[1] ? sprintf("%.1f MB/s", x[1] / 1e6) : "-",
        x[2] ? x[2] : "-", t, b / t / 1e6, i / t, b / (i ? i : 1) / 1e3 }'
  done
  pfs_throttle 0 0
}
