"""Byte ranges of the values of an LMDB environment, read from its data file alone.

Standard library only: the data file is parsed here (read-only, through mmap, no lock file,
no liblmdb), so a job can register the pages its reads of each key will touch.

The on-disk format read is that of LMDB 0.9 (MDB_DATA_VERSION 1) built for a 64-bit
little-endian host (Debian's liblmdb0 on amd64/arm64), which is what py-lmdb and Caffe-style
dataset converters write there:

- A page is `psize` bytes; page n lies at byte n * psize. Its 16-byte header: uint64 page
  number, uint16 pad, uint16 flags (BRANCH 0x01, LEAF 0x02, OVERFLOW 0x04, META 0x08), then
  uint16 lower and upper bounds of the free space, or for an overflow page a uint32 count of
  pages. From byte 16 on, uint16 offsets of the page's nodes, in key order.
- Pages 0 and 1 are meta pages: magic 0xBEEFC0DE, version, mapping address and size, the
  free and the main database records (MDB_db: uint32 pad (the page size, in the free DB's
  record), uint16 flags, uint16 depth, uint64 branch/leaf/overflow page counts, entries and
  root page number), the last page number and the txnid. The meta page with the higher txnid
  is the current one (LMDB refuses an environment where either is invalid, and so do we).
- A node: uint16 lo, uint16 hi, uint16 flags, uint16 key size, the key, then the data. In a
  branch node, lo | hi << 16 | flags << 32 is the child page number. In a leaf node, lo | hi
  << 16 is the data size; the data follows the key inline, unless the node is F_BIGDATA
  (0x01): then a uint64 page number follows the key, and the value lies at byte 16 of that
  overflow page and the pages after it.

Everything read is checked (page numbers inside the file and below the last page, each page's
own number and type, node bounds, tree depth, key order, and the meta's page and entry
counts against the tree); whatever does not match raises ValueError rather than returning a
range that might be wrong. Not supported, with a ValueError saying so: 32-bit or big-endian
builds, other data versions (LMDB 1.0 / mdb.master), databases with MDB_DUPSORT.

The ranges describe the file as it is when read: an environment written to afterwards (or
while this runs) can move every value; compute them on a quiescent environment.
"""
import mmap
import os
import struct

from ._record import Record

MDB_MAGIC = 0xBEEFC0DE
MDB_DATA_VERSION = 1
PAGEHDRSZ = 16
NODESIZE = 8
P_BRANCH, P_LEAF, P_OVERFLOW, P_META, P_LEAF2, P_SUBP = 0x01, 0x02, 0x04, 0x08, 0x20, 0x40
F_BIGDATA, F_SUBDATA, F_DUPDATA = 0x01, 0x02, 0x04
MDB_REVERSEKEY, MDB_DUPSORT, MDB_INTEGERKEY = 0x02, 0x04, 0x08
_DB_FLAGS_KNOWN = 0x7F  # REVERSEKEY..REVERSEDUP; anything else is not an LMDB 0.9 database
P_INVALID = (1 << 64) - 1

_HDR = struct.Struct("<QHHHH")            # pgno, pad, flags, lower, upper
_OVPAGES = struct.Struct("<I")            # overflow page count, at byte 12 of the header
# MDB_db: pad, flags, depth, branch pages, leaf pages, overflow pages, entries, root
_DB = struct.Struct("<IHHQQQQQ")
_META = struct.Struct("<IIQQ48s48sQQ")    # MDB_meta, at byte 16 of pages 0 and 1
_NODE = struct.Struct("<HHHH")            # lo, hi, flags, ksize
_U64 = struct.Struct("<Q")
_MAX_DEPTH = 64  # LMDB's cursor stack is 32 deep


def lmdb_data_path(env_path):
    """The data file of the environment at `env_path`: `<dir>/data.mdb` for a directory
    environment, `env_path` itself for one opened with subdir=False (MDB_NOSUBDIR).

    This is the path the manifest must name, with the ranges lmdb_records() returns."""
    p = os.fspath(env_path)
    return os.path.join(p, "data.mdb") if os.path.isdir(p) else p


