"""The compact (binary) manifest form: each item (a file or a byte range) written once, then
every epoch as 4-byte item indexes. Layout: docs/control-interface.md, "The compact form".

    with open("order.bin", "wb") as f:
        clairfs.compact.write_compact(f, ["a/1.jpg", "b/2.jpg"], [[1, 0], [0, 1]], stream="job7")

Encoding is incremental: the item section is built whole (it is as large as the distinct
paths), the epochs are converted and written one at a time. Epochs may be lists of ints,
array.array, numpy arrays or torch tensors (CPU); numpy is used when it is importable (a
1.28 M-entry epoch converts in a few milliseconds), array/struct otherwise.
Standard library only; numpy optional.
"""
import os
import struct
import sys
import tempfile
from array import array

from ._manifest_text import check_stream_name, manifest_line

MAGIC = b"\0clairfs"
VERSION = 1
MAX_ITEMS = (1 << 32) - 16
MAX_ENTRIES = (1 << 32) - 16
MAX_EPOCHS = 1 << 20
MAX_ITEM_BYTES = 4095  # a manifest line of PATH_MAX (4096) bytes or more is refused
_HEADER = struct.Struct("<8sIIQQQQH")  # magic, version, flags, I, B, E, N, L; then the name
_U32 = "I" if array("I").itemsize == 4 else "L"
_SWAP = sys.byteorder != "little"
_numpy = None


def _np():
    """numpy, or False when it cannot be imported (looked up once)."""
    global _numpy
    if _numpy is None:
        try:
            import numpy
            _numpy = numpy
        except ImportError:
            _numpy = False
    return _numpy


class Items:
    """The encoded item section: `data` (each item followed by one NUL) and `count`."""

    __slots__ = ("data", "count")

    def __init__(self, data, count):
        self.data, self.count = data, count


def _item_bytes(i, item):
    # One item as the bytes of its manifest line, without the newline, or ValueError.
    try:
        if isinstance(item, tuple):
            if len(item) != 3:
                raise ValueError(f"a range item is (path, offset, length), got {item!r}")
            line = manifest_line(*item)
        elif isinstance(item, (str, bytes, os.PathLike)):
            line = manifest_line(item)
        else:
            raise ValueError(f"an item is a path or (path, offset, length), "
                             f"not {type(item).__name__} ({item!r})")
    except ValueError as e:
        raise ValueError(f"item {i + 1}: {e}") from None
    if len(line) - 1 > MAX_ITEM_BYTES:
        raise ValueError(f"item {i + 1}: {len(line) - 1} bytes ({line[:40]!r}...); a manifest "
                         f"entry must be shorter than 4096 bytes (PATH_MAX)")
    return line[:-1]


def _bulk_str_items(items):
    """The item section of a list of str paths in one encode, or None when any of them needs
    the careful path (an error to report, a tab, a long name): same bytes either way."""
    joined = "\0".join(items)
    if joined[:1] == "#" or "\0#" in joined:
        joined = "\0".join([("./" + s) if s[:1] == "#" else s for s in items])
    try:
        data = joined.encode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())
    except UnicodeError:
        return None
    data += b"\0"
    if (data.count(b"\0") != len(items) or b"\n" in data or b"\t" in data
            or data[:1] in (b"\0", b"/") or b"\0\0" in data or b"\0/" in data):
        return None
    if max(map(len, items)) * 4 + 2 > MAX_ITEM_BYTES:  # UTF-8: at most 4 bytes a character
        return None
    return data


def items_under(paths, root):
    """encode_items(relative_paths(paths, root)) for absolute str paths under `root` (as a
    dataset over the mount holds them), or None when the quick way does not apply (the caller
    then takes the careful way, which reports what is wrong). Same bytes; built in a few
    passes over one joined string instead of a string per path."""
    if not paths or not isinstance(paths, list) or set(map(type, paths)) != {str}:
        return None
    root = os.path.abspath(os.fspath(root))
    prefix = root if root.endswith("/") else root + "/"
    joined = "\0".join(paths)
    # Every path is prefix + a normalized relative path: no '.' or '..' or empty component
    # (nor one starting with '.': left to the careful way), no trailing '/'.
    if (not joined.startswith(prefix) or joined.count("\0" + prefix) != len(paths) - 1
            or "/." in joined or "//" in joined or "/\0" in joined or joined.endswith("/")):
        return None
    rel = joined[len(prefix):].replace("\0" + prefix, "\0")
    del joined
    if rel[:1] == "#" or "\0#" in rel or rel[:1] == "\0" or "\0\0" in rel or rel.endswith("\0"):
        return None  # an escaped '#' or an empty name: the careful way
    if max(map(len, paths)) * 4 + 2 > MAX_ITEM_BYTES:  # UTF-8: at most 4 bytes a character
        return None
    try:
        data = rel.encode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())
    except UnicodeError:
        return None
    if b"\n" in data or b"\t" in data:
        return None
    return Items(data + b"\0", len(paths))


