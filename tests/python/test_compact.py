"""clairfs.compact and the stream names, without a mount: the encoder's output read back by a
decoder written here from the layout in docs/control-interface.md (not from the encoder),
its refusals, and default_stream_name() across processes.

Also prints (does not assert) the time to encode 90 epochs of 1,281,167 entries.
"""
import io
import os
import struct
import subprocess
import sys
import tempfile
import time
import unittest
from array import array

import clairfs
from clairfs import compact

try:
    import numpy
except ImportError:
    numpy = None
try:
    import torch
except ImportError:
    torch = None

MAGIC = b"\x00\x63\x6C\x61\x69\x72\x66\x73"
STREAM_BYTES = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@:+-")


class Rejected(Exception):
    pass


def decode(data):
    """Reads a compact manifest strictly: (stream name or None, [item bytes], [[indexes]]).
    Raises Rejected for anything the layout forbids."""
    def need(at, n):
        if at + n > len(data):
            raise Rejected(f"truncated at byte {at}")

    need(0, 50)
    magic, version, flags, n_items, item_bytes, n_epochs, n_entries, name_len = \
        struct.unpack_from("<8sIIQQQQH", data, 0)
    if magic != MAGIC or version != 1 or flags != 0:
        raise Rejected("bad magic, version or flags")
    if not (1 <= n_items <= 2**32 - 16 and n_items <= item_bytes <= n_items * 4096
            and 1 <= n_epochs <= 2**20 and 1 <= n_entries <= 2**32 - 16 and name_len <= 128):
        raise Rejected("a count out of bounds")
    at = 50
    need(at, name_len)
    name = data[at:at + name_len]
    at += name_len
    if name and (not set(name) <= STREAM_BYTES or name[:1] in (b".", b"-")):
        raise Rejected(f"bad stream name {name!r}")
    need(at, item_bytes)
    section = data[at:at + item_bytes]
    at += item_bytes
    if not section.endswith(b"\0"):
        raise Rejected("item section does not end with NUL")
    items = section[:-1].split(b"\0")
    if len(items) != n_items:
        raise Rejected(f"{len(items)} items, header says {n_items}")
    for k, it in enumerate(items, 1):
        if not it or it[:1] == b"#" or b"\n" in it or len(it) >= 4096:
            raise Rejected(f"item {k}: {it!r}")
    epochs, total = [], 0
    for _ in range(n_epochs):
        need(at, 4)
        (count,) = struct.unpack_from("<I", data, at)
        at += 4
        if count < 1:
            raise Rejected("empty epoch")
        need(at, 4 * count)
        order = list(struct.unpack_from(f"<{count}I", data, at))
        at += 4 * count
        if max(order) >= n_items:
            raise Rejected("index out of range")
        epochs.append(order)
        total += count
    if total != n_entries:
        raise Rejected("entry counts do not add up")
    need(at, 16)
    (trailer_n,) = struct.unpack_from("<Q", data, at)
    if trailer_n != n_entries or data[at + 8:at + 16] != MAGIC:
        raise Rejected("bad trailer")
    if at + 16 != len(data):
        raise Rejected("bytes after the trailer")
    return (name.decode() if name else None), items, epochs


def encode(items, epochs, **kw):
    f = io.BytesIO()
    n = compact.write_compact(f, items, epochs, **kw)
    return n, f.getvalue()


