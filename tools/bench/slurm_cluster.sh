#!/usr/bin/env bash
# slurm_cluster.sh: one cache for a multi-node job under a real Slurm of K emulated nodes, then
# the job requeued with one node swapped, or on K2 nodes (grown or shrunk) (tools/bench/slurm_cluster.py says what it runs and
# prints; docs/benchmarks.md, "A multi-node job under Slurm").
#
# Usage: tools/bench/slurm_cluster.sh [--nodes K] [--requeue-nodes K2] [--sampler distributed|locality] [--epochs E]
#          [--files N] [--mean-kb KB] [--link-mbit M] [--batch B] [--tier ssd|ram]
#          [--clairfs-bin PATH] [--build DIR] [--tmp DIR]
# Defaults: K 4, K2 K (one node swapped; K+1: every node stays and one joins; K-1: one leaves),
# distributed, E 3, 2000 files of mean 32 KB, links 100 Mbit/s, batch 32, tier
# ssd, the build in build/, /var/tmp. Root only (namespaces, Slurm's daemons). Last line: one
# JSON object. Env: PYTHON (default /usr/bin/python3), CLAIRFS_BENCH_KEEP=1 keeps the directory.
set -euo pipefail

NODES=4 REQUEUE_NODES=0 SAMPLER=distributed EPOCHS=3 FILES=2000 MEAN_KB=32 LINK_MBIT=100 BATCH=32 TIER=ssd
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CLAIRFS_BIN=$REPO/build/daemon/clairfs BUILD=$REPO/build TMPBASE=/var/tmp
PYTHON=${PYTHON:-/usr/bin/python3}

NAME=slurm_cluster
# shellcheck source=tools/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
declare -A OPTIONS=([--nodes]=NODES [--requeue-nodes]=REQUEUE_NODES [--sampler]=SAMPLER
  [--epochs]=EPOCHS [--files]=FILES [--mean-kb]=MEAN_KB [--link-mbit]=LINK_MBIT [--batch]=BATCH [--tier]=TIER
  [--clairfs-bin]=CLAIRFS_BIN [--build]=BUILD [--tmp]=TMPBASE)
parse_options "$@"
((EUID == 0)) || die "run as root (network and mount namespaces, Slurm's daemons)"
exec "$PYTHON" "$REPO/tools/bench/slurm_cluster.py" --nodes "$NODES" \
  --requeue-nodes "$REQUEUE_NODES" --sampler "$SAMPLER" --epochs "$EPOCHS" --files "$FILES" \
  --mean-kb "$MEAN_KB" --link-mbit "$LINK_MBIT" --batch "$BATCH" --tier "$TIER" \
  --clairfs-bin "$CLAIRFS_BIN" --build "$BUILD" --tmp "$TMPBASE"
