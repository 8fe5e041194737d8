"""clairfs.hdf5: the byte ranges of an HDF5 dataset's rows, chunks and metadata, checked against
h5py itself, and h5py reading registered datasets through real mounts.

Without a mount: every range the helper returns is checked against what HDF5 reads. h5py opens
the file through a file object that records each read, and each row read in a shuffled order
must read only inside the metadata ranges and that row's ranges (contiguous rows, plain
chunks, gzip and LZF chunks, chunks splitting axis 1, the chunk indexes of libver="latest"
files, a user block); leaving one metadata range out must show up as reads outside (the
check bites). Unsupported datasets are refused with a message saying why.

With a mount: a contiguous, a chunked and a gzip-chunked dataset, each in its own file, read
with h5py at shuffled indices through the mount after register_hdf5: every value equal to the
original, and once the tiers hold the plan, an epoch reads nothing from the backing store.

Needs Debian's python3-h5py (tools/setup.sh --with-tests); skipped without it.
"""
import io
import os
import random
import unittest

import harness
from chunkutil import CHUNK, ChunkCase, chunk_config, chunk_count, chunks_of, clairfs

try:
    import h5py
    import numpy
    H5PY_MISSING = None
except ImportError as e:  # Debian: apt-get install python3-h5py
    H5PY_MISSING = f"h5py not importable: {e}"


def merged(ranges):
    out = []
    for off, length in sorted(ranges):
        if out and off <= out[-1][0] + out[-1][1]:
            out[-1][1] = max(out[-1][1], off + length - out[-1][0])
        else:
            out.append([off, length])
    return out


def inside(read, ranges):
    return any(o <= read[0] and read[0] + read[1] <= o + n for o, n in ranges)


def read_range(path, offset, length):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


class WatchedFile(io.RawIOBase):
    """A file object for h5py.File(): serves the file and lists, in `outside`, every read not
    wholly inside `allowed` (a list of (offset, length), changed as the test goes)."""

    def __init__(self, path):
        super().__init__()
        self.f = open(path, "rb")
        self.allowed = []
        self.outside = []

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=0):
        return self.f.seek(offset, whence)

    def tell(self):
        return self.f.tell()

    def readinto(self, buf):
        at = self.f.tell()
        n = self.f.readinto(buf)
        if n and not inside((at, n), self.allowed):
            self.outside.append((at, n))
        return n

    def close(self):
        self.f.close()
        super().close()


def write_datasets(path, libver="earliest", **file_kw):
    """An HDF5 file of several datasets over the same (400, 6) int32 array; returns {name:
    array}. Attributes on one (a dense attribute store: more than 8 of them)."""
    rng = numpy.random.default_rng(29)
    a = rng.integers(-10**6, 10**6, (400, 6), dtype=numpy.int32)
    with h5py.File(path, "w", libver=libver, **file_kw) as f:
        f.create_dataset("filler", data=rng.random(20000))
        f.create_dataset("contiguous", data=a)
        g = f.create_group("deep/er")
        g.create_dataset("chunked", data=a, chunks=(16, 6))
        f.create_dataset("split", data=a, chunks=(10, 4))              # a row in 2 chunks
        f.create_dataset("gzip", data=a, chunks=(32, 6), compression="gzip", shuffle=True)
        f.create_dataset("growable", data=a, chunks=(8, 6), maxshape=(None, 6))
        f.create_dataset("growable2", data=a, chunks=(8, 3), maxshape=(None, None),
                         compression="lzf")
        f.create_dataset("one_chunk", data=a, chunks=a.shape, compression="gzip")
        f.create_dataset("big_endian", data=a.astype(">i8"), chunks=(50, 6))
        for i in range(12):
            f["contiguous"].attrs[f"a{i}"] = numpy.arange(i + 1)
    names = ["contiguous", "deep/er/chunked", "split", "gzip", "growable", "growable2",
             "one_chunk", "big_endian"]
    return {n: (a.astype(">i8") if n == "big_endian" else a) for n in names}


