#!/usr/bin/env bash
# cluster_scale.sh: the cluster's planning at N nodes, simulated on this machine with the real
# planning code (build/tools/bench/clairfs-cluster-scale; what it simulates and how: the header
# of tools/bench/cluster_scale.cc, and docs/benchmarks.md, "A thousand nodes").
#
# Usage: tools/bench/cluster_scale.sh --nodes N [--files F] [--epochs E]
#          [--sampler distributed|locality [--ranks-per-node R] [--batch B]
#           [--node-names NAME,NAME,...]]
#          [--capacity BYTES[,BYTES]] [--mean-bytes B] [--sample-coordinators K] [--seed S]
#          [--churn] [--manifests M0,M1,... --dataset DIR] [--staging BYTES]
# Defaults: 1,281,167 files (ImageNet's training set) of 110 KiB on average, 90 epochs, the
#   DistributedSampler split, one tier of 2 x dataset / N per node.
#   --churn adds what a node leaving costs; --manifests simulates those ranks' orders over the
#   files of DIR instead of the sampler's. --sampler locality: clairfs.LocalitySampler's split
#   (docs/pytorch.md, "Locality-aware batches") of global batches of B samples per rank
#   (default 32), R ranks per node (default 1); the JSON adds assigned_away, the share of all
#   nodes' samples given to a node not holding them. --node-names: the holders keyed by these
#   names (the sampler's nodes=; sets --nodes), else numbered.
# Env: CLUSTER_SCALE_BIN (default build/tools/bench/clairfs-cluster-scale of this checkout).
# Progress on stderr; the last line on stdout is one JSON object: nodes, plan_bytes_sent,
# plan_bytes_received, plan_memory_bytes (per node), plan_seconds, read_local, read_peer,
# read_backing (node 0's reads in epochs 2+), backing_reads_per_file, and more.
set -euo pipefail
NAME=cluster_scale
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${CLUSTER_SCALE_BIN:-$HERE/../../build/tools/bench/clairfs-cluster-scale}

PASS=()  # the options, checked here, handed to the binary as given
declare -A OPTIONS=([--churn]=FLAG=1)
for opt in --nodes --files --epochs --sampler --capacity --mean-bytes --sample-coordinators \
  --seed --manifests --dataset --staging --ranks-per-node --batch --node-names; do
  OPTIONS[$opt]=VALUE
done
while (($# > 0)); do
  VALUE="" FLAG=""
  if [[ $1 == --churn || $1 == -h || $1 == --help ]]; then
    parse_options "$1"
    PASS+=("$1")
    shift
  else
    parse_options "$1" ${2+"$2"}  # dies on an unknown option, or one without its value
    PASS+=("$1" "$2")
    shift 2
  fi
done
[[ -x $BIN ]] || die "$BIN not built (meson compile -C build)"
exec "$BIN" "${PASS[@]}"
