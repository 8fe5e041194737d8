#!/usr/bin/env python3
"""A dataset of N files of one size in CLASSES class directories (train/cNNN/NNNNNNN.bin, random
bytes from SEED) and its read order, one fixed-seed shuffle, written to LIST (one path per
line, relative to ROOT). Used by the benchmarks that compare read paths over the same files
(fuse_compare.sh, batch_compare.sh).

Usage: flat_dataset.py ROOT LIST N SIZE CLASSES SEED"""
import os
import random
import sys


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(sys.argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    root, listfile = sys.argv[1], sys.argv[2]
    n, size, classes, seed = map(int, sys.argv[3:])
    rng = random.Random(seed)
    for c in range(classes):
        os.makedirs(os.path.join(root, "train", f"c{c:03d}"), exist_ok=True)
    paths = []
    for i in range(n):
        rel = f"train/c{i % classes:03d}/{i:07d}.bin"
        with open(os.path.join(root, rel), "wb") as f:
            f.write(rng.randbytes(size))
        paths.append(rel)
    rng.shuffle(paths)
    with open(listfile, "w") as f:
        f.write("\n".join(paths) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