@unittest.skipIf(H5PY_MISSING, H5PY_MISSING)
class LayoutTest(harness.ClairfsCase):
    def check_reads(self, path, name, lay, want, drop=None):
        """h5py reads every row of `name` in a shuffled order; returns the reads outside the
        metadata ranges (less the one at index `drop`) and the row's own ranges."""
        metadata = [r for k, r in enumerate(lay.metadata) if k != drop]
        order = list(range(lay.rows))
        random.Random(len(name)).shuffle(order)
        w = WatchedFile(path)
        try:
            w.allowed = merged(metadata)
            with h5py.File(w, "r") as f:
                d = f[name]
                dict(d.attrs)
                for i in order:
                    w.allowed = merged(metadata + lay.row_ranges(i))
                    self.assertTrue(numpy.array_equal(d[i], want[i]), f"{name}[{i}]")
        finally:
            w.close()
        return w.outside

    def check_file(self, path, arrays):
        with h5py.File(path, "r") as f:
            for name, want in arrays.items():
                lay = clairfs.hdf5_layout(path, name)
                d = f[name]
                self.assertEqual((lay.shape, lay.dataset), (want.shape, d.name))
                self.assertEqual(lay.itemsize, want.dtype.itemsize)
                if lay.layout == "contiguous":
                    self.assertEqual(lay.storage, [clairfs.Record("data", d.id.get_offset(),
                                                                  want.nbytes)])
                    for i in (0, 17, lay.rows - 1):
                        (off, length), = lay.row_ranges(i)
                        self.assertEqual(read_range(path, off, length), want[i].tobytes())
                else:
                    self.assertEqual(lay.chunk_shape, d.chunks)
                    self.assertEqual(len(lay.storage), d.id.get_num_chunks())
                    for r in lay.storage:  # the stored bytes, compressed or not
                        self.assertEqual(read_range(path, r.offset, r.length),
                                         d.id.read_direct_chunk(r.name)[1], (name, r.name))
                    info = d.id.get_chunk_info(len(lay.storage) - 1)  # relative to the superblock
                    self.assertIn(clairfs.Record(info.chunk_offset, f.userblock_size +
                                                 info.byte_offset, info.size), lay.storage)
                self.assertEqual(self.check_reads(path, name, lay, want), [], name)
        return lay

    def test_ranges_hold_every_read_h5py_makes(self):
        d = self.tmpdir("h5")
        for libver in ("earliest", "latest"):  # v1 B-trees; fixed/extensible arrays, v2 B-trees
            path = os.path.join(d, f"{libver}.h5")
            self.check_file(path, write_datasets(path, libver))
        path = os.path.join(d, "userblock.h5")  # the superblock at 512, found by probing
        self.check_file(path, {"gzip": write_datasets(path, userblock_size=512)["gzip"]})

    def test_a_missing_metadata_range_is_seen(self):
        path = os.path.join(self.tmpdir("h5"), "f.h5")
        arrays = write_datasets(path)
        for name in ("contiguous", "deep/er/chunked", "gzip"):
            lay = clairfs.hdf5_layout(path, name)
            for k in range(len(lay.metadata)):
                self.assertNotEqual(self.check_reads(path, name, lay, arrays[name], drop=k), [],
                                    (name, k))

    def test_records_and_indices(self):
        path = os.path.join(self.tmpdir("h5"), "f.h5")
        write_datasets(path)
        lay = clairfs.hdf5_layout(path, "split")
        self.assertEqual((lay.layout, lay.chunk_shape, lay.filters), ("chunked", (10, 4), ()))
        recs = lay.records()
        self.assertEqual(len(recs), 2 * 400)  # each row lies in two chunks
        self.assertEqual([(r.offset, r.length) for r in recs if r.name == 13],
                         [(s.offset, s.length) for s in lay.storage if s.name[0] == 10])
        self.assertEqual(lay.records("chunk"), lay.storage)
        self.assertEqual([r.name for r in lay.storage[:3]], [(0, 0), (0, 4), (10, 0)])
        self.assertEqual(clairfs.hdf5_records(path, "split", unit="chunk"), lay.storage)
        self.assertEqual(clairfs.hdf5_ranges_for_indices(path, "split", [13, 2, 13]),
                         lay.row_ranges(13) + lay.row_ranges(2) + lay.row_ranges(13))
        gz = clairfs.hdf5_layout(path, "gzip")
        self.assertEqual(gz.filters, (2, 1))  # shuffle, then deflate
        self.assertEqual(gz.row_ranges(40), [(gz.storage[1].offset, gz.storage[1].length)])
        self.assertLess(sum(r.length for r in gz.storage), 400 * 6 * 4)  # compressed sizes
        con = clairfs.hdf5_layout(path, "contiguous")
        self.assertEqual(clairfs.hdf5_records(path, "contiguous")[5],
                         clairfs.Record(5, con.storage[0].offset + 5 * 24, 24))
        self.assertEqual(clairfs.hdf5_metadata_ranges(path, "contiguous"), con.metadata)
        with self.assertRaisesRegex(ValueError, "needs a chunked dataset"):
            con.records("chunk")
        with self.assertRaisesRegex(ValueError, "unit must be"):
            con.records("row")
        with self.assertRaises(IndexError):
            con.row_ranges(400)
        with self.assertRaises(IndexError):
            con.ranges_for_indices([0, -1])
        for bad in (1.0, "3", True):
            with self.assertRaises(TypeError):
                con.row_ranges(bad)
        self.assertEqual(con.row_ranges(numpy.int64(3)), con.row_ranges(3))

    def test_unsupported_datasets_are_refused(self):
        d = self.tmpdir("h5")
        other = os.path.join(d, "other.h5")
        with h5py.File(other, "w") as f:
            f["src"] = numpy.arange(10)
        path = os.path.join(d, "f.h5")
        with h5py.File(path, "w") as f:
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(h5py.h5d.COMPACT)
            h5py.h5d.create(f.id, b"compact", h5py.h5t.NATIVE_INT32,
                            h5py.h5s.create_simple((10,)), dcpl=dcpl)
            f.create_dataset("external", shape=(10,), dtype="i4",
                             external=[(os.path.join(d, "ext.bin"), 0, 40)])
            layout = h5py.VirtualLayout(shape=(10,), dtype="i8")
            layout[:] = h5py.VirtualSource(other, "src", shape=(10,))
            f.create_virtual_dataset("virtual", layout)
            f.create_dataset("unwritten", shape=(10,), dtype="i4")
            f.create_dataset("partial", shape=(10, 4), chunks=(2, 4), dtype="i4")
            f["partial"][0:4] = 1
            f.create_dataset("vlen_str", data=["a", "bb"], dtype=h5py.string_dtype())
            f.create_dataset("ragged", shape=(2,), dtype=h5py.vlen_dtype("i4"))
            f.create_dataset("compound_vlen", shape=(2,),
                             dtype=numpy.dtype([("a", "i4"), ("s", h5py.string_dtype())]))
            f.create_dataset("scalar", data=5)
            f.create_dataset("null", data=h5py.Empty("f4"))
            f.create_group("group")
            f["elink"] = h5py.ExternalLink(other, "src")
            f.create_dataset("empty_rows", shape=(5, 0), dtype="i4")
            f.create_dataset("no_rows", shape=(0, 3), dtype="i4")
            f.create_dataset("fixed_str", data=numpy.array([b"ab", b"cd"]))
        with open(os.path.join(d, "ext.bin"), "wb") as f:
            f.write(bytes(40))
        cases = {"compact": "compact layout", "external": "external storage",
                 "virtual": "virtual dataset", "unwritten": "not allocated",
                 "partial": "3 of its 5 chunks have no storage", "vlen_str": "variable-length",
                 "ragged": "variable-length", "compound_vlen": "variable-length",
                 "scalar": "scalar dataset", "null": "null dataspace", "group": "a group, not",
                 "elink": "external link", "missing": "no such object",
                 "empty_rows": "rows of 0 bytes"}
        for name, msg in cases.items():
            with self.assertRaisesRegex(ValueError, msg, msg=name):
                clairfs.hdf5_layout(path, name)
            with self.assertRaisesRegex(ValueError, msg, msg=name):
                clairfs.hdf5_records(path, name)
        self.assertEqual(clairfs.hdf5_records(path, "no_rows"), [])
        self.assertEqual(len(clairfs.hdf5_records(path, "fixed_str")), 2)
        junk = os.path.join(d, "junk.h5")
        with open(junk, "wb") as f:
            f.write(b"not HDF5 " * 100)
        with self.assertRaisesRegex(ValueError, "cannot open it as an HDF5 file"):
            clairfs.hdf5_layout(junk, "x")
        cut = os.path.join(d, "cut.h5")
        write_datasets(cut)
        with open(cut, "r+b") as f:
            f.truncate(os.path.getsize(cut) - 1000)
        with self.assertRaises(ValueError):
            clairfs.hdf5_layout(cut, "one_chunk")

    def test_register_hdf5_manifest(self):
        mnt = self.tmpdir("rec")  # a stand-in mount: .clairfs/manifest is a plain file
        os.mkdir(os.path.join(mnt, ".clairfs"))
        manifest = os.path.join(mnt, ".clairfs", "manifest")
        with open(manifest, "wb") as f:
            f.write(b"untouched\n")
        path = os.path.join(mnt, "d", "f.h5")
        os.mkdir(os.path.dirname(path))
        write_datasets(path)
        lay = clairfs.hdf5_layout(path, "split")
        n = clairfs.register_hdf5(mnt, "d/f.h5", "split", [[3, 0], [1]])
        meta = [b"d/f.h5\t%d+%d\n" % r for r in lay.metadata]
        rows = {i: [b"d/f.h5\t%d+%d\n" % r for r in lay.row_ranges(i)] for i in (0, 1, 3)}
        want = (b"#begin\n#epoch\n" + b"".join(meta + rows[3] + rows[0]) + b"#epoch\n"
                + b"".join(meta + rows[1]) + b"#end %d\n" % n)
        with open(manifest, "rb") as f:
            self.assertEqual(f.read(), want)
        self.assertEqual(n, 2 * len(meta) + 6)
        for epochs, exc in [([3, 0], TypeError), ([[400]], IndexError), ([["1"]], TypeError),
                            (["12"], TypeError)]:
            with self.assertRaises(exc, msg=epochs):
                clairfs.register_hdf5(mnt, path, "split", epochs)
        with open(manifest, "rb") as f:
            self.assertEqual(f.read(), want)  # nothing written by the refused calls


