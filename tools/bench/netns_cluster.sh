#!/usr/bin/env bash
# netns_cluster.sh: netns_lib.sh's emulated cluster from the command line, for callers that are
# not bash scripts (tests/mpi/test_netns_cluster.py). One action per run:
#   usable                 exit 0, or print why this machine cannot host the cluster and exit 77
#   up --nodes K --link-mbit M --id ID --map FILE
#                          sweeps what dead owners left (netns_sweep), creates the bridge and K
#                          nodes of id ID with links of M Mbit/s (0: uncapped), writes the
#                          launcher's map FILE, and prints the cluster as KEY=VALUE lines:
#                          subnet, bridge, dev, launcher, then host_I, ip_I, veth_I per node.
#                          Leaves it all up on success; on a failure undoes what it made, exit 1.
#   down --id ID           undoes `up` (netns_teardown ID), killing what is still inside the
#                          nodes. Unmount the FUSE mounts of their daemons first.
# The owner of ID (a pid) should be the caller, so that a later `up` can sweep its cluster if
# it dies without `down`. Root only.
set -euo pipefail

NODES="" MBIT="" ID="" MAP=""
NAME=netns_cluster
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tools/bench/netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"

ACTION=""
if [[ ${1-} != -* ]]; then  # an option first (--help) goes to parse_options
  ACTION=${1-}
  shift || true
fi
declare -A OPTIONS=([--nodes]=NODES [--link-mbit]=MBIT [--id]=ID [--map]=MAP)
parse_options "$@"

case $ACTION in
  usable)
    if ! reason=$(netns_usable); then
      echo "$reason"
      exit 77
    fi
    ;;
  up)
    [[ -n $NODES && -n $MBIT && -n $ID && -n $MAP ]] ||
      die "up needs --nodes, --link-mbit, --id, --map"
    netns_sweep
    netns_setup "$NODES" "$MBIT" "$MAP" "$ID"
    echo "subnet=$NETNS_SUBNET"
    echo "bridge=$NETNS_BRIDGE"
    echo "dev=$NETNS_DEV"
    echo "launcher=$NETNS_LAUNCHER"
    for ((i = 0; i < NODES; i++)); do
      echo "host_$i=${NETNS_HOSTS[i]}"
      echo "ip_$i=${NETNS_IPS[i]}"
      echo "veth_$i=${NETNS_VETHS[i]}"
    done
    CLEANUPS=()  # success: the caller owns the cluster now, and takes it down with `down`
    ;;
  down)
    [[ -n $ID ]] || die "down needs --id"
    netns_teardown "$ID"
    ;;
  *) die "unknown action '$ACTION' (usable, up, down; see --help)" ;;
esac
