# netns_lib.sh: an emulated cluster of K nodes on one machine, with a real network stack between
# them (source lib.sh first; the test suite drives it through netns_cluster.sh).
#
# Each node is a network namespace with its own loopback and one veth interface whose other end
# is a port of a bridge in the root namespace. The bridge has SUBNET.1, node i has
# SUBNET.(10 + i), on a /24 no route or address of the root namespace touches yet. Each node's
# link is capped with a tbf qdisc at both of its ends: the node's end shapes what it sends, the
# bridge's end what it receives, so the cap holds in each direction on its own, like a
# full-duplex NIC. This kernel has no netem: there is no latency, loss or jitter emulation, only
# bandwidth.
#
# Processes enter a node with `nsenter --net`, which changes the network namespace and nothing
# else: the FUSE mounts a daemon makes inside a node (its mount, and its control mount under
# /run/clairfs) are the machine's, visible to everyone. `ip netns exec` would unshare the mount
# namespace and keep them in it. The pid namespace, the file systems, /dev/shm and the host name
# are shared too, which is why MPI must be told to use TCP (netns_mpi_env) rather than discover
# shared memory.
#
# The node's interface has the bridge's name, NETNS_DEV = NETNS_BRIDGE. Why: UCX finds its TCP
# devices by listing /sys/class/net and then asks the kernel (ioctls on a socket, which answer
# for the caller's network namespace) whether each is up and what its address is; a process
# that entered a node with nsenter still sees the machine's sysfs, whose /sys/class/net lists
# the root namespace's interfaces. A node interface named like one of those (the bridge) is
# listed, and the ioctls then find the node's own. (A sysfs of the node's namespace would need
# a mount namespace, and with it the mounts problem above.)
#
# Names: everything carries the prefix cfs<ID> (ID: digits, the owner's pid by default), which
# is how netns_teardown finds it again without any state, and how netns_sweep recognises what a
# killed owner left: namespaces cfs<ID>n<i>, host-side veths cfs<ID>h<i>, the bridge cfs<ID>br.
#
# MPI: hydra's mpiexec starts one proxy per host through a launcher (netns_launch.sh) that takes
# the host, an address from NETNS_IPS, to its namespace through a map file (NETNS_MAP) and
# refuses anything else; netns_mpiexec_args prints the options that wire this up.
#
# Everything created is registered in CLEANUPS (lib.sh) as one netns_teardown, undone on exit,
# error, INT, TERM. Root only (CAP_NET_ADMIN, CAP_SYS_ADMIN for nsenter).
# shellcheck shell=bash

NETNS_ID="" NETNS_PREFIX="" NETNS_SUBNET="" NETNS_BRIDGE="" NETNS_DEV="" NETNS_MAP="" NETNS_MBIT=""
NETNS_HOSTS=() NETNS_IPS=() NETNS_VETHS=()
NETNS_LAUNCHER=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/netns_launch.sh

# netns_usable: prints why this machine cannot host the emulated cluster and returns 1, or
# returns 0 silently. Checks root, ip/tc/nsenter, the veth and bridge drivers (by making and
# removing a throwaway namespace and bridge), mpiexec and /dev/fuse.
netns_usable() {
  local t tag="cfsprobe$$"
  ((EUID == 0)) || { echo "not root (namespaces, veths and tc need CAP_NET_ADMIN)"; return 1; }
  for t in ip tc nsenter mpiexec fusermount3; do
    command -v "$t" >/dev/null || { echo "$t is not on PATH"; return 1; }
  done
  [[ -c /dev/fuse ]] || { echo "/dev/fuse is missing"; return 1; }
  if ! ip netns add "$tag" 2>/dev/null; then
    echo "cannot create a network namespace (ip netns add)"
    return 1
  fi
  if ! ip link add "${tag:0:12}b" type bridge 2>/dev/null; then
    ip netns del "$tag"
    echo "cannot create a bridge (ip link add type bridge)"
    return 1
  fi
  ip link del "${tag:0:12}b"
  if ! ip link add "${tag:0:12}v" type veth peer name "${tag:0:12}w" netns "$tag" 2>/dev/null; then
    ip netns del "$tag"
    echo "cannot create a veth pair into a namespace"
    return 1
  fi
  if ! tc qdisc add dev "${tag:0:12}v" root tbf rate 100mbit burst 64kb latency 50ms \
    2>/dev/null; then
    ip link del "${tag:0:12}v" 2>/dev/null
    ip netns del "$tag"
    echo "cannot add a tbf qdisc (sch_tbf missing?)"
    return 1
  fi
  ip link del "${tag:0:12}v" 2>/dev/null
  ip netns del "$tag"
  return 0
}

