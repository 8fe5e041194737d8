#!/usr/bin/env python3
"""Python's own reads of warm files, three ways, on each directory given (a dataset and a clairfs
mount of it, side by side): open(p, "rb").read() (an isatty probe per open: an ioctl FUSE
passes to the daemon), clairfs.read_file and clairfs.open_file().read() (python/clairfs/
loaders.py: no probe). Every file under each directory is read once to warm the page cache,
then 5 passes per way in a fixed-seed shuffled order, interleaved; prints per directory one
JSON object of the median files/s per way. One thread, Debian's /usr/bin/python3.

Usage: /usr/bin/python3 tools/bench/python_open.py DIR [DIR...]"""
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import clairfs  # noqa: E402


def py_open(p):
    with open(p, "rb") as f:
        return f.read()


WAYS = {"open(p, 'rb').read()": py_open, "clairfs.read_file": clairfs.read_file,
        "clairfs.open_file().read()": lambda p: clairfs.open_file(p).read()}


def files_per_second(paths, fn):
    t = time.perf_counter()
    for p in paths:
        fn(p)
    return len(paths) / (time.perf_counter() - t)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 1
    for root in sys.argv[1:]:
        paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(root)
                       if ".clairfs" not in d.split(os.sep) for f in fs)
        random.Random(1).shuffle(paths)
        files_per_second(paths, py_open)  # warm: every page in the page cache
        runs = {}
        for _ in range(5):
            for way, fn in WAYS.items():
                runs.setdefault(way, []).append(files_per_second(paths, fn))
        print(json.dumps({"dir": root, "files": len(paths),
                          **{w: round(sorted(v)[2]) for w, v in runs.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
