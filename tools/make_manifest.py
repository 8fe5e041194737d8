#!/usr/bin/env python3
"""Prints a clairfs manifest for DIR: every regular file, in a seeded shuffle per epoch, as a
data loader with a seeded RandomSampler would read them. With --rank/--world the epoch's order
is split across ranks like DistributedSampler (rank r takes every world-th entry).

With --sampler locality (needs torch and numpy): --world nodes of --ranks-per-node ranks each,
--batch samples per rank and step, and --rank the node: the samples clairfs.locality's
LocalitySampler gives that node's ranks (in the order of the global shuffle), the files sorted
by path as dataset indices."""
import argparse
import os
import random


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
        from clairfs.locality import node_lists
        lists = node_lists(len(files), a.world, a.ranks_per_node, a.batch, a.seed,
                           range(a.epochs))[a.rank]
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
