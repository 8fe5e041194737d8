#!/usr/bin/env bash
# cluster_scale.sh: the cluster's planning at N nodes, simulated on this machine with the real
# planning code (build/tools/bench/clairfs-cluster-scale; what it simulates and how: the header
# of tools/bench/cluster_scale.cc, and docs/benchmarks.md, "A thousand nodes").
#
# Usage: tools/bench/cluster_scale.sh --nodes N [--files F] [--epochs E]
#          [--sampler distributed] [--protocol partitioned|broadcast] [--capacity BYTES]
#          [--mean-bytes B] [--sample-coordinators K] [--seed S]
# Defaults: 1,281,167 files (ImageNet's training set) of 110 KiB on average, 90 epochs, the
#   DistributedSampler split, today's partitioned protocol, capacity 2 x dataset / N per node.
# Env: CLUSTER_SCALE_BIN (default build/tools/bench/clairfs-cluster-scale of this checkout).
# Progress on stderr; the last line on stdout is one JSON object: nodes, plan_bytes_sent,
# plan_bytes_received, plan_memory_bytes (per node), plan_seconds, read_local, read_peer,
# read_backing (node 0's reads in epochs 2+), backing_reads_per_file, and more.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${CLUSTER_SCALE_BIN:-$HERE/../../build/tools/bench/clairfs-cluster-scale}
[[ -x $BIN ]] || { echo "cluster_scale: $BIN not built (meson compile -C build)" >&2; exit 1; }
exec "$BIN" "$@"
