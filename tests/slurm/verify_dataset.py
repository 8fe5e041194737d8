#!/usr/bin/env python3
"""Run inside a Slurm job: reads every file under MOUNT and compares the listing and each
file's SHA-256 with EXPECTED (JSON: relative path -> hex digest). Exit 0 when all match."""
import hashlib
import json
import os
import sys


def main(mount, expected_path):
    with open(expected_path) as f:
        expected = json.load(f)
    seen, total = {}, 0
    for dirpath, dirnames, filenames in os.walk(mount):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            h = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
                    total += len(chunk)
            seen[os.path.relpath(path, mount)] = h.hexdigest()
    if seen != expected:
        missing = sorted(set(expected) - set(seen))
        extra = sorted(set(seen) - set(expected))
        wrong = sorted(p for p in set(seen) & set(expected) if seen[p] != expected[p])
        print(f"MISMATCH missing={missing[:5]} extra={extra[:5]} wrong={wrong[:5]}")
        return 1
    print(f"verified {len(seen)} files, {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
