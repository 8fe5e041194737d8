#!/usr/bin/env python3
"""Prints a clairfs manifest for DIR: every regular file, in a seeded shuffle per epoch, as a
data loader with a seeded RandomSampler would read them. With --rank/--world the epoch's order
is split across ranks like DistributedSampler (rank r takes every world-th entry)."""
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
    a = ap.parse_args()
    files = []
    for root, dirs, names in os.walk(a.dir):
        dirs[:] = sorted(d for d in dirs if not (root == a.dir and d == ".clairfs"))
        for n in sorted(names):
            p = os.path.join(root, n)
            if os.path.isfile(p) and not os.path.islink(p):
                files.append(os.path.relpath(p, a.dir))
    out = []
    for e in range(a.epochs):
        order = files[:]
        random.Random(a.seed + e).shuffle(order)
        out.append("#epoch")
        out.extend("./" + p if p.startswith("#") else p for p in order[a.rank :: a.world])
    print("\n".join(out))


if __name__ == "__main__":
    main()
