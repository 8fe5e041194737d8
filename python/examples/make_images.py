#!/usr/bin/env python3
"""Writes a small, learnable ImageFolder dataset: DIR/<class>/<n>.jpg (or .png), real images.

Class k of K is a bright square in the k-th of K positions along the diagonal, on noise of
a random size between 24 and 64 pixels, so a tiny CNN learns it in an epoch or two. Seeded:
the same arguments give the same images. Needs Pillow (python3-pil).
"""
import argparse
import os
import random

from PIL import Image


def make_images(root, images=400, classes=4, seed=0, fmt="jpg"):
    """Writes `images` images spread evenly over `classes` classes under `root`; returns the
    list of paths written (relative to root), in the order written."""
    rng = random.Random(seed)
    written = []
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class{c}"), exist_ok=True)
    for i in range(images):
        c = i % classes
        side = rng.randint(24, 64)
        noise = rng.randbytes(side * side * 3)
        img = Image.frombytes("RGB", (side, side), noise)
        cell = side // classes
        lo = c * cell
        img.paste((255, 255, 255), (lo, lo, lo + max(cell, 4), lo + max(cell, 4)))
        rel = os.path.join(f"class{c}", f"{i:05d}.{fmt}")
        img.save(os.path.join(root, rel), format="JPEG" if fmt == "jpg" else "PNG")
        written.append(rel)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dir")
    ap.add_argument("--images", type=int, default=400)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", choices=("jpg", "png"), default="jpg")
    a = ap.parse_args()
    paths = make_images(a.dir, a.images, a.classes, a.seed, a.format)
    size = sum(os.path.getsize(os.path.join(a.dir, p)) for p in paths)
    print(f"{len(paths)} images in {a.classes} classes, {size} bytes, in {a.dir}")


if __name__ == "__main__":
    main()
