#!/usr/bin/env python3
"""Writes a synthetic image-classification dataset: DIR/classNNN/imgNNNNNNN.jpg with sizes drawn
from a lognormal around a mean (ImageNet's JPEGs average about 110 KB). Seeded: the same
arguments always give the same files and bytes."""
import argparse
import math
import os
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dir")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--mean-kb", type=float, default=110.0, help="mean file size in KB (1000 B)")
    ap.add_argument("--sigma", type=float, default=0.5, help="lognormal sigma; 0 gives equal sizes")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    mu = math.log(a.mean_kb * 1000) - a.sigma ** 2 / 2
    total = 0
    for c in range(a.classes):
        os.makedirs(os.path.join(a.dir, f"class{c:03d}"), exist_ok=True)
    block = rng.randbytes(1 << 20)
    for i in range(a.files):
        size = max(1, int(rng.lognormvariate(mu, a.sigma))) if a.sigma > 0 else int(a.mean_kb * 1000)
        size = min(size, 16 << 20)
        start = rng.randrange(len(block))
        data = (block[start:] + block[:start]) * (size // len(block) + 1)
        path = os.path.join(a.dir, f"class{i % a.classes:03d}", f"img{i:07d}.jpg")
        with open(path, "wb") as f:
            f.write(i.to_bytes(8, "little") + data[: max(0, size - 8)])
        total += size
    print(f"{a.files} files, {total} bytes in {a.dir}")


if __name__ == "__main__":
    main()