def encode_items(items):
    """The item section for `items`: an Items, or ValueError naming the first bad item
    ("item 7: ..."; 1-based, as the daemon counts).

    An item is a path relative to the dataset root (str, bytes or os.PathLike) or a range
    (path, offset, length), written as the text form writes it (manifest_line): `path` or
    `path<TAB>offset+length`, a leading '#' escaped as './#'. Already an Items: returned as is.
    """
    if isinstance(items, Items):
        return items
    items = items if isinstance(items, list) else list(items)
    if not items:
        raise ValueError("no items: a compact manifest names at least one file")
    if len(items) > MAX_ITEMS:
        raise ValueError(f"{len(items)} items; the compact form holds at most {MAX_ITEMS}")
    data = None
    if set(map(type, items)) == {str}:
        data = _bulk_str_items(items)
    if data is None:
        parts = [_item_bytes(i, it) for i, it in enumerate(items)]
        parts.append(b"")
        data = b"\0".join(parts)
    return Items(data, len(items))


def _index_error(where, pos, value, count):
    return ValueError(f"{where}, entry {pos + 1}: item index {value} out of range "
                      f"(the manifest has {count} items, indexes 0..{count - 1})")


def _is_torch(x):
    return type(x).__module__.split(".", 1)[0] == "torch" and hasattr(x, "dtype")


def encode_epoch(epoch, item_count, where="epoch"):
    """`epoch` (item indexes) as a little-endian uint32 buffer (numpy array or array),
    checked: ValueError for an empty epoch, a non-integer or an index >= item_count."""
    np = _np()
    if _is_torch(epoch):
        if epoch.dtype.is_floating_point or epoch.dtype.is_complex or str(epoch.dtype) == "torch.bool":
            raise ValueError(f"{where}: item indexes must be integers, got a {epoch.dtype} tensor")
        epoch = epoch.detach().cpu()
        epoch = epoch.numpy() if np else epoch.tolist()
    if np:
        a = np.asarray(epoch)
        if a.ndim != 1:
            raise ValueError(f"{where}: expected a flat sequence of item indexes, got shape {a.shape}")
        if a.size == 0:
            raise ValueError(f"{where} is empty: clairfs rejects empty epochs")
        if a.dtype.kind not in "iu":
            raise ValueError(f"{where}: item indexes must be integers, got {a.dtype} "
                             f"(e.g. {a[0]!r})")
        if a.min() < 0 or a.max() >= item_count:
            pos = int(np.flatnonzero((a < 0) | (a >= item_count))[0])
            raise _index_error(where, pos, a[pos], item_count)
        return np.ascontiguousarray(a, dtype="<u4")
    try:
        a = epoch if isinstance(epoch, array) and epoch.typecode == _U32 else array(_U32, epoch)
    except (OverflowError, TypeError) as e:
        for pos, v in enumerate(epoch):
            if not isinstance(v, int) or isinstance(v, bool):
                raise ValueError(f"{where}, entry {pos + 1}: item indexes must be integers, "
                                 f"got {v!r}") from None
            if not 0 <= v < item_count:
                raise _index_error(where, pos, v, item_count) from None
        raise ValueError(f"{where}: {e}") from None
    if not a:
        raise ValueError(f"{where} is empty: clairfs rejects empty epochs")
    if max(a) >= item_count:
        pos = next(p for p, v in enumerate(a) if v >= item_count)
        raise _index_error(where, pos, a[pos], item_count)
    if _SWAP:
        a = array(_U32, a)
        a.byteswap()
    return a


def _write_all(f, data):
    view = memoryview(data).cast("B")
    while view:
        n = f.write(view)
        if n is None or n >= len(view):  # a buffered file writes everything
            return
        view = view[n:]


def _epoch_chunk(f, order):
    _write_all(f, struct.pack("<I", len(order)))
    _write_all(f, order)


