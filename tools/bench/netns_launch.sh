#!/usr/bin/env bash
# netns_launch.sh: hydra's "ssh" into an emulated node (netns_lib.sh). mpiexec runs it as
#   netns_launch.sh [-x] HOST WORD...
# as it would run `ssh -x HOST WORD...`: HOST one of the -hosts addresses, the WORDs the proxy
# command hydra built (hydra_pmi_proxy and its options; hydra wraps the proxy's path in double
# quotes for the remote shell). ssh would join the WORDs and hand them to a shell on HOST; no
# shell is involved here: each WORD is taken as one argument, a WORD wholly in double quotes
# with nothing special inside loses the quotes, and any other WORD with a character outside
# [A-Za-z0-9_./:,=@+-] is refused. The first argument must be a hydra_pmi_proxy.
#
# HOST must be an address listed in the map file NETNS_MAP ("address namespace" per line,
# written by netns_setup), and its namespace a cfs<ID>n<i> that exists in /run/netns: nothing
# else is entered. The proxy then runs under `nsenter --net`: in the node's network namespace
# and the machine's everything else, so the FUSE mounts its daemon makes (the main mount and
# the control mount under /run/clairfs) are the machine's. (`ip netns exec` would put it in a
# mount namespace of its own, where they would stay.)
# Exit status: the proxy's, or 255 (ssh's "could not connect") on a refused host or word.
set -euo pipefail

fail() { echo "netns_launch: $*" >&2; exit 255; }

[[ ${1-} == -x ]] && shift
(($# >= 2)) || fail "usage: netns_launch.sh [-x] HOST COMMAND..."
host=$1
shift
[[ -n ${NETNS_MAP-} && -f $NETNS_MAP ]] || fail "NETNS_MAP is not set to the cluster's map file"
ns=""
while read -r addr name; do
  if [[ $addr == "$host" ]]; then ns=$name; break; fi
done <"$NETNS_MAP"
[[ -n $ns ]] || fail "host '$host' is not a node of this cluster ($NETNS_MAP)"
[[ $ns =~ ^cfs[0-9]{1,7}n[0-9]+$ && -e /run/netns/$ns ]] ||
  fail "host '$host' maps to '$ns', which is not a namespace netns_setup made"

argv=()
for w in "$@"; do
  if [[ $w =~ ^\"([A-Za-z0-9_./:,=@+-]+)\"$ ]]; then
    w=${BASH_REMATCH[1]}
  elif ! [[ $w =~ ^[A-Za-z0-9_./:,=@+-]+$ ]]; then
    fail "refusing a word with shell syntax in it: '$w'"
  fi
  argv+=("$w")
done
[[ ${argv[0]##*/} == hydra_pmi_proxy ]] || fail "not a hydra proxy: '${argv[0]}'"
exec nsenter --net="/run/netns/$ns" -- "${argv[@]}"
