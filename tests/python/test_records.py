"""The record formats and clairfs.records without a mount: record-range manifest lines and the
byte ranges of records in real files (tar shards, TFRecord, LMDB, .npy, fixed-size records).

Every range returned is checked against the bytes the format's own reader returns: tarfile's
member data, this package's TFRecord reader (CRCs checked), py-lmdb's values located in its
memory map, numpy's rows. The LMDB and .npy tests need Debian's python3-lmdb and python3-numpy
(tools/setup.sh --with-tests) and are skipped without them.
"""
import io
import os
import random
import shutil
import struct
import subprocess
import tarfile
import unittest

import harness

import clairfs
from clairfs import npy, tfrecord

try:
    import lmdb
    LMDB_MISSING = None
except ImportError as e:  # Debian: apt-get install python3-lmdb
    LMDB_MISSING = f"lmdb not importable: {e}"
try:
    import numpy
    NUMPY_MISSING = None
except ImportError as e:  # Debian: apt-get install python3-numpy
    NUMPY_MISSING = f"numpy not importable: {e}"


def read_range(path, offset, length):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


class ManifestLineTest(unittest.TestCase):
    def test_whole_file_lines_are_unchanged(self):
        self.assertEqual(clairfs.manifest_line("a/b.bin"), b"a/b.bin\n")
        self.assertEqual(clairfs.manifest_line("#x/y"), b"./#x/y\n")
        self.assertEqual(clairfs.manifest_line("a/b", None, None), b"a/b\n")

    def test_range_entries(self):
        ml = clairfs.manifest_line
        self.assertEqual(ml("shard-0.tar", 512, 1000), b"shard-0.tar\t512+1000\n")
        self.assertEqual(ml("s.tar", 0, 1), b"s.tar\t0+1\n")
        self.assertEqual(ml("#odd/s.tar", 10, 2), b"./#odd/s.tar\t10+2\n")
        self.assertEqual(ml(b"raw/\xff.bin", 3, 4), b"raw/\xff.bin\t3+4\n")
        # A tab in the path is fine with a range: the daemon splits at the last tab.
        self.assertEqual(ml("a\tb", 0, 7), b"a\tb\t0+7\n")
        self.assertEqual(ml("x\t1+2", 0, 4), b"x\t1+2\t0+4\n")
        self.assertEqual(ml("big", 2**62, 2**62 - 1), b"big\t%d+%d\n" % (2**62, 2**62 - 1))

        class Index:  # numpy integers and the like: anything with __index__
            def __index__(self):
                return 5
        self.assertEqual(ml("f", Index(), Index()), b"f\t5+5\n")

    def test_range_errors(self):
        ml = clairfs.manifest_line
        with self.assertRaisesRegex(ValueError, "range is required"):
            ml("a\tb")
        for args in [(0, None), (None, 5)]:
            with self.assertRaisesRegex(ValueError, "both offset and length"):
                ml("f", *args)
        for offset, length, msg in [(-1, 5, "offset must be >= 0"), (0, 0, "length must be >= 1"),
                                    (3, -2, "length must be >= 1"), (1.0, 5, "must be an int"),
                                    (0, 5.5, "must be an int"), ("1", 5, "must be an int"),
                                    (True, 5, "must be an int"), (0, True, "must be an int"),
                                    (2**63 - 1, 1, "largest file offset")]:
            with self.assertRaisesRegex(ValueError, msg, msg=(offset, length)):
                ml("f", offset, length)
        for bad in ["a\nb", "a\0b", "", "/abs"]:
            with self.assertRaises(ValueError, msg=bad):
                ml(bad, 0, 1)

    def test_range_manifest_lines(self):
        recs = [clairfs.Record("a", 0, 10), clairfs.Record("b", 10, 5)]
        self.assertEqual(clairfs.range_manifest_lines(recs, "d/s.tar"),
                         [b"d/s.tar\t0+10\n", b"d/s.tar\t10+5\n"])
        self.assertEqual(clairfs.range_manifest_lines([(7, 1)], "#s"), [b"./#s\t7+1\n"])
        self.assertEqual(clairfs.range_manifest_lines(recs[:1], "/data/d/s.tar", root="/data"),
                         [b"d/s.tar\t0+10\n"])
        with self.assertRaisesRegex(ValueError, "root="):
            clairfs.range_manifest_lines(recs, "/data/d/s.tar")
        with self.assertRaisesRegex(ValueError, "not inside the dataset root"):
            clairfs.range_manifest_lines(recs, "/elsewhere/s.tar", root="/data")
        with self.assertRaisesRegex(ValueError, "length must be >= 1"):
            clairfs.range_manifest_lines([(0, 0)], "s")
        with self.assertRaises(TypeError):
            clairfs.range_manifest_lines([5], "s")


