#!/usr/bin/env bash
# slurm_cluster.sh: one cache for a multi-node job under a real Slurm of K emulated nodes, then
# the job requeued with one node swapped (tools/bench/slurm_cluster.py says what it runs and
# prints; docs/benchmarks.md, "A multi-node job under Slurm").
#
# Usage: tools/bench/slurm_cluster.sh [--nodes K] [--sampler distributed|locality] [--epochs E]
#          [--files N] [--mean-kb KB] [--link-mbit M] [--batch B] [--clairfs-bin PATH]
#          [--build DIR] [--tmp DIR] [--tier ssd|ram]
# Defaults: K 4, distributed, E 3, 2000 files of mean 32 KB, links 100 Mbit/s, batch 32, the
# build in build/, /var/tmp, tier ssd. Root only (namespaces, Slurm's daemons). Last line: one JSON object.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/slurm_cluster.py" "$@"