@unittest.skipIf(H5PY_MISSING, H5PY_MISSING)
class MountTest(ChunkCase):
    """One dataset per file, its allocations aligned to the 64 KiB chunk grid: the first chunk
    holds only metadata (superblock, groups, object headers), so the plan covers it only
    through the metadata ranges, and an epoch that reads it from the tiers shows they are
    right. Every chunk of the file is planned, so the kernel's read-ahead past a read stays
    in planned chunks."""

    def run_epochs(self, name, kw, rows=1500, cols=40):
        rng = numpy.random.default_rng(2929)
        want = rng.integers(0, 1 << 30, (rows, cols), dtype=numpy.int32)
        if kw.get("compression"):
            want %= 100  # compressible
        ds = os.path.join(self.tmpdir("h5ds"), "ds")
        os.makedirs(ds)
        rel = f"{name}.h5"
        with h5py.File(os.path.join(ds, rel), "w", alignment_threshold=4096,
                       alignment_interval=CHUNK) as f:
            f.create_dataset(name, data=want, **kw)
        size = os.path.getsize(os.path.join(ds, rel))
        lay = clairfs.hdf5_layout(os.path.join(ds, rel), name)
        data_chunks = chunks_of((r.offset, r.length) for r in lay.storage)
        meta_chunks = chunks_of(lay.metadata)
        self.assertIn(0, meta_chunks - data_chunks)  # chunk 0: planned for the metadata alone
        self.assertEqual(meta_chunks | data_chunks, set(range(chunk_count(size))))

        mnt = self.mount_at(ds, chunk_config(ram="8MiB"))
        orders = [random.Random(e).sample(range(rows), rows) for e in range(2)]
        n = clairfs.register_hdf5(mnt, os.path.join(mnt, rel), name, orders)
        self.assertEqual(n, sum(len(lay.metadata) + len(lay.ranges_for_indices(o))
                                for o in orders))
        plan = self.plan(mnt)
        self.assertEqual((plan["epochs"], plan["entries"], plan["range_entries"]), (2, n, n))
        self.assertEqual(plan["chunks"], chunk_count(size), plan)
        self.assertEqual(plan["tiers"][0]["objects"], plan["objects"], plan)  # all in RAM

        def read_epoch(order):
            with h5py.File(os.path.join(mnt, rel), "r") as f:
                d = f[name]
                for i in order:
                    self.assertTrue(numpy.array_equal(d[i], want[i]), f"{name}[{i}]")

        read_epoch(orders[0])  # while the prefetch fills the tiers
        want_tiers = [t["bytes"] for t in plan["tiers"]]
        harness.wait_for(lambda: [t["bytes"] for t in self.stats(mnt)["tiers"]] == want_tiers,
                         30, f"the tiers to hold {want_tiers} bytes")
        before = self.stats(mnt)
        read_epoch(orders[1])
        after = self.stats(mnt)
        self.assertEqual(after["backing_bytes"], before["backing_bytes"], after)
        self.assertGreater(after["chunk_reads"], before["chunk_reads"], after)
        self.assertEqual(after["unplanned_chunk_reads"], 0, after)
        self.assertEqual(after["errors"]["stale"] + after["errors"]["fetch"], 0, after)
        return lay

    def test_contiguous(self):
        lay = self.run_epochs("contiguous", {})
        self.assertEqual(lay.layout, "contiguous")

    def test_chunked(self):
        lay = self.run_epochs("chunked", {"chunks": (50, 40)})
        self.assertEqual((lay.layout, lay.filters), ("chunked", ()))

    def test_chunked_gzip(self):
        lay = self.run_epochs("gzip", {"chunks": (100, 40), "compression": "gzip"})
        self.assertEqual((lay.layout, lay.filters), ("chunked", (1,)))
        self.assertLess(max(r.length for r in lay.storage), 100 * 40 * 4)


if __name__ == "__main__":
    unittest.main()