# netns_free_subnet: prints the first A.B.C of 10.77.0.0/24 .. 10.77.255.0/24 that no route and
# no address of the root namespace touches (dies when none is free). Two clusters set up at the
# same moment could pick the same one; one after the other (each bridge has its address before
# netns_setup returns) cannot.
netns_free_subnet() {
  local c used
  used=$(ip -4 route show table all; ip -4 -o addr show)
  for ((c = 0; c < 256; c++)); do
    grep -qE "(^|[^0-9])10\.77\.$c\." <<<"$used" || { echo "10.77.$c"; return 0; }
  done
  die "netns: no free 10.77.X.0/24 subnet"
}

# netns_tbf DEV MBIT [NAMESPACE]: caps DEV's egress at MBIT Mbit/s with a token bucket. The
# bucket holds 10 ms at the rate but at least 64 KiB (one GSO super-packet must fit, or tbf
# drops it); up to 50 ms of packets wait in the queue before tbf drops.
netns_tbf() {
  local burst=$(($2 * 1000000 / 8 / 100))
  ((burst >= 65536)) || burst=65536
  tc ${3:+-n "$3"} qdisc add dev "$1" root tbf rate "${2}mbit" burst "$burst" latency 50ms ||
    die "netns: tc tbf on $1${3:+ in $3} failed"
}

# netns_setup K MBIT MAPFILE [ID]: creates the bridge and K nodes with links capped at MBIT
# Mbit/s each way (0: no cap), writes MAPFILE ("address namespace" per line, for the launcher)
# and exports NETNS_MAP=MAPFILE. Sets NETNS_ID, NETNS_PREFIX, NETNS_SUBNET, NETNS_BRIDGE,
# NETNS_DEV, NETNS_HOSTS, NETNS_IPS, NETNS_VETHS. ID defaults to $$ (the calling script's pid).
netns_setup() {
  local k=$1 i ns veth peer
  if ! [[ $k =~ ^[1-9][0-9]*$ ]] || ((k > 200)); then die "netns: 1..200 nodes, not '$k'"; fi
  [[ $2 =~ ^[0-9]+$ ]] || die "netns: link Mbit/s must be an integer, not '$2'"
  NETNS_MBIT=$2 NETNS_MAP=$3 NETNS_ID=${4:-$$}
  [[ $NETNS_ID =~ ^[0-9]{1,7}$ ]] || die "netns: the id must be 1 to 7 digits, not '$NETNS_ID'"
  NETNS_PREFIX=cfs$NETNS_ID NETNS_BRIDGE=cfs${NETNS_ID}br NETNS_DEV=cfs${NETNS_ID}br
  ! ip netns list | grep -q "^${NETNS_PREFIX}n" ||
    die "netns: namespaces ${NETNS_PREFIX}n* exist already"
  NETNS_SUBNET=${NETNS_SUBNET:-$(netns_free_subnet)}
  CLEANUPS+=("netns_teardown $NETNS_ID")
  ip link add "$NETNS_BRIDGE" type bridge || die "netns: cannot create bridge $NETNS_BRIDGE"
  ip addr add "$NETNS_SUBNET.1/24" dev "$NETNS_BRIDGE"
  ip link set "$NETNS_BRIDGE" up
  NETNS_HOSTS=() NETNS_IPS=() NETNS_VETHS=()
  : >"$NETNS_MAP"
  for ((i = 0; i < k; i++)); do
    ns=${NETNS_PREFIX}n$i veth=${NETNS_PREFIX}h$i peer=${NETNS_PREFIX}p$i
    ip netns add "$ns" || die "netns: cannot create namespace $ns"
    ip link add "$veth" type veth peer name "$peer" netns "$ns" ||
      die "netns: cannot create veth $veth"
    ip -n "$ns" link set "$peer" name "$NETNS_DEV"
    ip -n "$ns" addr add "$NETNS_SUBNET.$((10 + i))/24" dev "$NETNS_DEV"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$NETNS_DEV" up
    ip link set "$veth" master "$NETNS_BRIDGE" up
    if ((NETNS_MBIT > 0)); then
      netns_tbf "$NETNS_DEV" "$NETNS_MBIT" "$ns"  # what the node sends
      netns_tbf "$veth" "$NETNS_MBIT"             # what the node receives
    fi
    NETNS_HOSTS+=("$ns") NETNS_IPS+=("$NETNS_SUBNET.$((10 + i))") NETNS_VETHS+=("$veth")
    echo "$NETNS_SUBNET.$((10 + i)) $ns" >>"$NETNS_MAP"
  done
  export NETNS_MAP
  netns_wait_up
  local cap=uncapped
  ((NETNS_MBIT == 0)) || cap="$NETNS_MBIT Mbit/s each way"
  log "netns: $k nodes ${NETNS_PREFIX}n0..$((k - 1)) at $NETNS_SUBNET.10..$((9 + k)), bridge" \
    "$NETNS_BRIDGE ($NETNS_SUBNET.1), links $cap"
}

