#!/usr/bin/env python3
"""clairfs-lend-probe smoke test: at a tiny scale (64 samples of 20,000 bytes, batches of 16, 2
pairs), every mode reports a positive rate, and the touching modes read the bytes the server
wrote (each object is filled with its index's low byte, so the checksum of one byte a page over
both touching modes is known exactly). Nothing is asserted about speed. argv: PROBE_BIN."""
import json
import subprocess
import sys

SAMPLES, SIZE, PAGE = 64, 20000, 4096


def main():
    probe = sys.argv[1]
    p = subprocess.run([probe, "--samples", str(SAMPLES), "--size", str(SIZE), "--batch", "16",
                        "--threads", "2", "--rounds", "1"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        return 1
    out = json.loads(p.stdout.strip().splitlines()[-1])
    failures = []
    for k in ("copy_sps", "lend_sps", "copy_touch_sps", "lend_touch_sps", "make_us"):
        if not isinstance(out.get(k), (int, float)) or out[k] <= 0:
            failures.append(f"{k}: {out.get(k)!r}")
    pages = (SIZE + PAGE - 1) // PAGE
    want = 2 * pages * sum(i & 0xFF for i in range(SAMPLES))  # copy_touch and lend_touch
    if out.get("checksum") != want:
        failures.append(f"checksum {out.get('checksum')!r}, want {want}: bytes not the objects'")
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(p.stdout, p.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