class EncoderTest(unittest.TestCase):
    def test_layout_byte_by_byte(self):
        n, data = encode(["a", ("b c", 5, 7)], [[1, 0, 1]], stream="j")
        self.assertEqual(n, 3)
        want = (MAGIC + bytes([1, 0, 0, 0]) + bytes(4)
                + struct.pack("<QQQQ", 2, len(b"a\0b c\t5+7\0"), 1, 3) + b"\x01\x00j"
                + b"a\0b c\t5+7\0" + struct.pack("<IIII", 3, 1, 0, 1)
                + struct.pack("<Q", 3) + MAGIC)
        self.assertEqual(data, want)

    def test_round_trips(self):
        items = ["train/a.jpg", "#sharp/x.jpg", "caf\u00e9/\u00fc.png", ("shard-0.tar", 512, 1024),
                 ("tab\tname", 0, 9), b"raw/bytes\xff", ("whole", None, None)]
        want_items = [b"train/a.jpg", b"./#sharp/x.jpg", "caf\u00e9/\u00fc.png".encode(),
                      b"shard-0.tar\t512+1024", b"tab\tname\t0+9", b"raw/bytes\xff", b"whole"]
        orders = [[0, 1, 2, 3, 4, 5, 6], [6, 6, 0], [3]]
        kinds = [lambda o: o, lambda o: array("I", o), lambda o: array("q", o), tuple]
        if numpy is not None:
            kinds += [lambda o: numpy.array(o, dtype=numpy.int64),
                      lambda o: numpy.array(o, dtype=numpy.uint32),
                      lambda o: numpy.array(o, dtype=numpy.int16)]
        if torch is not None:
            kinds += [lambda o: torch.tensor(o), lambda o: torch.tensor(o, dtype=torch.int32),
                      lambda o: torch.tensor([o, o]).t()[:, 1]]  # a non-contiguous view
        for kind in kinds:
            for stream in (None, "rank3-p123", "a" * 128):
                n, data = encode(items, [kind(o) for o in orders], stream=stream)
                self.assertEqual(n, 11)
                self.assertEqual(decode(data), (stream, want_items, orders))
                # Lazy sources: counts announced, or spooled to a temp file.
                lazy = (kind(o) for o in orders)
                self.assertEqual(encode(items, lazy, stream=stream, epoch_count=3,
                                        entry_count=11)[1], data)
                self.assertEqual(encode(items, (kind(o) for o in orders), stream=stream)[1], data)

    def test_bulk_and_careful_item_encodings_agree(self):
        paths = [f"d{i % 7}/f{i}.jpg" for i in range(1000)] + ["#x/1", "\udcff/surrogate", "\u4e2d"]
        fast = compact.encode_items(paths)
        slow = compact.encode_items([os.fsencode(p) for p in paths])  # bytes: the careful path
        self.assertEqual(fast.data, slow.data)
        self.assertEqual(fast.count, len(paths))
        long_name = "d/" + "x" * 4093  # 4095 bytes: the longest entry a manifest takes
        self.assertEqual(compact.encode_items([long_name]).data, long_name.encode() + b"\0")
        with self.assertRaisesRegex(ValueError, "item 2: .*4096"):
            compact.encode_items(["a", long_name + "y"])

    def test_items_under_a_root_agree_with_the_careful_way(self):
        root = "/mnt/data"
        ok = [f"{root}/d{i % 7}/f{i}.jpg" for i in range(500)] + [f"{root}/\u4e2d/x", f"{root}/a/mnt/data/b",
                                                             f"{root}/\udcff"]
        careful = compact.encode_items([clairfs.relative_path(p, root) for p in ok])
        quick = compact.items_under(ok, root)
        self.assertIsNotNone(quick)
        self.assertEqual((quick.data, quick.count), (careful.data, careful.count))
        self.assertEqual(compact.items_under(ok, root + "/").data, careful.data)
        # Each of these takes the careful way (None here), where it is escaped or refused.
        for odd in ([f"{root}/#x"], [f"{root}/d/.hidden"], [f"{root}/d//x"], [f"{root}/d/"],
                    [f"{root}/"], [root], ["/elsewhere/x"], [f"{root}x/y"], [f"{root}/a\tb"],
                    [f"{root}/a\nb"], [f"{root}/" + "x" * 1100],
                    [os.fsencode(f"{root}/a")], []):
            with self.subTest(odd=odd):
                self.assertIsNone(compact.items_under(ok[:3] + odd if odd else odd, root))
        self.assertIsNone(compact.items_under(tuple(ok), root))

    def test_without_numpy_the_bytes_are_the_same(self):
        orders = [list(range(50))[::-1], [7, 7, 7]]
        items = [f"f{i}" for i in range(50)]
        with_np = encode(items, orders)[1]
        saved = compact._numpy
        compact._numpy = False
        try:
            self.assertEqual(encode(items, [array("l", o) for o in orders])[1], with_np)
            self.assertEqual(encode(items, orders)[1], with_np)
            with self.assertRaisesRegex(ValueError, r"epoch 1, entry 2: item index 50 out of range"):
                encode(items, [[0], [1, 50]])
            with self.assertRaisesRegex(ValueError, r"entry 1: item indexes must be integers"):
                encode(items, [[1.5]])
            with self.assertRaisesRegex(ValueError, "epoch 0 is empty"):
                encode(items, [[]])
        finally:
            compact._numpy = saved

    def test_refusals(self):
        bad_items = [([], "no items"), (["a", ""], "item 2: .*empty"), (["a\nb"], "item 1: .*newline"),
                     (["a\0b"], "item 1"), (["/abs"], "item 1: .*relative"),
                     (["x", "t\tab"], "item 2: .*tab"), ([("a", -1, 5)], "item 1: offset"),
                     ([("a", 0, 0)], "item 1: length"), ([("a", 1.0, 5)], "item 1: offset must be an int"),
                     ([("a", 1)], r"item 1: .*\(path, offset, length\)"), ([3], "item 1: an item is a path")]
        for items, msg in bad_items:
            with self.assertRaisesRegex(ValueError, msg, msg=repr(items)):
                encode(items, [[0]])
        items = ["a", "b", "c"]
        bad_epochs = [([[0, 3]], r"epoch 0, entry 2: item index 3 out of range \(the manifest has 3"),
                      ([[0], [1, -1]], r"epoch 1, entry 2: item index -1"),
                      ([[0], []], "epoch 1 is empty"), ([], "no epochs"),
                      ([[0.0]], "integers"), ([[[0, 1]]], "flat")]
        if torch is not None:
            bad_epochs += [([torch.tensor([True])], "integers"), ([torch.tensor([0.5])], "integers")]
        for epochs, msg in bad_epochs:
            with self.assertRaisesRegex(ValueError, msg, msg=repr(epochs)):
                encode(items, epochs)
        for name, msg in [("", "empty"), ("x" * 129, "longer than 128"), (".x", "begin with"),
                          ("-x", "begin with"), ("a b", "outside"), ("caf\u00e9", "outside"),
                          ("a/b", "outside"), (7, "must be a str")]:
            with self.assertRaisesRegex(ValueError, msg):
                encode(items, [[0]], stream=name)
            with self.assertRaisesRegex(ValueError, msg):
                clairfs.check_stream_name(name)

    def test_announced_counts_are_checked_and_leave_no_trailer(self):
        for epochs, ec, nc, msg in [([[0], [1]], 1, 2, "more epochs"), ([[0, 1]], 1, 1, "more entries"),
                                    ([[0]], 2, 2, "1 epochs and 1 entries produced"),
                                    ([[0], [1, 2]], 2, 2, "more entries")]:
            f = io.BytesIO()
            with self.assertRaisesRegex(ValueError, msg):
                compact.write_compact(f, ["a", "b", "c"], iter(epochs), epoch_count=ec, entry_count=nc)
            self.assertNotEqual(f.getvalue()[-8:], MAGIC, "a miscounted manifest got its trailer")
            with self.assertRaises(Rejected):
                decode(f.getvalue())

    def test_decoder_rejects_what_it_should(self):
        _, good = encode(["a", "b"], [[0, 1], [1]], stream="s")
        self.assertEqual(decode(good), ("s", [b"a", b"b"], [[0, 1], [1]]))
        for cut in (0, 10, 49, 52, len(good) - 16, len(good) - 1):
            with self.assertRaises(Rejected):
                decode(good[:cut])
        with self.assertRaises(Rejected):
            decode(good + b"\0")

    def test_ninety_epochs_of_imagenet(self):
        """Prints the time to encode 90 epochs x 1,281,167 entries (to a temp file)."""
        n = 1281167
        items = compact.encode_items([f"train/n{i % 1000:08d}/n{i % 1000:08d}_{i}.JPEG"
                                      for i in range(n)])
        if torch is not None:
            g = torch.Generator()
            g.manual_seed(0)
            order = torch.randperm(n, generator=g)
        else:
            order = array("I", range(n))[::-1]
        with tempfile.TemporaryFile() as f:
            start, cpu = time.perf_counter(), time.process_time()
            written = compact.write_compact(f, items, (order for _ in range(90)), stream="bench",
                                            epoch_count=90, entry_count=90 * n)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            size = f.tell()
        self.assertEqual(written, 90 * n)
        print(f"\n    compact encode of 90 x {n} entries ({size / 2**20:.0f} MiB, "
              f"{'numpy' if compact._np() else 'array'}): {wall:.2f} s wall, {cpu:.2f} s cpu",
              file=sys.stderr)


