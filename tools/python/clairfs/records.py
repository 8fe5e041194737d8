"""Records inside big files: their byte ranges, and manifests that name them.

Many datasets pack their samples into a few big files (tar shards, TFRecord, LMDB, .npy
arrays, fixed-size binary records). A job reading them in a shuffled order reads byte ranges,
not files; clairfs can prefetch exactly those ranges when the manifest names them with
record-range entries (`<path>\\t<offset>+<length>`, see clairfs.manifest_line()).

Each *_records / *_members function here returns, for one file, a list of
Record(name, offset, length): bytes [offset, offset + length) of the file, length >= 1, in the
file's order. They read only what they must (headers, B-tree pages), with the standard
library alone, and raise ValueError for a file they cannot parse or that fails their checks
rather than return a range that might be wrong. register_records() turns a read order of
(path, offset, length) into a manifest, as register_paths() does for whole files.

    tar_members(path)                          tar shards (uncompressed)
    tfrecord_records(path, verify=False)       TFRecord (see clairfs.tfrecord)
    lmdb_records(env_path, keys=None, db=None) LMDB values (see clairfs.lmdb_pages)
    fixed_records(path, record_size, header=0, count=None)
    npy_records(path)                          rows of a .npy array
"""
import ast
import os
import re
import struct
import tarfile

from ._record import Record
from .control import _register_compact, check_stream_name, manifest_line, relative_path, write_manifest
from .lmdb_pages import lmdb_data_path, lmdb_ranges_for_keys, lmdb_records
from .tfrecord import (crc32c, iter_tfrecord, masked_crc32c, read_tfrecord_at, tfrecord_records,
                       write_tfrecord)

__all__ = ["Record", "crc32c", "fixed_records", "iter_tfrecord", "lmdb_data_path",
           "lmdb_ranges_for_keys", "lmdb_records", "masked_crc32c", "npy_records",
           "range_manifest_lines", "read_tfrecord_at", "register_records", "tar_members",
           "tfrecord_records", "write_tfrecord"]


def tar_members(path):
    """The data of each regular-file member of the uncompressed tar archive at `path`.

    Returns a list of Record(member name, offset, length), in archive order: the member's
    data starts at `offset` (after its headers, PAX/GNU long-name headers included) and is
    `length` = its size bytes long. Members of size 0 are left out (a range cannot be empty),
    and so are directories, links (a hard link's data is the earlier member's), devices and
    FIFOs. A name appearing twice is listed twice, as the archive holds it twice.

    Raises ValueError for a compressed or malformed archive, a sparse member (its bytes in
    the archive are not its contents) and a member whose data runs past the end of the file.
    """
    size = os.stat(path).st_size
    try:
        tf = tarfile.open(path, mode="r:")
    except tarfile.ReadError as e:
        raise ValueError(f"{path}: not an uncompressed tar archive ({e}); a compressed one "
                         f"has no per-member byte ranges") from None
    out = []
    with tf:
        try:
            for m in tf:
                if m.issparse():
                    raise ValueError(f"{path}: member {m.name!r} is sparse: its data in the "
                                     f"archive is not its contents, so it has no byte range")
                if not m.isreg() or m.size == 0:
                    continue
                if m.offset_data + m.size > size:
                    raise ValueError(f"{path}: member {m.name!r} runs past the end of the "
                                     f"archive (truncated)")
                out.append(Record(m.name, m.offset_data, m.size))
        except tarfile.TarError as e:
            raise ValueError(f"{path}: malformed tar archive ({e})") from None
    return out


def _count(what, v, least):
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{what} must be an int, not {type(v).__name__}")
    if v < least:
        raise ValueError(f"{what} must be >= {least}, got {v}")
    return v


