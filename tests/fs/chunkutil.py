"""Shared pieces of the chunked-file tests (test_chunks.py, test_chunk_records.py).

Small configurations (64 KiB chunks, a few MiB of RAM tier, 1-2 MiB of staging) keep these
tests fast, and keep_cache is off so that every read of a mounted file reaches the daemon:
backing_bytes and chunk_reads then count every byte the readers asked for.
"""
import os
import sys

import harness
from harness import ClairfsCase, config

sys.path.insert(0, os.path.join(harness.REPO, "python"))
import clairfs  # noqa: E402  (the package under python/)

CHUNK = 64 << 10


def chunk_config(ram, staging="1MiB", chunk="64KiB"):
    cfg = config(ram=str(ram), staging=str(staging), keep_cache=False)
    cfg["cache"]["chunk_size"] = chunk
    cfg["cache"]["record_chunk_size"] = chunk  # one grid for files read whole and as records
    return cfg


def chunk_count(size, chunk=CHUNK):
    """Objects of a file of size bytes: 1 when it is not chunked, else ceil(size / chunk)."""
    return 1 if size <= chunk else -(-size // chunk)


def chunks_of(ranges, chunk=CHUNK):
    """The set of chunk indices that (offset, length) ranges overlap."""
    out = set()
    for off, length in ranges:
        out.update(range(off // chunk, (off + length - 1) // chunk + 1))
    return out


def boundary_spans(rng, size, n, chunk=CHUNK):
    """n (offset, length) spans of the file, each crossing at least one chunk boundary (some
    several), plus one ending exactly at the end of the file."""
    out = []
    for _ in range(n):
        b = rng.randrange(1, (size - 1) // chunk + 1) * chunk  # a boundary inside the file
        off = b - rng.randint(1, min(b, chunk))
        out.append((off, min(size - off, rng.randint(b - off + 1, b - off + 3 * chunk))))
    out.append((size - chunk - 17, chunk + 17))
    return out


class ChunkCase(ClairfsCase):
    def new_mnt(self):
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        return mnt

    def mount_at(self, ds, cfg):
        mnt = self.new_mnt()
        self.mount(ds, mnt, cfg=cfg)
        return mnt

    def wait_tiers(self, mnt, plan, before=0, timeout=30):
        """Waits until every tier holds the bytes the plan gives it (prefetch.fetches also
        counts the staging window's fetches, so it cannot tell) and returns the stats then;
        at least `before` + the tier objects were fetched by then."""
        want = [t["bytes"] for t in plan["tiers"]]
        harness.wait_for(lambda: [t["bytes"] for t in self.stats(mnt)["tiers"]] == want,
                         timeout, f"the tiers to hold {want} bytes")
        st = self.stats(mnt)
        self.assertEqual([t["bytes"] for t in st["tiers"]], want, (st, plan))
        self.assertGreaterEqual(st["prefetch"]["fetches"],
                                before + sum(t["objects"] for t in plan["tiers"]), st)
        return st

    def pread_all(self, path, spans):
        """[(offset, bytes)] read with pread through one descriptor of path."""
        fd = os.open(path, os.O_RDONLY)
        try:
            return [(off, os.pread(fd, length, off)) for off, length in spans]
        finally:
            os.close(fd)

    def read_whole(self, path, step=256 << 10):
        parts = []
        with open(path, "rb", buffering=0) as f:
            while True:
                b = f.read(step)
                if not b:
                    return b"".join(parts)
                parts.append(b)

    def check_spans(self, path, data, spans):
        for (off, length), (_, got) in zip(spans, self.pread_all(path, spans)):
            self.assertEqual(len(got), min(length, len(data) - off), (path, off, length))
            self.assertTrue(got == data[off:off + length], f"{path}: wrong bytes at {off}+{length}")

    def check_whole(self, path, data):
        got = self.read_whole(path)
        self.assertEqual(len(got), len(data), path)
        self.assertTrue(got == data, f"{path}: wrong bytes")
