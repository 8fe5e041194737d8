# Shared by the benchmark scripts (source it; set NAME first): logging, and a teardown that
# undoes every registered mount (newest first), then every registered process, then WORK, on
# success, error, INT and TERM. Register with MOUNTS+=("$dir") and PIDS+=("$pid"). Other
# steps (a loop device, a cgroup) go in CLEANUPS+=("command args"): run newest first, after
# the mounts and processes are gone and before WORK is removed.
# shellcheck shell=bash
WORK="" CHILD=""
MOUNTS=() PIDS=() CLEANUPS=()

die() { echo "$NAME: $*" >&2; exit 1; }
log() { echo "[$(date +%T)] $*" >&2; }
built() { date -u -r "$1" '+%Y-%m-%d %H:%M:%S UTC'; }
# page_cached DIR...: bytes of the files under DIR the page cache holds now, and their size:
# "CACHED TOTAL" (fincore, util-linux; "0 0" for no files).
page_cached() {
  find "$@" -type f -print0 2>/dev/null |
    xargs -0 -r fincore --bytes --noheadings --raw --output RES,SIZE 2>/dev/null |
    awk '{c += $1; t += $2} END {printf "%.0f %.0f\n", c, t}'
}
# wait_mounted MNT PID LOG [WHAT]: waits up to 30 s for MNT to be mounted while PID (the
# daemon, or what started it) runs; dies with the tail of LOG if PID exits or the time runs out.
wait_mounted() {
  local mnt=$1 pid=$2 logf=$3 what=${4:-clairfs} i
  for ((i = 0; i < 150; i++)); do
    is_mounted "$mnt" && return 0
    kill -0 "$pid" 2>/dev/null || die "$what exited before mounting $mnt: $(tail -20 "$logf")"
    sleep 0.2
  done
  die "$what did not mount $mnt within 30 s: $(tail -20 "$logf")"
}
# snapshot_binaries: copies CLAIRFS_BIN and BENCH_BIN into WORK and points both at the copies,
# so that a rebuild of build/ during the run cannot mix versions.
snapshot_binaries() {
  cp "$CLAIRFS_BIN" "$WORK/clairfs"
  cp "$BENCH_BIN" "$WORK/clairfs-bench"
  CLAIRFS_BIN=$WORK/clairfs BENCH_BIN=$WORK/clairfs-bench
}
# cluster_key_entry BIN FILE: for a daemon BIN that seals its cluster's messages (a build that
# knows cluster.key_file), a new secret at FILE (32 random bytes, mode 0600) and, on stdout, the
# YAML flow entry naming it (`, key_file: "FILE"`); for an older build, nothing.
cluster_key_entry() {
  grep -qa 'cluster.key_file' "$1" || return 0
  (umask 077 && head -c 32 /dev/urandom >"$2")
  printf ', key_file: "%s"' "$2"
}
is_mounted() { awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/mounts; }

unmount() {  # every mount stacked at $1: fusermount3 -u, then lazy -uz; each under a timeout
  local i
  for ((i = 0; i < 4; i++)); do
    is_mounted "$1" || return 0
    timeout 20 fusermount3 -u "$1" 2>/dev/null || timeout 20 fusermount3 -uz "$1" || true
  done
  is_mounted "$1" && echo "$NAME: could not unmount $1" >&2
  return 0
}

stop_pid() {  # wait up to 10 s for $1 to exit by itself, then TERM, then KILL; reap it
  local p=$1 i state
  for ((i = 0; i < 60; i++)); do
    state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || echo gone)
    [[ $state == gone || $state == Z ]] && break
    ((i == 50)) && kill -TERM "$p" 2>/dev/null
    sleep 0.2
  done
  kill -KILL "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
}

teardown() {  # undo every mount and process registered so far; safe to call repeatedly
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    log "teardown: unmount ${MOUNTS[i]}"
    unmount "${MOUNTS[i]}"
  done
  for i in "${PIDS[@]}"; do
    log "teardown: stop pid $i"
    stop_pid "$i"
  done
  MOUNTS=() PIDS=()
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e  # best effort from here on: a failing step must not skip the rest of the teardown
  [[ -n $CHILD ]] && log "teardown: stop pid $CHILD" && kill -TERM "$CHILD" 2>/dev/null &&
    wait "$CHILD" 2>/dev/null
  teardown
  local j
  for ((j = ${#CLEANUPS[@]} - 1; j >= 0; j--)); do
    log "teardown: ${CLEANUPS[j]}"
    eval "${CLEANUPS[j]}"
  done
  CLEANUPS=()
  [[ -n $WORK && -d $WORK ]] && rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs "$@" as a background child so INT/TERM interrupt the wait at once (cleanup kills it).
run() { "$@" & CHILD=$!; local rc=0; wait "$CHILD" || rc=$?; CHILD=""; return "$rc"; }

# The command line, one parser for every script. The script declares its options, then calls
# parse_options "$@" (after setting the defaults):
#   declare -A OPTIONS=([--files]=FILES [--check]=CHECK=1 [--]=ARGS)
# An entry VAR takes a value (--files N sets FILES=N); VAR=value is a flag (--check sets
# CHECK=1, as written); [--]=ARGS lets "--" end the options, the words after it left in the
# array ARGS (empty otherwise). -h/--help prints the script's header comment (line 2 up to
# `set -euo pipefail`) and exits 0; an unknown option, or one missing its value, dies. Then a
# non-empty OUT (--out FILE, where a script has it) is made absolute.
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
# shellcheck disable=SC2034  # ARGS is read by the script that sourced this file
parse_options() {
  local spec
  ARGS=()
  while (($# > 0)); do
    case "$1" in
      -h|--help) usage; exit 0 ;;
    esac
    spec=${OPTIONS[$1]-}
    if [[ -z $spec ]]; then
      die "unknown argument: $1 (see --help)"
    elif [[ $1 == -- ]]; then
      shift
      ARGS=("$@")
      break
    elif [[ $spec == *=* ]]; then
      printf -v "${spec%%=*}" '%s' "${spec#*=}"
      shift
    else
      (($# >= 2)) || die "$1 needs a value (see --help)"
      printf -v "$spec" '%s' "$2"
      shift 2
    fi
  done
  if [[ -n ${OUT-} ]]; then OUT=$(realpath -m "$OUT"); fi
}