def lmdb_records(env_path, keys=None, db=None, verify=True):
    """The byte ranges of the data file that hold each key's value.

    env_path: the environment (directory, or data file of a subdir=False environment).
    keys: None for every key of the database, in the database's own key order; otherwise an
      iterable of keys (bytes-like), in the order wanted (repeats allowed).
    db: None for the main (unnamed) database; else the name (bytes) of a named database.
    verify: also read each overflow page's header and check it (type, page number, size),
      and the overflow page count of the database. False skips those reads, so only branch
      and leaf pages are read, which matters when the data file is on slow storage.

    Returns a list of Record(key, offset, length), key as bytes. The range is the whole leaf
    page for a value stored in the leaf (so several keys share a range), and the overflow
    pages the value occupies (ceil((16 + size) / psize) pages from its first) for a big one.
    Either way the value's bytes, as LMDB returns them, lie inside the range. Offsets are in
    lmdb_data_path(env_path).

    Raises KeyError for a key (or named database) not in the database, TypeError for a str
    key, ValueError for a file this module cannot parse or that fails a check (see the
    module docstring), OSError when the file cannot be read.
    """
    with _Env(lmdb_data_path(env_path)) as env:
        tree = env.database(db)
        if keys is None:
            return [Record(k, off, ln) for k, off, ln in env.walk(tree, verify)]
        wanted = [_key_bytes(k) for k in keys]
        index = {k: (off, ln) for k, off, ln in env.walk(tree, verify)}
    out = []
    for k in wanted:
        try:
            off, ln = index[k]
        except KeyError:
            raise KeyError(f"key {k!r} is not in the LMDB database") from None
        out.append(Record(k, off, ln))
    return out


def lmdb_ranges_for_keys(env_path, keys, db=None, verify=True):
    """(offset, length) of the pages holding each key's value, in the order of `keys`.

    The same as lmdb_records(env_path, keys, db, verify) without the keys: the ranges a job
    reading the values in this order will touch, for a manifest of lmdb_data_path(env_path).
    """
    return [(r.offset, r.length) for r in lmdb_records(env_path, keys, db=db, verify=verify)]


def _key_bytes(k):
    if isinstance(k, str):
        raise TypeError(f"LMDB keys are bytes, not str ({k!r}): encode them as they were stored")
    return bytes(k)


def _ovpages(size, psize):
    # LMDB's OVPAGES(): the pages an overflow value of `size` bytes occupies.
    return (PAGEHDRSZ - 1 + size) // psize + 1


class _Tree:
    """An MDB_db record: where a database's B-tree lives and what it claims to hold."""

    def __init__(self, raw, what):
        (_, self.flags, self.depth, self.branch_pages, self.leaf_pages, self.overflow_pages,
         self.entries, self.root) = _DB.unpack(raw)
        self.what = what
        if self.flags & ~_DB_FLAGS_KNOWN:
            raise ValueError(f"{what}: unknown database flags {self.flags:#x}")
        if self.flags & MDB_DUPSORT:
            raise ValueError(f"{what} has MDB_DUPSORT (several values per key): not supported")
        if self.root == P_INVALID:
            if self.entries or self.depth:
                raise ValueError(f"{what}: no root page but {self.entries} entries")
        elif not 1 <= self.depth <= _MAX_DEPTH:
            raise ValueError(f"{what}: implausible tree depth {self.depth}")

    def order_key(self):
        # The comparison LMDB sorts this database's keys with, as a Python sort key.
        if self.flags & MDB_REVERSEKEY:
            return lambda k: k[::-1]
        if self.flags & MDB_INTEGERKEY:
            return lambda k: int.from_bytes(k, "little")
        return lambda k: k