PRINT_NAME = "import clairfs; print(clairfs.default_stream_name(), clairfs.default_stream_name())"


class StreamNameTest(unittest.TestCase):
    def name_in_child(self, **env):
        clean = {k: v for k, v in os.environ.items()
                 if k not in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")}
        clean["PYTHONPATH"] = os.path.dirname(os.path.dirname(clairfs.__file__))
        r = subprocess.run([sys.executable, "-c", PRINT_NAME], env=dict(clean, **env),
                           capture_output=True, text=True, check=True)
        first, second = r.stdout.split()
        self.assertEqual(first, second, "one process, two names")
        return first

    def test_default_names(self):
        mine = clairfs.default_stream_name()
        self.assertEqual(mine, clairfs.default_stream_name())
        self.assertEqual(clairfs.check_stream_name(mine), mine)
        a, b = self.name_in_child(), self.name_in_child()
        self.assertNotEqual(a, b)
        self.assertRegex(a, r"^p[0-9]+(-ns[0-9]+)?$")
        self.assertRegex(self.name_in_child(RANK="3"), r"^rank3-p[0-9]+(-ns[0-9]+)?$")
        self.assertRegex(self.name_in_child(OMPI_COMM_WORLD_RANK="12"), r"^rank12-p")
        self.assertRegex(self.name_in_child(PMI_RANK="5"), r"^rank5-p")
        self.assertRegex(self.name_in_child(PMIX_RANK="0"), r"^rank0-p")
        self.assertRegex(self.name_in_child(RANK="x", PMI_RANK="2"), r"^rank2-p")
        self.assertRegex(self.name_in_child(RANK=""), r"^p[0-9]")
        ranks = {self.name_in_child(RANK="1") for _ in range(2)}
        self.assertEqual(len(ranks), 2, "two processes of one rank share a name")


if __name__ == "__main__":
    unittest.main()