class RegisterRecordsTest(harness.ClairfsCase):
    """register_records against a stand-in mount whose .clairfs/manifest is a plain file."""

    def setUp(self):
        super().setUp()
        self.mnt = self.tmpdir("rec")
        os.mkdir(os.path.join(self.mnt, ".clairfs"))
        self.manifest = os.path.join(self.mnt, ".clairfs", "manifest")
        with open(self.manifest, "wb") as f:
            f.write(b"untouched\n")

    def text(self):
        with open(self.manifest, "rb") as f:
            return f.read()

    def test_writes_range_entries_per_epoch(self):
        shard = os.path.join(self.mnt, "shards", "s0.tar")
        n = clairfs.register_records(self.mnt, [
            [(shard, 512, 100), ("shards/s1.tar", 0, 7), ("#x.bin", None, None)],
            [("a\tb.bin", 0, 3)]])
        self.assertEqual(n, 4)
        self.assertEqual(self.text(), b"#begin\n#epoch\nshards/s0.tar\t512+100\nshards/s1.tar\t0+7\n"
                                      b"./#x.bin\n#epoch\na\tb.bin\t0+3\n#end 4\n")

    def test_everything_is_checked_before_writing(self):
        cases = [([[("s.tar", 0, 0)]], ValueError), ([[("s.tar", -1, 3)]], ValueError),
                 ([[("/elsewhere/s.tar", 0, 3)]], ValueError), ([[("a\tb", None, None)]], ValueError),
                 ([("s.tar", 0, 3)], TypeError),  # a flat list: not a list of epochs
                 ([[("s.tar", 0)]], TypeError), ([["s.tar"]], TypeError), (["s.tar"], TypeError)]
        for epochs, exc in cases:
            with self.assertRaises(exc, msg=epochs):
                clairfs.register_records(self.mnt, epochs)
            self.assertEqual(self.text(), b"untouched\n")