def fixed_records(path, record_size, header=0, count=None):
    """Records of `record_size` bytes each, back to back after a `header` of that many bytes.

    count: how many records; None for as many as fill the rest of the file, which must then
      be a whole number of records (pass count= when a trailer follows them).

    Returns a list of Record(index, header + index * record_size, record_size). Raises
    ValueError when the file is too short for them, or its body is not a multiple of
    record_size and count is None.
    """
    _count("record_size", record_size, 1)
    _count("header", header, 0)
    size = os.stat(path).st_size
    if count is None:
        body = size - header
        if body < 0:
            raise ValueError(f"{path}: {size} bytes, shorter than the {header}-byte header")
        if body % record_size:
            raise ValueError(f"{path}: {body} bytes after the header are not a whole number of "
                             f"{record_size}-byte records; pass count= if a trailer follows")
        count = body // record_size
    else:
        _count("count", count, 0)
        if header + count * record_size > size:
            raise ValueError(f"{path}: {size} bytes, too short for a {header}-byte header and "
                             f"{count} records of {record_size} bytes")
    return [Record(i, header + i * record_size, record_size) for i in range(count)]


_NPY_MAGIC = b"\x93NUMPY"
_TYPESTR = re.compile(r"[<>|=]?([a-zA-Z])(\d*)(\[\w+\])?")


def _itemsize(descr, path):
    # Bytes per element of a .npy 'descr': a type string or a structured dtype's field list.
    if isinstance(descr, str):
        m = _TYPESTR.fullmatch(descr)
        if not m:
            raise ValueError(f"{path}: dtype {descr!r} is not one this parser knows")
        kind = m.group(1)
        if kind == "O":
            raise ValueError(f"{path}: object arrays (pickled Python objects) have no "
                             f"fixed-size rows")
        if not m.group(2):
            raise ValueError(f"{path}: dtype {descr!r} is not one this parser knows")
        n = int(m.group(2))
        if kind == "U":
            return 4 * n
        if kind not in "biufcmMSVa" or (m.group(3) and kind not in "mM"):
            raise ValueError(f"{path}: dtype {descr!r} is not one this parser knows")
        return n
    if isinstance(descr, list) and descr:
        total = 0
        for field in descr:
            if not isinstance(field, tuple) or len(field) not in (2, 3):
                raise ValueError(f"{path}: malformed structured dtype field {field!r}")
            n = _itemsize(field[1], path)
            for dim in (field[2] if len(field) == 3 else ()):
                if not isinstance(dim, int) or dim < 0:
                    raise ValueError(f"{path}: malformed field shape in {field!r}")
                n *= dim
            total += n
        return total
    raise ValueError(f"{path}: dtype {descr!r} is not one this parser knows")


def npy_header(path):
    """(data offset, descr, fortran_order, shape, itemsize) of the .npy file at `path`,
    parsed from its header (format versions 1.0, 2.0 and 3.0). ValueError if malformed."""
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 10 or head[:6] != _NPY_MAGIC:
            raise ValueError(f"{path}: not a .npy file (no \\x93NUMPY magic)")
        major = head[6]
        if major == 1:
            hlen, start, enc = struct.unpack_from("<H", head, 8)[0], 10, "latin1"
        elif major in (2, 3) and len(head) == 12:
            hlen, start = struct.unpack_from("<I", head, 8)[0], 12
            enc = "utf8" if major == 3 else "latin1"
        else:
            raise ValueError(f"{path}: .npy format version {major}.{head[7]} is not supported")
        f.seek(start)
        raw = f.read(hlen)
    if len(raw) != hlen:
        raise ValueError(f"{path}: truncated .npy header")
    try:
        d = ast.literal_eval(raw.decode(enc))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError) as e:
        raise ValueError(f"{path}: malformed .npy header ({e})") from None
    if not isinstance(d, dict) or set(d) != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"{path}: malformed .npy header {d!r}")
    shape, fortran = d["shape"], d["fortran_order"]
    if (not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape)
            or not isinstance(fortran, bool)):
        raise ValueError(f"{path}: malformed .npy header {d!r}")
    return start + hlen, d["descr"], fortran, shape, _itemsize(d["descr"], path)