# netns_wait_up: until every node's link is up at both ends and its bridge port forwards (3 in
# brport/state); dies after 10 s.
netns_wait_up() {
  local veth i
  for veth in "${NETNS_VETHS[@]}"; do
    for ((i = 0; i < 100; i++)); do
      [[ $(cat "/sys/class/net/$veth/operstate") == up &&
        $(cat "/sys/class/net/$veth/brport/state") == 3 ]] && continue 2
      sleep 0.1
    done
    die "netns: $veth is not up and forwarding after 10 s"
  done
}

# netns_teardown [ID]: kills every process still in a node of ID (NETNS_ID by default; only
# what was started into them can be there), deletes the namespaces, the veths and the bridge.
# Needs no state but the id; safe to call repeatedly and on a half-made cluster.
netns_teardown() {
  local id=${1:-$NETNS_ID} p ns pids i dev
  [[ $id =~ ^[0-9]{1,7}$ ]] || return 0
  for ns in $(ip netns list 2>/dev/null | awk -v p="cfs${id}n" 'index($1, p) == 1 {print $1}'); do
    [[ $ns =~ ^cfs${id}n[0-9]+$ ]] || continue
    for ((i = 0; i < 20; i++)); do
      pids=$(ip netns pids "$ns" 2>/dev/null)
      [[ -n $pids ]] || break
      for p in $pids; do kill -KILL "$p" 2>/dev/null; done
      sleep 0.1
    done
    [[ -z $pids ]] || log "netns: processes $pids would not leave $ns"
    ip netns del "$ns" || log "netns: could not delete namespace $ns"
  done
  for dev in $(ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}'); do
    [[ $dev =~ ^cfs${id}(h[0-9]+|br)$ ]] || continue
    ip link del "$dev" 2>/dev/null || true  # a veth goes with its namespace's end
  done
}

# netns_sweep: tears down the clusters of owners that are gone (cfs<ID> with no process ID), as
# a SIGKILLed owner leaves them. Returns the number swept through NETNS_SWEPT.
netns_sweep() {
  local id
  NETNS_SWEPT=0
  for id in $( (ip netns list 2>/dev/null | awk '{print $1}'
    ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}') |
    sed -nE 's/^cfs([0-9]{1,7})(n[0-9]+|h[0-9]+|br)$/\1/p' | sort -u); do
    [[ -d /proc/$id ]] && continue
    log "netns: sweeping cfs$id (owner $id is gone)"
    netns_teardown "$id"
    NETNS_SWEPT=$((NETNS_SWEPT + 1))
  done
}

# netns_exec I CMD...: runs CMD in node I's network namespace (and nothing else's).
netns_exec() {
  local i=$1
  shift
  nsenter --net="/run/netns/${NETNS_HOSTS[i]}" -- "$@"
}

# netns_link_bytes I: "RX TX", the bytes node I's interface received and sent so far.
netns_link_bytes() {
  local d=/sys/class/net/${NETNS_VETHS[$1]}/statistics
  # The host-side end: what it transmits the node receives, and the other way round.
  echo "$(cat "$d/tx_bytes") $(cat "$d/rx_bytes")"
}

# netns_mpi_env: exports the environment that keeps MPICH (ch4:ucx) on TCP between the nodes:
# UCX's TCP transport alone on NETNS_DEV (the nodes share one kernel and one /dev/shm: without
# UCX_TLS, UCX moves the bytes through shared memory and none crosses a link), and MPICH told
# that no two ranks share a node (MPIR_CVAR_NOLOCAL), so its own shared-memory path stays off.
netns_mpi_env() {
  export UCX_TLS=tcp UCX_NET_DEVICES=$NETNS_DEV MPIR_CVAR_NOLOCAL=1
}

# netns_mpiexec_args: prints, one per line, the mpiexec options that start one proxy in each
# node through the launcher: -launcher ssh -launcher-exec LAUNCHER -iface BRIDGE (mpiexec's
# control port listens on the bridge's address, which every node reaches) -hosts IP,IP,...
# (addresses: no /etc/hosts entries needed; the launcher maps them to namespaces).
netns_mpiexec_args() {
  local IFS=,
  printf '%s\n' -launcher ssh -launcher-exec "$NETNS_LAUNCHER" -iface "$NETNS_BRIDGE" \
    -hosts "${NETNS_IPS[*]}"
}
