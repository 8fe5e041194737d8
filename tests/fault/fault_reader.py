#!/usr/bin/env python3
"""A reader process of the fault matrix (tests/fault/fault_matrix.py).

Usage: fault_reader.py SPEC.json. SPEC: {"mount", "paths", "expect": {path: [sha256 hex]},
"other": {sha256 hex: name}, "passes", "stop", "seed"}. Reads the paths in shuffled passes
until the stop file exists (at least "passes" passes; no stop file: exactly "passes"), and
prints one JSON line per read: {"b": path} before it, {"p": path, "r": R} after it, where R is
"ok", "wrong", "wrong:NAME" (the bytes of another known file or version) or the errno.
"""
import hashlib
import json
import os
import random
import sys
import time

sys.dont_write_bytecode = True


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    rng = random.Random(spec.get("seed", 0))
    paths = list(spec["paths"])
    passes = 0
    out = sys.stdout
    while True:
        if passes >= spec["passes"] and (not spec["stop"] or os.path.exists(spec["stop"])):
            break
        if spec.get("shuffle", True):
            rng.shuffle(paths)
        for rel in paths:
            out.write(json.dumps({"b": rel}) + "\n")
            out.flush()
            try:
                # O_NONBLOCK: a regular file ignores it; a FIFO swapped in then opens and reads
                # empty at once, as natively, instead of waiting for a writer.
                fd = os.open(os.path.join(spec["mount"], rel), os.O_RDONLY | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as fh:
                    data = fh.read()
                digest = hashlib.sha256(data).hexdigest()
                r = "ok" if digest in spec["expect"][rel] else "wrong"
                if r == "wrong" and digest in spec.get("other", {}):
                    r = "wrong:" + spec["other"][digest]
            except OSError as e:
                r = e.errno or -1
            out.write(json.dumps({"p": rel, "r": r}) + "\n")
            out.flush()
            if isinstance(r, int):
                time.sleep(0.002)  # a dead mount fails at once: do not spin a shared CPU
            if spec["stop"] and os.path.exists(spec["stop"]) and passes + 1 >= spec["passes"]:
                break
        passes += 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