def npy_records(path):
    """One Record(row index, offset, row bytes) per row along axis 0 of the .npy array at
    `path` (as written by numpy.save), in order; [] for an array of 0 rows.

    The header is parsed here (magic, version 1/2/3, its dict via ast.literal_eval), NumPy
    is not needed. Raises ValueError for a 0-d array, rows of 0 bytes, Fortran order (a row
    is not contiguous), object arrays (elements are pickled: no fixed size), a dtype the
    parser does not know, and a file shorter than its header says.
    """
    offset, descr, fortran, shape, itemsize = npy_header(path)
    if not shape:
        raise ValueError(f"{path}: a 0-d array has no rows")
    if fortran and len(shape) > 1:
        raise ValueError(f"{path}: Fortran-order array: a row along axis 0 is not contiguous")
    row = itemsize
    for n in shape[1:]:
        row *= n
    if row == 0 and shape[0]:
        raise ValueError(f"{path}: rows of 0 bytes (shape {shape}, dtype {descr!r}) have no range")
    size = os.stat(path).st_size
    if offset + shape[0] * row > size:
        raise ValueError(f"{path}: {size} bytes, shorter than the {shape[0]} rows of {row} "
                         f"bytes its header announces after byte {offset}")
    return [Record(i, offset + i * row, row) for i in range(shape[0])]


def _entry_range(r):
    # (offset, length) of a Record-like object (.offset, .length) or an (offset, length) pair.
    if hasattr(r, "offset") and hasattr(r, "length"):
        return r.offset, r.length
    try:
        offset, length = r
    except (TypeError, ValueError):
        raise TypeError(f"expected a Record or an (offset, length) pair, got {r!r}") from None
    return offset, length


def range_manifest_lines(records, path, root=None):
    """Manifest lines (bytes) naming each record of `records`, in order, as a range of `path`.

    records: Records (anything with .offset and .length) or (offset, length) pairs.
    path: the file, relative to the dataset root; an absolute path needs `root`, the
      directory it is made relative to (the dataset root, normally the mount point).

    For clairfs.write_manifest(mount, [lines, ...]). Raises ValueError for a range or path
    manifest_line() refuses, or an absolute path without root (or outside it).
    """
    p = os.fspath(path)
    if os.path.isabs(p):
        if root is None:
            raise ValueError(f"{path!r} is absolute: pass root= (the dataset root) or a relative path")
        p = relative_path(p, root)
    return [manifest_line(p, *_entry_range(r)) for r in records]


def _is_entry(x):
    return isinstance(x, tuple) and x and isinstance(x[0], (str, bytes, os.PathLike))


def register_records(mount, epochs, root=None, append=False, stream=None, compact=False):
    """Registers a read order of byte ranges, one list per epoch, like register_paths().

    mount: the clairfs mount point.
    epochs: an iterable of epochs, each an iterable of (path, offset, length) in the order the
      job will read them; (path, None, None) names a whole file. A relative path is relative
      to the dataset root; an absolute one must lie under `root` and is made relative to it.
    root: the directory absolute paths are made relative to; default: the mount point.
    append: add these epochs to the stream's plan instead of replacing it.
    stream: the stream to register (clairfs.write_manifest); None: the stream "default".
    compact: write the compact (binary) form: each distinct range once, then 4 bytes per
      entry (needs a clairfs that understands it, docs/control-interface.md).

    Returns the number of entries registered. Every entry is checked before anything is
    written: ValueError for a bad range or a path outside the root, TypeError for an entry
    that is not a (path, offset, length) triple or a flat list of entries (wrap one epoch as
    [entries]); ManifestError when clairfs rejects the manifest (e.g. a missing file, or a
    range past the end of its file).
    """
    root = os.fspath(mount if root is None else root)
    epochs = list(epochs)
    if epochs and _is_entry(epochs[0]):
        raise TypeError("epochs must be a list of lists of (path, offset, length); "
                        "for one epoch pass [entries]")
    rel = {}

    def item(entry):
        try:
            path, offset, length = entry
        except (TypeError, ValueError):
            raise TypeError(f"an entry must be (path, offset, length), got {entry!r}") from None
        key = os.fspath(path)
        p = rel.get(key)
        if p is None:
            p = rel[key] = relative_path(key, root) if os.path.isabs(key) else key
        return p, offset, length

    for epoch in epochs:
        if isinstance(epoch, (str, bytes, os.PathLike)) or _is_entry(epoch):
            raise TypeError("epochs must be a list of lists of (path, offset, length); "
                            "for one epoch pass [entries]")
    if compact:
        return _register_compact(mount, epochs, item, append, stream)
    if stream is not None:
        check_stream_name(stream)
    lines = [[manifest_line(*item(entry)) for entry in epoch] for epoch in epochs]
    return write_manifest(mount, lines, append=append, stream=stream)
