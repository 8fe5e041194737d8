"""Files whose every byte names the version and offset it belongs to, writers that rewrite them
in place, and readers that check every read() against them (docs/reliability.md, "In-place
rewrites under readers").

Every 8-byte little-endian word of version v of a file, at offset o, is
    MAGIC << 48 | v << 32 | o // 8
so a word of zeros, of another offset or of a torn write decodes to nothing a version held. A
read() is right when all its words decode to one version and to the offsets read; a short read
is right when what it returned is right (the file may have been shorter at that moment).
"""
import errno
import os
import random
import threading
import time

import numpy as np

MAGIC = 0xC1A1
WORD = 8


def version_bytes(version, size, start=0):
    """Bytes [start, size) of version `version` (start and size multiples of 8)."""
    idx = np.arange(start // WORD, size // WORD, dtype=np.uint64)
    words = (np.uint64(MAGIC) << np.uint64(48)) | (np.uint64(version) << np.uint64(32)) | idx
    return words.astype("<u8").tobytes()


def runs(buf, off):
    """[(version, offset)] of the runs of one version in buf read at off (whole words)."""
    n = len(buf) // WORD * WORD
    words = np.frombuffer(buf[:n], dtype="<u8")
    ver = (words >> np.uint64(32)) & np.uint64(0xFFFF)
    starts = [0] + [int(i) for i in np.flatnonzero(np.diff(ver)) + 1]
    return [(int(ver[i]), off + i * WORD) for i in starts]


class Verdict:
    """What one read() returned: "ok" (one version, right offsets), "mixed" (words of two
    versions), "bad" (a word no version held: zeros, another offset, garbage)."""
    OK, MIXED, BAD = "ok", "mixed", "bad"


def check(buf, off):
    """Verdict of bytes buf read at offset off (a multiple of 8); the version seen or None."""
    n = len(buf) // WORD * WORD
    if n == 0 and len(buf) == 0:
        return Verdict.OK, None
    if n:
        words = np.frombuffer(buf[:n], dtype="<u8")
        hi = words >> np.uint64(32)
        lo = words & np.uint64(0xFFFFFFFF)
        want = np.arange(off // WORD, off // WORD + len(words), dtype=np.uint64)
        if not np.array_equal(lo, want) or np.any((hi >> np.uint64(16)) != MAGIC):
            return Verdict.BAD, None
        v = int(hi[0] & np.uint64(0xFFFF))
        if np.any(hi != hi[0]):
            return Verdict.MIXED, v
    else:
        v = None
    tail = buf[n:]
    if tail:  # a short read ending inside a word: a prefix of the word due there
        word = ((off + n) // WORD).to_bytes(4, "little")
        word += (v if v is not None else int.from_bytes(tail[4:6].ljust(2, b"\0"), "little")
                 ).to_bytes(2, "little")
        word += MAGIC.to_bytes(2, "little")
        if tail != word[:len(tail)]:
            return Verdict.BAD, v
    return Verdict.OK, v


def describe(buf, off):
    """Where buf read at off first holds a word that is not the one due there."""
    n = len(buf) // WORD * WORD
    words = np.frombuffer(buf[:n], dtype="<u8")
    for i, w in enumerate(words):
        w = int(w)
        if w >> 48 != MAGIC or w & 0xFFFFFFFF != off // WORD + i or (w >> 32) != (int(words[0]) >> 32):
            zeros = int(np.count_nonzero(words[i:] == 0))
            return (f"; word at {off + i * WORD} is {w:#018x} (first {int(words[0]):#018x}), "
                    f"{zeros} zero words from there")
    return ""


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.reads = 0       # read() calls checked
        self.ok = 0
        self.short = 0       # right but fewer bytes than asked within the size
        self.mixed = 0       # words of two versions in one read() the file never held together,
        #                      one of them replaced before the read() began
        self.overlap = 0     # words of versions the file held while the read() ran: the read
        #                      overlapped their writes (a read of the file itself can mix so)
        self.midway = 0      # a state an in-place rewrite left the file in: the new version's
        #                      front, the previous version's rest (counted in ok)
        self.pending = []    # reads of several versions, judged by finish()
        self.bad = 0         # a word no version held
        self.errors = {}     # errno name -> count
        self.examples = []   # first few wrong reads, for the failure message

    def add(self, verdict, path, off, want, got, version=None, buf=b""):
        with self.lock:
            self.reads += 1
            if verdict == Verdict.OK:
                self.ok += 1
                if got < want:
                    self.short += 1
            elif verdict == Verdict.MIXED:
                self.mixed += 1
            else:
                self.bad += 1
            if verdict != Verdict.OK and len(self.examples) < 5:
                self.examples.append(f"{verdict}: {path} at {off}+{want} got {got} (v{version})"
                                     + describe(buf, off))

    def several(self, path, off, want, buf, during):
        """A read of words of several versions: judged once the writers' history is known.
        during: the versions the file held (or was being rewritten to or from) while the read()
        ran."""
        with self.lock:
            self.pending.append((path, off, want, len(buf), runs(buf, off), during))

    def finish(self, previous, hows):
        """Judges the reads of several versions. previous[path][v]: the version written
        before v; hows[path]: how the file was rewritten. A read is a state the file held
        only if it is rewritten in place (front to back) and the read is the front of a
        version followed by the rest of the version just before it."""
        for path, off, want, got, rs, during in self.pending:
            held = (hows[path] in ("inplace", "append") and len(rs) == 2 and
                    previous[path].get(rs[0][0]) == rs[1][0])
            with self.lock:
                self.reads += 1
                if held:
                    self.ok += 1
                    self.midway += 1
                elif all(v in during for v, _ in rs):
                    self.overlap += 1
                    if len(self.examples) < 5:
                        self.examples.append(f"overlap: {path} at {off}+{want} got {got}: "
                                             f"(version, offset) runs {rs[:4]}")
                else:
                    self.mixed += 1
                    if len(self.examples) < 5:
                        self.examples.append(f"mixed: {path} at {off}+{want} got {got}: "
                                             f"(version, offset) runs {rs[:4]}")
        self.pending = []

    def error(self, e):
        with self.lock:
            self.reads += 1
            name = errno.errorcode.get(e.errno, str(e.errno))
            self.errors[name] = self.errors.get(name, 0) + 1

    def summary(self):
        return (f"reads {self.reads}, ok {self.ok} (short {self.short}, midway "
                f"{self.midway}), overlap {self.overlap}, mixed {self.mixed}, "
                f"bad {self.bad}, errors {self.errors or 0}")


def write_version(path, version, size, how, rng):
    """Rewrites the file at path in place as version `version` of `size` bytes.

    how: "truncate" (O_TRUNC, then written in pieces), "inplace" (overwritten in pieces, no
    truncate), "append" (the new version's words appended past the end, the front
    overwritten, then truncated back to size)."""
    data = version_bytes(version, size)
    flags = os.O_WRONLY | (os.O_TRUNC if how == "truncate" else 0)
    fd = os.open(path, flags)
    try:
        if how == "append":
            extra = version_bytes(version, 2 * size, size)
            os.pwrite(fd, extra, size)
        pos = 0
        while pos < size:
            piece = rng.choice((4096, 16384, 65536, size))
            pos += os.pwrite(fd, data[pos:pos + piece], pos)
        if how == "append":
            os.ftruncate(fd, size)
    finally:
        os.close(fd)


PACE = 1500  # rewrites a second at most (a quiet machine does about this many unpaced)


class Rewriter(threading.Thread):
    """Rewrites files (path -> size) in place, version after version, until stopped; each
    file keeps one way of rewriting (hows[path])."""

    def __init__(self, files, hows, seed, first_version=2):
        super().__init__(daemon=True)
        self.files, self.hows = files, hows
        self.rng = random.Random(seed)
        self.version = first_version
        self.stop = threading.Event()
        self.rewrites = 0
        self.failure = None
        self.last = {p: 1 for p in files}         # the version each file holds (or gets)
        self.history = {p: [1] for p in files}    # path -> its versions, each appended as its
        #                                           rewrite begins
        self.previous = {p: {} for p in files}    # path -> {version: the one before it}

    def run(self):
        try:
            paths = sorted(self.files)
            while not self.stop.is_set():
                path = self.rng.choice(paths)
                v = self.version % 60000 + 1
                self.previous[path][v] = self.last[path]
                self.last[path] = v
                self.history[path].append(v)
                write_version(path, v, self.files[path], self.hows[path], self.rng)
                self.version += 1
                self.rewrites += 1
                # At most about PACE rewrites a second: on a loaded machine the readers (through
                # the daemon) slow down far more than this thread, and an unpaced writer then
                # replaces every file before any read of it completes (all ESTALE).
                self.stop.wait(1.0 / PACE)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.failure = e


class Reader(threading.Thread):
    """Reads files through the mount until stopped: whole files and random 8-byte aligned
    ranges, each read() checked. drop: the file's pages are dropped (POSIX_FADV_DONTNEED)
    before each read, so reads reach the daemon."""

    def __init__(self, files, counts, seed, drop, history):
        super().__init__(daemon=True)
        self.files, self.counts, self.drop = files, counts, drop
        self.history = history  # path -> the writer's versions of it (Rewriter.history)
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.failure = None

    def one(self, path, size):
        history = self.history[path]
        begun = len(history)  # history[begun - 1] is current or being written over its previous
        fd = os.open(path, os.O_RDONLY)
        try:
            if self.drop:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if self.rng.random() < 0.5:
                off, want = 0, size
            else:
                off = self.rng.randrange(0, size // WORD) * WORD
                want = self.rng.choice((8, 4096, 4096 * 3 + 8, 65536, 200_000))
                want = min(want, size - off)
            buf = os.pread(fd, want, off)
        finally:
            os.close(fd)
        during = set(history[max(0, begun - 2):len(history)])
        verdict, version = check(buf, off)
        if verdict == Verdict.MIXED:
            self.counts.several(path, off, want, buf, during)
        else:
            self.counts.add(verdict, path, off, want, len(buf), version, buf)

    def run(self):
        try:
            paths = sorted(self.files)
            while not self.stop.is_set():
                path = self.rng.choice(paths)
                try:
                    self.one(path, self.files[path])
                except OSError as e:
                    if e.errno not in (errno.EIO, errno.ESTALE):
                        raise
                    self.counts.error(e)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.failure = e


def run_rewrites(ds, mnt, files, hows, seconds, drop, readers=3, seed=0):
    """Rewrites files (dataset-relative path -> size) in the dataset ds while `readers`
    threads read them through mnt for `seconds`; returns (Counts, rewrites done)."""
    counts = Counts()
    writer = Rewriter({os.path.join(ds, r): s for r, s in files.items()},
                      {os.path.join(ds, r): hows[r] for r in files}, seed)
    history = {os.path.join(mnt, r): writer.history[os.path.join(ds, r)] for r in files}
    rs = [Reader({os.path.join(mnt, r): s for r, s in files.items()}, counts, seed * 10 + i,
                 drop, history) for i in range(readers)]
    writer.start()
    for r in rs:
        r.start()
    end = time.monotonic() + seconds
    while time.monotonic() < end and writer.is_alive():
        writer.join(timeout=min(0.1, max(0.0, end - time.monotonic())))
    writer.stop.set()
    for r in rs:
        r.stop.set()
    for t in [writer, *rs]:
        t.join(timeout=30)
        if t.is_alive():
            raise AssertionError("a reader or the writer did not stop within 30 s")
    for t in [writer, *rs]:
        if t.failure:
            raise t.failure
    # Readers read through mnt, the writer wrote in ds: the same files.
    prev = {os.path.join(mnt, r): writer.previous[os.path.join(ds, r)] for r in files}
    counts.finish(prev, {os.path.join(mnt, r): hows[r] for r in files})
    return counts, writer.rewrites
