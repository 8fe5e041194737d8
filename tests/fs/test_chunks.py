"""Files larger than cache.chunk_size, cached in chunks: exact bytes through read, pread and
mmap, chunk counts in the plan, later epochs served without the backing store, plans naming
only some chunks, and record-range manifest entries that must be refused."""
import errno
import mmap
import os
import random
import re
import threading

from chunkutil import (CHUNK, ChunkCase, boundary_spans, chunk_config, chunk_count, chunks_of,
                       clairfs)
from harness import wait_for
import treeutil as tu

BIG = 3 * (1 << 20) + 12345     # 49 chunks, the last one partial
MID = 2 * (1 << 20) + 777


class ChunkedFileTest(ChunkCase):
    @classmethod
    def setUpClass(cls):
        rng = random.Random(6401)
        cls.ds = os.path.join(cls.class_tmpdir("chk"), "ds")
        os.makedirs(cls.ds)
        cls.files = {"big.bin": rng.randbytes(BIG), "mid.bin": rng.randbytes(MID),
                     "small.bin": rng.randbytes(40_000)}
        for rel, data in cls.files.items():
            tu.write_file(os.path.join(cls.ds, rel), data)

    def check_plan(self, plan, **want):
        self.assertEqual({k: plan[k] for k in want}, want, plan)

    def read_epoch(self, mnt, rel, spans):
        self.check_whole(os.path.join(mnt, rel), self.files[rel])
        self.check_spans(os.path.join(mnt, rel), self.files[rel], spans)

    def test_big_file_in_chunks_over_epochs(self):
        n = chunk_count(BIG)
        self.assertEqual(n, 49)
        mnt = self.mount_at(self.ds, chunk_config(ram="8MiB"))
        clairfs.register_paths(mnt, [["big.bin"]] * 3)
        plan = self.plan(mnt)
        self.check_plan(plan, epochs=3, entries=3, range_entries=0, positions=3 * n, files=1,
                        chunked_files=1, objects=n, chunks=n, bytes=BIG, chunk_size=CHUNK,
                        predicted_backing_bytes=BIG)
        self.assertEqual((plan["tiers"][0]["objects"], plan["tiers"][0]["bytes"]), (n, BIG), plan)
        self.assertEqual((plan["staging"]["objects"], plan["direct"]["objects"]), (0, 0), plan)

        rng = random.Random(1)
        # Epoch 1 at once, racing the prefetch: readers and the tier fill share fetches.
        self.read_epoch(mnt, "big.bin", boundary_spans(rng, BIG, 40))
        st = self.wait_tiers_hold(mnt, BIG)
        before = st["backing_bytes"]
        self.assertGreaterEqual(before, BIG, st)
        for epoch in (2, 3):
            self.read_epoch(mnt, "big.bin", boundary_spans(rng, BIG, 40))
            after = self.stats(mnt)
            self.assertEqual(after["backing_bytes"], before, f"epoch {epoch}: {after}")
            self.assertGreater(after["chunk_reads"], st["chunk_reads"], after)
            self.assertGreater(after["served"]["ram"], st["served"]["ram"], after)
            self.assertEqual(after["unplanned_chunk_reads"], 0, after)
            self.assertEqual(after["errors"]["stale"], 0, after)
            st = after
        self.assertEqual(st["ram_bytes"], BIG, st)

    def wait_tiers_hold(self, mnt, nbytes):
        """Waits until the RAM tier holds nbytes (readers' demand fetches are stored there too,
        so prefetch.fetches need not reach the planned count when readers raced the prefetch)."""
        wait_for(lambda: self.stats(mnt)["tiers"][0]["bytes"] >= nbytes, 30,
                 f"the RAM tier to hold {nbytes} bytes")
        return self.stats(mnt)

    def test_file_larger_than_ram_is_staged(self):
        n = chunk_count(BIG)
        ram = 1 << 20
        mnt = self.mount_at(self.ds, chunk_config(ram=ram, staging="1MiB"))
        clairfs.register_paths(mnt, [["big.bin"], ["big.bin"]])
        plan = self.plan(mnt)
        tier = plan["tiers"][0]
        self.check_plan(plan, chunked_files=1, chunks=n, objects=n, positions=2 * n)
        self.assertEqual((tier["objects"], tier["bytes"]), (ram // CHUNK, ram), plan)
        self.assertEqual(plan["staging"]["objects"], n - ram // CHUNK, plan)
        self.assertEqual(plan["staging"]["bytes"], BIG - ram, plan)
        self.assertEqual(plan["predicted_backing_bytes"], ram + 2 * (BIG - ram), plan)
        self.wait_tiers(mnt, plan)
        wait_for(lambda: self.stats(mnt)["prefetch"]["staging_bytes"] >= CHUNK, 20,
                 "the staging window to hold a chunk")
        for _ in range(2):
            self.check_whole(os.path.join(mnt, "big.bin"), self.files["big.bin"])
        # Past the plan's end: every chunk from the tier or read directly, still exact.
        self.check_spans(os.path.join(mnt, "big.bin"), self.files["big.bin"],
                         boundary_spans(random.Random(2), BIG, 40))
        # Concurrent readers (a multi-worker loader), each its own descriptor.
        failures = []

        def reader(seed):
            try:
                self.check_spans(os.path.join(mnt, "big.bin"), self.files["big.bin"],
                                 boundary_spans(random.Random(seed), BIG, 60))
            except BaseException as e:  # noqa: B036  (reported below, in the test's thread)
                failures.append(f"reader {seed}: {e!r}")
        threads = [threading.Thread(target=reader, args=(10 + i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])
        st = self.stats(mnt)
        self.assertGreater(st["served"]["staging"], 0, st)
        self.assertGreater(st["served"]["ram"], 0, st)
        self.assertLessEqual(st["ram_bytes"], ram, st)
        self.assertLessEqual(st["prefetch"]["staging_bytes"], 1 << 20, st)
        self.assertEqual(st["errors"]["timeout"] + st["errors"]["fetch"], 0, st)

    def test_partial_plan_mixes_cached_and_direct_chunks(self):
        # Chunks 3-5 and 10 are planned; reads spanning them and their unplanned neighbours
        # are served in one reply, part from the tier and part from the descriptor.
        ranges = [(3 * CHUNK + 100, 2 * CHUNK), (10 * CHUNK, 1)]
        mnt = self.mount_at(self.ds, chunk_config(ram="8MiB"))
        clairfs.register_records(mnt, [[("big.bin", o, ln) for o, ln in ranges]])
        plan = self.plan(mnt)
        self.check_plan(plan, entries=2, range_entries=2, files=1, chunked_files=1, chunks=4,
                        objects=4, positions=4, bytes=4 * CHUNK)
        self.assertEqual(chunks_of(ranges), {3, 4, 5, 10})
        st = self.wait_tiers(mnt, plan)
        self.assertEqual(st["backing_bytes"], 4 * CHUNK, st)
        spans = [(3 * CHUNK - 5, 10), (6 * CHUNK - 7000, 9000), (2 * CHUNK, 5 * CHUNK),
                 (10 * CHUNK - 1, 2), (11 * CHUNK - 1, 2), (9 * CHUNK + 3, 2 * CHUNK)]
        self.check_spans(os.path.join(mnt, "big.bin"), self.files["big.bin"],
                         spans + boundary_spans(random.Random(3), BIG, 30))
        self.check_whole(os.path.join(mnt, "big.bin"), self.files["big.bin"])
        self.check_whole(os.path.join(mnt, "small.bin"), self.files["small.bin"])
        after = self.stats(mnt)
        self.assertGreater(after["unplanned_chunk_reads"], 0, after)
        self.assertGreater(after["chunk_reads"], 0, after)
        self.assertGreater(after["backing_bytes"], st["backing_bytes"], after)
        self.assertEqual(after["errors"]["stale"], 0, after)

    def test_chunked_file_shrunk_while_open_is_stale_not_eof(self):
        # A read of an unplanned chunk past the new end of a file truncated after open must
        # fail with ESTALE, never read as an early end of file of the version opened.
        ds = self.tmpdir("shrink")
        data = os.urandom(6 * CHUNK)
        with open(os.path.join(ds, "b.bin"), "wb") as f:
            f.write(data)
        mnt = self.mount_at(ds, chunk_config(ram="8MiB"))
        clairfs.register_records(mnt, [[("b.bin", CHUNK, 1)]])
        self.wait_tiers(mnt, self.plan(mnt))
        fd = os.open(os.path.join(mnt, "b.bin"), os.O_RDONLY)
        try:
            self.assertEqual(os.pread(fd, 100, CHUNK), data[CHUNK:CHUNK + 100])
            os.truncate(os.path.join(ds, "b.bin"), 2 * CHUNK)
            for off in (3 * CHUNK, 4 * CHUNK + 7):
                with self.assertRaises(OSError, msg=str(off)) as e:
                    os.pread(fd, 100, off)
                self.assertEqual(e.exception.errno, errno.ESTALE, off)
            # The cached chunk still holds the version opened: served, never mixed.
            self.assertEqual(os.pread(fd, 100, CHUNK), data[CHUNK:CHUNK + 100])
        finally:
            os.close(fd)
        self.assertGreater(self.stats(mnt)["errors"]["stale"], 0)

    def test_mmap_chunked_file(self):
        mnt = self.mount_at(self.ds, chunk_config(ram="8MiB"))
        clairfs.register_paths(mnt, [["mid.bin"], ["mid.bin"]])
        plan = self.plan(mnt)
        self.check_plan(plan, chunked_files=1, chunks=chunk_count(MID), objects=chunk_count(MID))
        st = self.wait_tiers(mnt, plan)
        rng = random.Random(4)
        # mid.bin is planned (chunks from the tier); big.bin is not (read directly).
        for rel in ("mid.bin", "big.bin"):
            data = self.files[rel]
            with open(os.path.join(mnt, rel), "rb") as f, \
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                self.assertEqual(len(m), len(data))
                spans = boundary_spans(rng, len(data), 60)
                for _ in range(200):
                    off = rng.randrange(len(data))
                    spans.append((off, rng.randint(1, 200_000)))
                spans += [(0, 1), (len(data) - 1, 1), (len(data) - 4096, 4096)]
                for off, length in spans:
                    self.assertTrue(m[off:off + length] == data[off:off + length],
                                    f"{rel}: mmap differs at {off}+{length}")
                self.assertTrue(m[:] == data, f"{rel}: the whole mapping differs")
            if rel == "mid.bin":
                after = self.stats(mnt)
                self.assertEqual(after["backing_bytes"], st["backing_bytes"], after)
                self.assertEqual(after["unplanned_chunk_reads"], 0, after)
                self.assertGreater(after["chunk_reads"], 0, after)
        self.assertEqual(self.stats(mnt)["errors"]["stale"], 0)


# Each: (the range part after a TAB, or a whole line when it starts with "|"), a fragment of
# the reason. small.bin is SMALL bytes, a.bin is chunked.
SMALL = 10_000
HOSTILE = [
    ("-1+5", "malformed range"),
    ("18446744073709551615+1", "overflows"),
    ("1+18446744073709551615", "overflows"),
    ("18446744073709551616+1", "malformed range"),   # offset beyond 2^64
    ("0+18446744073709551616", "malformed range"),   # length beyond 2^64
    ("99999999999999999999999+1", "malformed range"),
    ("9223372036854775807+1", "ends past the end of the file (size 10000)"),
    (f"{SMALL}+1", "ends past the end of the file"),
    (f"{SMALL - 1}+2", "ends past the end of the file"),
    (f"0+{SMALL + 1}", "ends past the end of the file"),
    ("0+0", "empty range"),
    ("1-2", "malformed range"),
    ("+5", "malformed range"),
    ("5+", "malformed range"),
    ("+", "malformed range"),
    ("a+b", "malformed range"),
    ("01+2", "malformed range"),
    ("1+02", "malformed range"),
    ("00+1", "malformed range"),
    ("0x10+5", "malformed range"),
    (" 0+5", "malformed range"),
    ("0+5 ", "malformed range"),
    ("0+5\r\r", "malformed range"),                 # one CR ends the line, one is left
    ("1+2+3", "malformed range"),
    ("", "malformed range"),                         # a TAB with nothing after it
    ("|tab\tname.bin", "malformed range"),           # a path with a TAB and no range
    ("|\t0+5", "empty path"),
    ("|weird\t5+5", "'weird'"),                      # path 'weird' (missing), range 5+5
    ("|missing.bin\t0+5", "'missing.bin'"),
    ("|sub\t0+5", "'sub'"),                          # a directory
    ("|a.bin\t199999+2", "ends past the end of the file (size 200000)"),
]


def hostile_line(spec):
    return spec[1:] if spec.startswith("|") else "small.bin\t" + spec


class RangeEntryTest(ChunkCase):
    """Range entries that are refused leave the previous plan active and served."""

    @classmethod
    def setUpClass(cls):
        rng = random.Random(6402)
        cls.ds = os.path.join(cls.class_tmpdir("rng"), "ds")
        os.makedirs(os.path.join(cls.ds, "with space"))
        os.makedirs(os.path.join(cls.ds, "sub"))
        cls.files = {"small.bin": rng.randbytes(SMALL), "other.bin": rng.randbytes(3000),
                     "a.bin": rng.randbytes(200_000),
                     "with space/a file.bin": rng.randbytes(200_000),
                     "tab\tname.bin": rng.randbytes(1000), "weird\t5+5": rng.randbytes(100)}
        for rel, data in cls.files.items():
            tu.write_file(os.path.join(cls.ds, rel), data)

    # The previous plan: whole files, ranges of unchunked files (their whole object) and
    # ranges that together cover every chunk of a chunked file whose path has spaces.
    PREVIOUS = [("small.bin", None, None), ("with space/a file.bin", 0, 100_000),
                ("tab\tname.bin", 0, 1000), ("weird\t5+5", 10, 20), ("other.bin", 5, 10),
                ("with space/a file.bin", 100_000, 100_000)]

    def errors_of(self, mnt, text, append=False):
        """Writes text as a manifest, expects EINVAL at close(); {line: reason} of errors."""
        with self.assertRaises(OSError) as cm:
            self.write_manifest(mnt, text, append=append)
        self.assertEqual(cm.exception.errno, errno.EINVAL, text)
        report = self.control_read(mnt, "errors")
        found = dict((int(n), why) for n, why in re.findall(r"^line (\d+): (.*)$", report, re.M))
        count = re.match(r"manifest rejected: (\d+) errors?\n", report)
        self.assertTrue(count, report)
        self.assertEqual(int(count.group(1)), len(found), report)
        return found

    def read_previous(self, mnt):
        for rel, *_ in self.PREVIOUS:
            self.check_whole(os.path.join(mnt, rel), self.files[rel])

    def test_hostile_ranges_rejected_and_previous_plan_kept(self):
        mnt = self.mount_at(self.ds, chunk_config(ram="4MiB"))
        epochs = [self.PREVIOUS, list(reversed(self.PREVIOUS))]
        self.assertEqual(clairfs.register_records(mnt, epochs), 12)
        plan = self.plan(mnt)
        self.assertEqual({k: plan[k] for k in ("epochs", "entries", "range_entries", "files",
                                               "chunked_files", "chunks", "objects")},
                         {"epochs": 2, "entries": 12, "range_entries": 10, "files": 5,
                          "chunked_files": 1, "chunks": 4, "objects": 8}, plan)
        self.assertEqual(self.control_read(mnt, "errors"), "")
        self.wait_tiers(mnt, plan)
        self.read_previous(mnt)
        base = self.stats(mnt)

        good = ["small.bin\t0+1", f"small.bin\t{SMALL - 1}+1", f"small.bin\t0+{SMALL}",
                "a.bin\t0+200000", "with space/a file.bin\t5+5", "tab\tname.bin\t999+1",
                "weird\t5+5\t0+100", "other.bin"]
        for spec, why in HOSTILE:
            line = hostile_line(spec)
            alone = self.errors_of(mnt, line + "\n")
            self.assertEqual(list(alone), [1], (line, alone))
            self.assertIn(why, alone[1], line)
            mixed = self.errors_of(mnt, "#epoch\n" + good[0] + "\n" + good[1] + "\n" + line
                                   + "\n" + good[2] + "\n")
            self.assertEqual(list(mixed), [4], (line, mixed))
            self.assertIn(why, mixed[4], line)
            self.assertEqual(self.plan(mnt), plan, line)

        # Many of them in one text, between good lines over two epochs: every line reported.
        rng = random.Random(5)
        for part in (HOSTILE[:16], HOSTILE[16:]):
            lines, want = ["#epoch one"], {}
            for i, (spec, why) in enumerate(part):
                lines.append(rng.choice(good))
                if i == len(part) // 2:
                    lines.append("#epoch two")
                lines.append(hostile_line(spec))
                want[len(lines)] = why
            lines.append(good[-1])
            found = self.errors_of(mnt, "\n".join(lines) + "\n")
            self.assertEqual(sorted(found), sorted(want), found)
            for n, why in want.items():
                self.assertIn(why, found[n], (n, lines[n - 1]))
        # An append is refused the same way.
        self.assertEqual(self.errors_of(mnt, "other.bin\nsmall.bin\t0+0\n", append=True).keys(),
                         {2})
        self.assertEqual(self.plan(mnt), plan)

        # The Python helpers: ManifestError with the daemon's report (#begin, #epoch come first).
        with self.assertRaises(clairfs.ManifestError) as cm:
            clairfs.register_records(mnt, [[("small.bin", 0, 10), ("small.bin", SMALL - 10, 11)]])
        self.assertRegex(cm.exception.errors, r"(?m)^line 4: 'small.bin': range 9990\+11 ends past")
        self.assertNotIn("line 3:", cm.exception.errors)
        with self.assertRaises(clairfs.ManifestError) as cm:
            clairfs.write_manifest(mnt, [[b"other.bin\n", b"small.bin\t0+0\n"]])
        self.assertRegex(cm.exception.errors, r"(?m)^line 4: empty range")
        with self.assertRaises(ValueError):
            clairfs.register_records(mnt, [[("small.bin", -1, 5)]])  # refused before writing
        self.assertEqual(self.plan(mnt), plan)

        # The previous plan still serves its files from the RAM tier.
        self.read_previous(mnt)
        after = self.stats(mnt)
        self.assertEqual(after["backing_bytes"], base["backing_bytes"], after)
        self.assertGreater(after["served"]["ram"], base["served"]["ram"], after)
        self.assertEqual(after["unplanned_file_reads"] + after["unplanned_chunk_reads"], 0, after)

        # And the good lines, paths with spaces and TABs included, make a valid plan.
        self.write_manifest(mnt, "\n".join(good) + "\n")
        new = self.plan(mnt)
        self.assertEqual((new["entries"], new["range_entries"], new["files"]), (8, 7, 6), new)
        self.assertEqual(self.control_read(mnt, "errors"), "")