class Prepared:
    """A compact manifest ready to be written: items encoded and checked, counts known.
    write_to(f) writes it (the epochs of a lazy source are converted on the way)."""

    def __init__(self, items, stream, epochs, epoch_count, entry_count, spool=None):
        self.items, self.stream = items, stream
        self._epochs, self._spool = epochs, spool
        self.epoch_count, self.entry_count = epoch_count, entry_count
        for what, v, top in (("epochs", epoch_count, MAX_EPOCHS), ("entries", entry_count, MAX_ENTRIES)):
            if not 1 <= v <= top:
                raise ValueError(f"{v} {what}; the compact form holds 1 to {top}")

    def header(self):
        name = b"" if self.stream is None else self.stream.encode()
        return _HEADER.pack(MAGIC, VERSION, 0, self.items.count, len(self.items.data),
                            self.epoch_count, self.entry_count, len(name)) + name

    def write_to(self, f):
        """Writes the whole manifest to the file object `f`; returns the entry count. A lazy
        source that yields other counts than announced raises ValueError before the trailer,
        so the output is incomplete (and rejected by the daemon)."""
        _write_all(f, self.header())
        _write_all(f, self.items.data)
        if self._spool is not None:
            self._spool.seek(0)
            while True:
                block = self._spool.read(1 << 22)
                if not block:
                    break
                _write_all(f, block)
            self._spool.close()
            self._spool = None
        else:
            epochs, entries = 0, 0
            for order in self._epochs:
                if epochs == self.epoch_count:
                    raise ValueError(f"more epochs than the {self.epoch_count} announced")
                order = encode_epoch(order, self.items.count, f"epoch {epochs}")
                entries += len(order)
                if entries > self.entry_count:
                    raise ValueError(f"more entries than the {self.entry_count} announced")
                _epoch_chunk(f, order)
                epochs += 1
            if (epochs, entries) != (self.epoch_count, self.entry_count):
                raise ValueError(f"{epochs} epochs and {entries} entries produced, "
                                 f"{self.epoch_count} and {self.entry_count} announced")
        _write_all(f, struct.pack("<Q", self.entry_count) + MAGIC)
        return self.entry_count


def prepare(items, epochs, stream=None, epoch_count=None, entry_count=None):
    """Encodes and checks everything that can be checked before writing; returns a Prepared.

    With both counts given, `epochs` is consumed lazily by write_to (one epoch in memory).
    Otherwise a list or tuple of epochs is checked whole now (not copied), and any other
    iterable is converted into a temporary file now (4 bytes per entry on disk).
    """
    if stream is not None:
        check_stream_name(stream)
    items = encode_items(items)
    if isinstance(epochs, (str, bytes)):
        raise TypeError("epochs must be an iterable of epochs of item indexes")
    if epoch_count is not None and entry_count is not None:
        return Prepared(items, stream, epochs, epoch_count, entry_count)
    if isinstance(epochs, (list, tuple)):
        n = sum(len(encode_epoch(e, items.count, f"epoch {i}")) for i, e in enumerate(epochs))
        if not epochs:
            raise ValueError("no epochs: a compact manifest has at least one "
                             "(to remove a stream, use clairfs.unregister)")
        return Prepared(items, stream, epochs, len(epochs), n)
    spool = tempfile.TemporaryFile()
    try:
        e = n = 0
        for e, order in enumerate(epochs, 1):
            order = encode_epoch(order, items.count, f"epoch {e - 1}")
            n += len(order)
            _epoch_chunk(spool, order)
        if e == 0:
            raise ValueError("no epochs: a compact manifest has at least one")
        return Prepared(items, stream, None, e, n, spool)
    except BaseException:
        spool.close()
        raise


def write_compact(f, items, epochs, stream=None, *, epoch_count=None, entry_count=None):
    """Writes a compact manifest to the binary file object `f` (a file, BytesIO, the mount's
    manifest); returns the entry count.

    items: list of paths relative to the dataset root, or (path, offset, length) ranges.
    epochs: per epoch, indexes into `items` in read order (list, array, numpy, torch tensor).
    stream: the stream's name (check_stream_name); None: the stream "default".
    epoch_count, entry_count: announce both to write a lazy source epoch by epoch.
    Raises ValueError for bad items, indexes, empty epochs, a bad stream name.
    """
    return prepare(items, epochs, stream, epoch_count, entry_count).write_to(f)
