#!/usr/bin/env python3
"""Prints a clairfs manifest for DIR: every regular file, in a seeded shuffle per epoch, as a
data loader with a seeded RandomSampler would read them. With --rank/--world the epoch's order
is split across ranks like DistributedSampler (rank r takes every world-th entry).

With --sampler locality (needs torch and numpy): --world nodes of --ranks-per-node ranks each,
--batch samples per rank and step, and --rank the node: the samples clairfs.locality's
LocalitySampler gives that node's ranks (in the order of the global shuffle), the files sorted
by path as dataset indices. With --node-names, the holders are keyed by the nodes' names (the
sampler's nodes=): a hostlist ("n[0-3]", "a,b"; --rank the node's place in it), or "job" for
the sampler's default, the job's nodes from the environment (CLAIRFS_NODES, else Slurm's
SLURM_JOB_NODELIST; --rank and --world are then this node's place and the list's length)."""
import argparse
import os
import random
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dir")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--sampler", choices=("distributed", "locality"), default="distributed")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--ranks-per-node", type=int, default=1)
    ap.add_argument("--node-names", help="locality: a hostlist of the nodes' names, or 'job'")
    a = ap.parse_args()
    files = []
    for root, dirs, names in os.walk(a.dir):
        dirs[:] = sorted(d for d in dirs if not (root == a.dir and d == ".clairfs"))
        for n in sorted(names):
            p = os.path.join(root, n)
            if os.path.isfile(p) and not os.path.islink(p):
                files.append(os.path.relpath(p, a.dir))
    out = []
    if a.sampler == "locality":
        from clairfs.locality import expand_hostlist, job_nodes, node_lists
        nodes: "int | list[str]" = a.world
        rank = a.rank
        if a.node_names == "job":
            found = job_nodes()
            if found is None:
                sys.exit("make_manifest: --node-names job: no CLAIRFS_NODES nor SLURM_JOB_NODELIST")
            nodes, me = found
            if me not in nodes:
                sys.exit(f"make_manifest: this node {me} is not among the job's {nodes}")
            rank = nodes.index(me)
        elif a.node_names:
            nodes = expand_hostlist(a.node_names)
        lists = node_lists(len(files), nodes, a.ranks_per_node, a.batch, a.seed,
                           range(a.epochs))[rank]
        for order in lists:
            out.append("#epoch")
            out.extend("./" + files[i] if files[i].startswith("#") else files[i] for i in order)
        print("\n".join(out))
        return
    for e in range(a.epochs):
        order = files[:]
        random.Random(a.seed + e).shuffle(order)
        out.append("#epoch")
        out.extend("./" + p if p.startswith("#") else p for p in order[a.rank :: a.world])
    print("\n".join(out))


if __name__ == "__main__":
    main()