class _Env:
    """The data file, mapped read-only, and its current meta page."""

    def __init__(self, path):
        self.path = path
        self._f = open(path, "rb")
        try:
            self.size = os.fstat(self._f.fileno()).st_size
            if self.size < PAGEHDRSZ + _META.size:
                raise ValueError(f"{path}: too small to be an LMDB data file ({self.size} bytes)")
            self._map = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
        except BaseException:
            self._f.close()
            raise
        self.m = memoryview(self._map)
        try:
            self._read_meta()
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.m is not None:
            self.m.release()
            self.m = None
        self._map.close()
        self._f.close()

    def _bad(self, msg):
        return ValueError(f"{self.path}: {msg}")

    def _read_meta(self):
        m = self.m
        magic16 = struct.unpack_from("<I", m, 16)[0]
        if magic16 != MDB_MAGIC:
            if struct.unpack_from("<I", m, 12)[0] == MDB_MAGIC:
                raise self._bad("an LMDB file of a 32-bit build (12-byte page headers): not supported")
            if MDB_MAGIC in (struct.unpack_from(">I", m, 16)[0], struct.unpack_from(">I", m, 12)[0]):
                raise self._bad("an LMDB file of a big-endian build: not supported")
            raise self._bad("not an LMDB data file (no meta page magic)")
        metas = []
        psize = None
        for i in (0, 1):
            base = 0 if i == 0 else psize
            if base + PAGEHDRSZ + _META.size > self.size:
                raise self._bad(f"truncated before meta page {i}")
            pgno, _, flags, _, _ = _HDR.unpack_from(m, base)
            magic, version, _, _, free_raw, main_raw, last_pg, txnid = _META.unpack_from(
                m, base + PAGEHDRSZ)
            if not flags & P_META or magic != MDB_MAGIC:
                raise self._bad(f"page {i} is not a valid meta page")
            if version != MDB_DATA_VERSION:
                raise self._bad(f"LMDB data version {version} (only version {MDB_DATA_VERSION}, "
                                f"the format of LMDB 0.9, is supported)")
            if pgno != i:
                raise self._bad(f"meta page {i} says it is page {pgno}")
            ps = _DB.unpack(free_raw)[0]
            if psize is None:
                psize = ps
                if psize < 256 or psize > 65536 or psize & (psize - 1):
                    raise self._bad(f"implausible page size {psize}")
            elif ps != psize:
                raise self._bad(f"the meta pages disagree on the page size ({psize}, {ps})")
            metas.append((txnid, last_pg, main_raw, i))
        txnid, last_pg, main_raw, which = max(metas)
        self.psize = psize
        self.last_pg = last_pg
        self.txnid = txnid
        if last_pg < 1 or (last_pg + 1) * psize > self.size:
            raise self._bad(f"the file ({self.size} bytes) ends before its last page "
                            f"{last_pg} (page size {psize}): truncated?")
        self.main = _Tree(main_raw, f"{self.path}: main database (meta page {which})")

    def _page(self, pgno, want, what):
        # Checks page `pgno` is a page of type `want`; returns (base offset, header).
        if pgno < 2 or pgno > self.last_pg:
            raise self._bad(f"{what}: page {pgno} is outside the data (pages 2..{self.last_pg})")
        base = pgno * self.psize
        own, _, flags, lower, upper = _HDR.unpack_from(self.m, base)
        if own != pgno:
            raise self._bad(f"{what}: page {pgno} says it is page {own}")
        kind = flags & (P_BRANCH | P_LEAF | P_OVERFLOW | P_META | P_LEAF2 | P_SUBP)
        if kind != want:
            raise self._bad(f"{what}: page {pgno} has flags {flags:#x}, expected {want:#x}")
        return base, lower, upper

    def _nodes(self, pgno, base, lower, upper, what):
        # Offsets (into the file) of the nodes of a branch or leaf page, in order.
        ps = self.psize
        if not (PAGEHDRSZ <= lower <= upper <= ps) or (lower - PAGEHDRSZ) & 1:
            raise self._bad(f"{what}: page {pgno} has bounds lower={lower} upper={upper}")
        n = (lower - PAGEHDRSZ) >> 1
        if n == 0:
            raise self._bad(f"{what}: page {pgno} has no nodes")
        out = []
        for off in struct.unpack_from(f"<{n}H", self.m, base + PAGEHDRSZ):
            if off < upper or off + NODESIZE > ps:
                raise self._bad(f"{what}: page {pgno} has a node at {off} (free space ends at {upper})")
            out.append(base + off)
        return out

    def database(self, name):
        """The _Tree of the main database (name None) or of the named database `name`."""
        if name is None:
            return self.main
        name = _key_bytes(name)
        for key, node, flags, dsz, data_at in self._leaf_nodes(self.main):
            if key == name:
                if not flags & F_SUBDATA or flags & F_BIGDATA or dsz != _DB.size:
                    raise ValueError(f"{self.path}: key {name!r} of the main database is not a "
                                     f"named database")
                return _Tree(bytes(self.m[data_at:data_at + dsz]), f"{self.path}: database {name!r}")
        raise KeyError(f"{self.path}: no named database {name!r}")

    def _leaf_nodes(self, tree):
        # Yields (key, leaf pgno, node flags, data size, data offset) in the tree's key order,
        # checking the tree's shape and counts as it goes.
        if tree.root == P_INVALID:
            return
        m, what, ps = self.m, tree.what, self.psize
        seen = set()
        counts = [0, 0, 0]  # branch pages, leaf pages, entries
        order = tree.order_key()
        prev = None
        stack = [(tree.root, 1)]
        while stack:
            pgno, depth = stack.pop()
            if pgno in seen:
                raise self._bad(f"{what}: page {pgno} is reached twice")
            seen.add(pgno)
            if depth < tree.depth:
                base, lower, upper = self._page(pgno, P_BRANCH, what)
                counts[0] += 1
                children = []
                for node in self._nodes(pgno, base, lower, upper, what):
                    lo, hi, fl, ksize = _NODE.unpack_from(m, node)
                    if node - base + NODESIZE + ksize > ps:
                        raise self._bad(f"{what}: a branch node of page {pgno} overruns it")
                    children.append(lo | hi << 16 | fl << 32)
                stack.extend((c, depth + 1) for c in reversed(children))
                continue
            base, lower, upper = self._page(pgno, P_LEAF, what)
            counts[1] += 1
            for node in self._nodes(pgno, base, lower, upper, what):
                lo, hi, fl, ksize = _NODE.unpack_from(m, node)
                dsz = lo | hi << 16
                data_at = node + NODESIZE + ksize
                stored = 8 if fl & F_BIGDATA else dsz
                if data_at + stored > base + ps:
                    raise self._bad(f"{what}: a leaf node of page {pgno} overruns it")
                if fl & F_DUPDATA:
                    raise self._bad(f"{what}: page {pgno} holds duplicates (F_DUPDATA): not supported")
                if fl & ~(F_BIGDATA | F_SUBDATA):
                    raise self._bad(f"{what}: a node of page {pgno} has unknown flags {fl:#x}")
                key = bytes(m[node + NODESIZE:data_at])
                k = order(key)
                if prev is not None and not prev < k:
                    raise self._bad(f"{what}: keys out of order at {key!r} (page {pgno})")
                prev = k
                counts[2] += 1
                yield key, pgno, fl, dsz, data_at
        if counts != [tree.branch_pages, tree.leaf_pages, tree.entries]:
            raise self._bad(f"{what}: the tree holds {counts[0]} branch pages, {counts[1]} leaf "
                            f"pages and {counts[2]} entries, its record says {tree.branch_pages}, "
                            f"{tree.leaf_pages} and {tree.entries}")

    def walk(self, tree, verify):
        """Yields (key, offset, length) for every key of `tree`, in its key order."""
        ps, m = self.psize, self.m
        overflow = 0
        for key, pgno, fl, dsz, data_at in self._leaf_nodes(tree):
            if not fl & F_BIGDATA:
                yield key, pgno * ps, ps
                continue
            first = _U64.unpack_from(m, data_at)[0]
            n = _ovpages(dsz, ps)
            what = f"{tree.what}: the value of {key!r}"
            if first < 2 or first + n - 1 > self.last_pg:
                raise self._bad(f"{what}: overflow pages {first}..{first + n - 1} are outside "
                                f"the data (pages 2..{self.last_pg})")
            if verify:
                base, _, _ = self._page(first, P_OVERFLOW, what)
                pages = _OVPAGES.unpack_from(m, base + 12)[0]
                if pages < n or first + pages - 1 > self.last_pg:
                    raise self._bad(f"{what}: {dsz} bytes need {n} overflow pages, page {first} "
                                    f"says it begins a run of {pages}")
                overflow += pages
            yield key, first * ps, n * ps
        if verify and overflow != tree.overflow_pages:
            raise self._bad(f"{tree.what}: {overflow} overflow pages in the tree, its record "
                            f"says {tree.overflow_pages}")