class TarTest(harness.ClairfsCase):
    def test_member_ranges_hold_the_member_data(self):
        d = self.tmpdir("tar")
        rng = random.Random(1)
        members = {"a.jpg": rng.randbytes(1000), "b.cls": b"7", "empty.txt": b"",
                   "d/" + "long" * 40 + ".bin": rng.randbytes(5000),  # > 100 bytes: long-name headers
                   "unicodé/ß.bin": rng.randbytes(513), "e.bin": rng.randbytes(512)}
        for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT):
            path = os.path.join(d, f"s{fmt}.tar")
            with tarfile.open(path, "w", format=fmt) as tf:
                dirinfo = tarfile.TarInfo("d")
                dirinfo.type = tarfile.DIRTYPE
                tf.addfile(dirinfo)
                for name, data in members.items():
                    if fmt == tarfile.USTAR_FORMAT and len(name) > 100:
                        continue
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
                link = tarfile.TarInfo("link")
                link.type, link.linkname = tarfile.SYMTYPE, "a.jpg"
                tf.addfile(link)
                hard = tarfile.TarInfo("hard")
                hard.type, hard.linkname = tarfile.LNKTYPE, "a.jpg"
                tf.addfile(hard)
                again = tarfile.TarInfo("a.jpg")  # the same name twice: both listed
                again.size = 3
                tf.addfile(again, io.BytesIO(b"new"))
            recs = clairfs.tar_members(path)
            expected = [n for n, b in members.items()
                        if b and not (fmt == tarfile.USTAR_FORMAT and len(n) > 100)] + ["a.jpg"]
            self.assertEqual([r.name for r in recs], expected, fmt)
            with tarfile.open(path) as tf:
                by_name = [m for m in tf.getmembers() if m.isreg() and m.size]
                for r, m in zip(recs, by_name):
                    self.assertEqual(read_range(path, r.offset, r.length), tf.extractfile(m).read())
            self.assertEqual(read_range(path, recs[-1].offset, recs[-1].length), b"new")
            for r in recs:
                self.assertGreaterEqual(r.length, 1)
                self.assertEqual(r.offset % 512, 0)

    def test_refuses_what_has_no_byte_ranges(self):
        d = self.tmpdir("tar")
        src = os.path.join(d, "x.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(20000))
        gz = os.path.join(d, "s.tar.gz")
        with tarfile.open(gz, "w:gz") as tf:
            tf.add(src, "x.bin")
        with self.assertRaisesRegex(ValueError, "not an uncompressed tar"):
            clairfs.tar_members(gz)
        plain = os.path.join(d, "s.tar")
        with tarfile.open(plain, "w") as tf:
            tf.add(src, "x.bin")
        cut = os.path.join(d, "cut.tar")
        with open(plain, "rb") as f, open(cut, "wb") as g:
            g.write(f.read(10000))
        with self.assertRaisesRegex(ValueError, "past the end|malformed|truncated"):
            clairfs.tar_members(cut)
        if shutil.which("tar") is None:
            return
        sparse = os.path.join(d, "sparse.bin")
        with open(sparse, "wb") as f:
            f.seek(1 << 20)
            f.write(b"tail")
        sp = os.path.join(d, "sparse.tar")
        subprocess.run(["tar", "--sparse", "--format=gnu", "-cf", sp, "-C", d, "sparse.bin"],
                       check=True)
        with self.assertRaisesRegex(ValueError, "sparse"):
            clairfs.tar_members(sp)


class TFRecordTest(harness.ClairfsCase):
    def test_crc32c_vectors(self):
        # RFC 3720 (iSCSI), B.4, and the usual check value.
        self.assertEqual(tfrecord.crc32c(b"123456789"), 0xE3069283)
        self.assertEqual(tfrecord.crc32c(b""), 0)
        self.assertEqual(tfrecord.crc32c(bytes(32)), 0x8A9136AA)
        self.assertEqual(tfrecord.crc32c(b"\xff" * 32), 0x62A8AB43)
        self.assertEqual(tfrecord.crc32c(bytes(range(32))), 0x46DD794E)
        self.assertEqual(tfrecord.crc32c(bytes(range(31, -1, -1))), 0x113FDB5C)
        self.assertEqual(tfrecord.crc32c(b"6789", tfrecord.crc32c(b"12345")), 0xE3069283)
        c = tfrecord.crc32c(b"abc")
        self.assertEqual(tfrecord.masked_crc32c(b"abc"),
                         (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF)

    def test_ranges_frame_each_record(self):
        path = os.path.join(self.tmpdir("tfr"), "train.tfrecord")
        rng = random.Random(2)
        payloads = [b"", b"x", rng.randbytes(100000)] + [rng.randbytes(rng.randint(1, 3000))
                                                         for _ in range(50)]
        written = clairfs.write_tfrecord(path, payloads)
        recs = clairfs.tfrecord_records(path)
        self.assertEqual(recs, written)
        self.assertEqual(recs, clairfs.tfrecord_records(path, verify=True))
        self.assertEqual([r.name for r in recs], list(range(len(payloads))))
        self.assertEqual(list(clairfs.iter_tfrecord(path)), payloads)
        end = 0
        with open(path, "rb") as f:
            for r, data in zip(recs, payloads):
                self.assertEqual(r.offset, end)
                self.assertEqual(r.length, 16 + len(data))
                self.assertEqual(clairfs.read_tfrecord_at(f, r.offset), data)
                raw = read_range(path, r.offset, r.length)  # the range alone parses as the record
                length, crc = struct.unpack_from("<QI", raw)
                self.assertEqual(length, len(data))
                self.assertEqual(crc, tfrecord.masked_crc32c(raw[:8]))
                self.assertEqual(raw[12:-4], data)
                self.assertEqual(struct.unpack_from("<I", raw, len(raw) - 4)[0],
                                 tfrecord.masked_crc32c(data))
                end = r.offset + r.length
        self.assertEqual(end, os.path.getsize(path))

    def test_corruption_is_caught(self):
        d = self.tmpdir("tfr")
        path = os.path.join(d, "t.tfrecord")
        recs = clairfs.write_tfrecord(path, [b"a" * 100, b"b" * 100, b"c" * 100])
        with open(path, "r+b") as f:  # one data byte of record 1
            f.seek(recs[1].offset + 50)
            f.write(b"X")
        self.assertEqual(clairfs.tfrecord_records(path), recs)  # headers only: still intact
        with self.assertRaisesRegex(ValueError, "bad data CRC"):
            clairfs.tfrecord_records(path, verify=True)
        with self.assertRaisesRegex(ValueError, "bad data CRC"):
            list(clairfs.iter_tfrecord(path))
        with open(path, "rb") as f:
            self.assertEqual(clairfs.read_tfrecord_at(f, recs[2].offset), b"c" * 100)
            with self.assertRaisesRegex(ValueError, "length CRC"):
                clairfs.read_tfrecord_at(f, recs[2].offset + 1)  # not the start of a record
        cut = os.path.join(d, "cut.tfrecord")
        with open(path, "rb") as f, open(cut, "wb") as g:
            g.write(f.read(recs[2].offset + 50))
        with self.assertRaisesRegex(ValueError, "truncated"):
            clairfs.tfrecord_records(cut)
        junk = os.path.join(d, "junk")
        with open(junk, "wb") as f:
            f.write(b"\x1f\x8b" + os.urandom(100))  # gzip, say
        with self.assertRaisesRegex(ValueError, "length CRC"):
            clairfs.tfrecord_records(junk)
        empty = os.path.join(d, "empty.tfrecord")
        self.assertEqual(clairfs.write_tfrecord(empty, []), [])
        self.assertEqual(clairfs.tfrecord_records(empty), [])


class FixedRecordsTest(harness.ClairfsCase):
    def test_fixed_records(self):
        path = os.path.join(self.tmpdir("fix"), "f.bin")
        body = bytes(range(256)) * 4  # 1024 bytes
        with open(path, "wb") as f:
            f.write(b"H" * 16 + body + b"TRAILER")
        recs = clairfs.fixed_records(path, 32, header=16, count=32)
        self.assertEqual(len(recs), 32)
        for r in recs:
            self.assertEqual(read_range(path, r.offset, r.length), body[r.name * 32:(r.name + 1) * 32])
        with self.assertRaisesRegex(ValueError, "whole number"):
            clairfs.fixed_records(path, 32, header=16)
        self.assertEqual(len(clairfs.fixed_records(path, 1047)), 1)
        with self.assertRaisesRegex(ValueError, "too short"):
            clairfs.fixed_records(path, 32, header=16, count=33)
        with self.assertRaisesRegex(ValueError, "shorter than"):
            clairfs.fixed_records(path, 1, header=5000)
        for args in [dict(record_size=0), dict(record_size=4, header=-1),
                     dict(record_size=4, count=-1), dict(record_size=4.0)]:
            with self.assertRaises(ValueError, msg=args):
                clairfs.fixed_records(path, **args)


@unittest.skipIf(NUMPY_MISSING, NUMPY_MISSING)
class NpyTest(harness.ClairfsCase):
    def check(self, path, arr):
        recs = clairfs.npy_records(path)
        self.assertEqual(len(recs), arr.shape[0])
        for r in recs:
            row = arr[r.name:r.name + 1].tobytes()  # arr[i] of bytes_ would drop trailing NULs
            self.assertEqual(read_range(path, r.offset, r.length), row, path)
        return recs

    def test_rows_of_saved_arrays(self):
        d = self.tmpdir("npy")
        rng = numpy.random.default_rng(3)
        aligned = numpy.dtype([("a", "u1"), ("b", "<f8"), ("c", "<i4", (2, 3))], align=True)
        arrays = {
            "f32": rng.random((10, 3), dtype=numpy.float32),
            "i64": numpy.arange(7, dtype=numpy.int64),
            "u8": rng.integers(0, 255, (5, 2, 3), dtype=numpy.uint8),
            "be": numpy.arange(12, dtype=">i2").reshape(4, 3),
            "bool": rng.random((6, 4)) > 0.5,
            "c16": (rng.random((3, 2)) + 1j).astype(numpy.complex128),
            "str": numpy.array([["ab", "cde"], ["f", "ghijk"]]),
            "bytes": numpy.array([b"x", b"yyyy", b"zz"]),
            "dt": numpy.array(["2024-01-01", "2024-02-03"], dtype="datetime64[ns]"),
            "rec": numpy.zeros(4, dtype=aligned),
            "void": numpy.zeros((3, 2), dtype="V5"),
            "none": numpy.zeros((0, 4), dtype=numpy.float32),
        }
        arrays["rec"]["b"] = [1.5, 2.5, 3.5, 4.5]
        arrays["rec"]["c"] = numpy.arange(24).reshape(4, 2, 3)
        for name, arr in arrays.items():
            path = os.path.join(d, name + ".npy")
            numpy.save(path, arr)
            self.check(path, arr)
            self.assertEqual(npy.npy_header(path)[4], arr.dtype.itemsize, name)
        self.assertEqual(clairfs.npy_records(os.path.join(d, "none.npy")), [])
        for version in [(1, 0), (2, 0), (3, 0)]:
            path = os.path.join(d, f"v{version[0]}.npy")
            with open(path, "wb") as f:
                numpy.lib.format.write_array(f, arrays["f32"], version=version)
            self.check(path, arrays["f32"])
        # A field name that needs UTF-8 makes numpy write version 3.0 by itself.
        arr = numpy.zeros(3, dtype=[("λ", "<i4"), ("v", "<f2")])
        arr["λ"] = [1, 2, 3]
        path = os.path.join(d, "utf8.npy")
        numpy.save(path, arr)
        with open(path, "rb") as f:
            self.assertEqual(f.read(7)[6], 3)
        self.check(path, arr)

    def test_refusals(self):
        d = self.tmpdir("npy")
        cases = {
            "fortran": (numpy.asfortranarray(numpy.arange(12.0).reshape(3, 4)), "Fortran"),
            "object": (numpy.array([{"a": 1}, None], dtype=object), "object"),
            "scalar": (numpy.array(5), "0-d"),
            "empty_rows": (numpy.zeros((3, 0)), "0 bytes"),
        }
        for name, (arr, msg) in cases.items():
            path = os.path.join(d, name + ".npy")
            numpy.save(path, arr, allow_pickle=True)
            with self.assertRaisesRegex(ValueError, msg, msg=name):
                clairfs.npy_records(path)
        path = os.path.join(d, "cut.npy")
        numpy.save(path, numpy.zeros((100, 10)))
        os.truncate(path, os.path.getsize(path) - 8)
        with self.assertRaisesRegex(ValueError, "shorter than"):
            clairfs.npy_records(path)
        junk = os.path.join(d, "junk.npy")
        with open(junk, "wb") as f:
            f.write(b"PK\x03\x04 not an npy")
        with self.assertRaisesRegex(ValueError, "not a .npy"):
            clairfs.npy_records(junk)


def mapped_base(data_path):
    """Start address of the mapping of data_path's byte 0 in this process (/proc/self/maps)."""
    real = os.path.realpath(data_path)
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].strip() == real and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    raise AssertionError(f"{real} is not mapped")


@unittest.skipIf(LMDB_MISSING or NUMPY_MISSING, LMDB_MISSING or NUMPY_MISSING)
class LmdbTest(harness.ClairfsCase):
    def setUp(self):
        super().setUp()
        self.d = self.tmpdir("lmdb")
        self.rng = random.Random(4)

    def env_path(self, name):
        return os.path.join(self.d, name)

    def check(self, env_path, db=None, subdir=True):
        """Every key's value, as LMDB hands it out from its map, lies inside its record's range."""
        recs = clairfs.lmdb_records(env_path, db=db)
        self.assertEqual(recs, clairfs.lmdb_records(env_path, db=db, verify=False))
        data_path = clairfs.lmdb_data_path(env_path)
        with open(data_path, "rb") as f:
            data = f.read()
        env = lmdb.open(env_path, readonly=True, lock=False, subdir=subdir, max_dbs=4)
        try:
            base = mapped_base(data_path)
            dbi = env.open_db(db) if db is not None else None
            psize = env.stat()["psize"]
            with env.begin(buffers=True, db=dbi) as txn:
                items = [(bytes(k), v) for k, v in txn.cursor()]
                self.assertEqual([r.name for r in recs], [k for k, _ in items])
                for r, (k, v) in zip(recs, items):
                    self.assertEqual(r.offset % psize, 0)
                    self.assertEqual(r.length % psize, 0)
                    if len(v) == 0:
                        continue
                    at = numpy.frombuffer(v, dtype=numpy.uint8).ctypes.data - base
                    self.assertTrue(r.offset <= at and at + len(v) <= r.offset + r.length,
                                    f"{k!r}: value at {at}+{len(v)}, range {r.offset}+{r.length}")
                    self.assertEqual(data[at:at + len(v)], bytes(v))
                    if len(v) > psize:  # an overflow value: its pages, and no more
                        self.assertEqual(r.offset + 16, at)
                        self.assertEqual(r.length, (16 - 1 + len(v)) // psize * psize + psize)
        finally:
            env.close()
        return recs

    def test_small_values_share_leaf_pages(self):
        path = self.env_path("small")
        env = lmdb.open(path, map_size=1 << 28)
        with env.begin(write=True) as txn:
            for i in range(20000):
                txn.put(b"%08d" % i, self.rng.randbytes(self.rng.randint(0, 200)))
        with env.begin(write=True) as txn:  # a second commit: the other meta page is current
            for i in range(0, 20000, 3):
                txn.delete(b"%08d" % i)
            for i in range(1, 20000, 5):
                txn.put(b"%08d" % i, b"updated")
        stat = env.stat()
        env.close()
        self.assertGreaterEqual(stat["depth"], 2)
        recs = self.check(path)
        self.assertEqual(len(recs), stat["entries"])
        self.assertLess(len({r.offset for r in recs}), len(recs) / 10)  # many keys per page
        keys = [r.name for r in recs]
        self.rng.shuffle(keys)
        by_key = {r.name: (r.offset, r.length) for r in recs}
        self.assertEqual(clairfs.lmdb_ranges_for_keys(path, keys[:100] + keys[:3]),
                         [by_key[k] for k in keys[:100] + keys[:3]])
        self.assertEqual(clairfs.lmdb_records(path, keys[:5]),
                         [clairfs.Record(k, *by_key[k]) for k in keys[:5]])
        with self.assertRaises(KeyError):
            clairfs.lmdb_records(path, [b"00000000"])  # deleted
        with self.assertRaises(TypeError):
            clairfs.lmdb_records(path, ["00000001"])

    def test_big_values_on_overflow_pages(self):
        path = self.env_path("big")
        env = lmdb.open(path, map_size=1 << 30)
        sizes = [1, 100, 2000, 4000, 4079, 4080, 4081, 8000, 20000, 300000]
        with env.begin(write=True) as txn:
            for i in range(400):
                txn.put(b"k%05d" % i, self.rng.randbytes(self.rng.choice(sizes)))
        with env.begin(write=True) as txn:  # shrink some in place, move others
            for i in range(0, 400, 7):
                txn.put(b"k%05d" % i, self.rng.randbytes(50))
            for i in range(1, 400, 11):
                txn.put(b"k%05d" % i, self.rng.randbytes(30000))
        stat = env.stat()
        env.close()
        self.assertGreater(stat["overflow_pages"], 0)
        recs = self.check(path)
        self.assertEqual(len(recs), 400)

    def test_named_integer_and_nosubdir_environments(self):
        path = self.env_path("named")
        env = lmdb.open(path, map_size=1 << 28, max_dbs=4, writemap=True)
        images = env.open_db(b"images")
        labels = env.open_db(b"labels", integerkey=True)
        rev = env.open_db(b"rev", reverse_key=True)
        with env.begin(write=True) as txn:
            for i in range(1500):
                txn.put(b"img%d" % i, self.rng.randbytes(self.rng.randint(10, 9000)), db=images)
                txn.put(i.to_bytes(8, "little"), b"%d" % (i % 10), db=labels)
                txn.put(b"%d-%d" % (i, i * 7919 % 1000), b"r" * 30, db=rev)
        env.close()
        self.assertEqual(len(self.check(path, db=b"images")), 1500)
        recs = self.check(path, db=b"labels")
        self.assertEqual([int.from_bytes(r.name, "little") for r in recs], list(range(1500)))
        self.assertEqual(len(self.check(path, db=b"rev")), 1500)
        self.assertEqual(len(self.check(path)), 3)  # the main database: the three names
        with self.assertRaises(KeyError):
            clairfs.lmdb_records(path, db=b"nope")
        one = self.env_path("one.mdb")
        env = lmdb.open(one, subdir=False, map_size=1 << 26)
        with env.begin(write=True) as txn:
            txn.put(b"a", b"x" * 10000)
            txn.put(b"b", b"y")
        env.close()
        self.assertEqual(clairfs.lmdb_data_path(one), one)
        self.assertEqual([r.name for r in self.check(one, subdir=False)], [b"a", b"b"])
        empty = self.env_path("empty")
        lmdb.open(empty, map_size=1 << 20).close()
        self.assertEqual(clairfs.lmdb_records(empty), [])

    def test_what_cannot_be_parsed_is_refused(self):
        path = self.env_path("base")
        env = lmdb.open(path, map_size=1 << 26, max_dbs=2)
        with env.begin(write=True) as txn:
            for i in range(3000):
                txn.put(b"%06d" % i, self.rng.randbytes(self.rng.choice([20, 6000])))
        dup = env.open_db(b"dup", dupsort=True)
        with env.begin(write=True) as txn:
            txn.put(b"k", b"1", db=dup)
            txn.put(b"k", b"2", db=dup)
        psize = env.stat()["psize"]
        env.close()
        with self.assertRaisesRegex(ValueError, "MDB_DUPSORT"):
            clairfs.lmdb_records(path, db=b"dup")
        good = clairfs.lmdb_records(path)
        data_path = clairfs.lmdb_data_path(path)
        with open(data_path, "rb") as f:
            data = f.read()

        def refused(mutate, msg):
            bad = bytearray(data)
            mutate(bad)
            p = os.path.join(self.d, "bad.mdb")
            with open(p, "wb") as f:
                f.write(bad)
            with self.assertRaisesRegex(ValueError, msg):
                clairfs.lmdb_records(p)

        def both_metas(off, fmt, value):
            def mutate(b):
                for page in (0, 1):
                    struct.pack_into(fmt, b, page * psize + off, value)
            return mutate

        leaf = next(r.offset for r in good if r.length == psize)
        over = next(r.offset for r in good if r.length > psize)
        refused(lambda b: b.__delitem__(slice(len(b) - psize, None)), "truncated")
        refused(lambda b: struct.pack_into("<Q", b, leaf, 12345), "says it is page")
        refused(lambda b: struct.pack_into("<H", b, leaf + 10, 0x04), "expected")
        refused(lambda b: struct.pack_into("<H", b, leaf + 12, 3), "bounds")
        refused(lambda b: struct.pack_into("<H", b, over + 10, 0x02), "expected 0x4")
        refused(lambda b: struct.pack_into("<I", b, over + 12, 1), "overflow pages")
        refused(both_metas(20, "<I", 2), "data version 2")
        refused(both_metas(16, "<I", 0xDEADBEEF), "not an LMDB data file")
        refused(both_metas(16 + 24 + 48 + 32, "<Q", 10 ** 6), "entries")  # main db md_entries
        refused(lambda b: b.__setitem__(slice(psize + 16, psize + 20), b"\0\0\0\0"),
                "page 1 is not a valid meta page")
        # A 32-bit build's file: 12-byte page headers put the magic at byte 12.
        refused(lambda b: b.__setitem__(slice(12, 16), struct.pack("<I", 0xBEEFC0DE)) or
                b.__setitem__(slice(16, 20), b"\0\0\0\0"), "32-bit")
        refused(lambda b: struct.pack_into(">I", b, 16, 0xBEEFC0DE), "big-endian")
        with open(os.path.join(self.d, "tiny.mdb"), "wb") as f:
            f.write(b"x" * 10)
        with self.assertRaisesRegex(ValueError, "too small"):
            clairfs.lmdb_records(os.path.join(self.d, "tiny.mdb"))


if __name__ == "__main__":
    unittest.main()
