"""Record-range manifests: a read order of byte ranges of big files, registered with clairfs.

Many datasets pack their samples into a few big files (tar shards, TFRecord, LMDB, .npy
arrays, fixed-size binary records, HDF5). A job reading them in a shuffled order reads byte
ranges, not files; clairfs can prefetch exactly those ranges when the manifest names them with
record-range entries (`<path>\\t<offset>+<length>`, see clairfs.manifest_line()).

This module writes those manifests and parses no file format. Standard library only.

    range_manifest_lines(records, path, root=None)   the manifest lines of one file's records
    register_records(mount, epochs, ...)             a read order of (path, offset, length),
                                                     as register_paths() does for whole files

The ranges come from one module per format, each giving for one file a list of
Record(name, offset, length) (clairfs._record): bytes [offset, offset + length), length >= 1,
in the file's order, read with the standard library alone (h5py for HDF5):

    clairfs.tar         tar_members(path)                            tar shards (uncompressed)
    clairfs.tfrecord    tfrecord_records(path, verify=False)         TFRecord; a writer, a reader
    clairfs.lmdb_pages  lmdb_records(env_path, keys=None, db=None)   LMDB values
    clairfs.fixed       fixed_records(path, record_size, header=0, count=None)
    clairfs.npy         npy_records(path)                            rows of a .npy array
    clairfs.hdf5        hdf5_records(path, dataset), register_hdf5   HDF5 datasets (h5py)

The names of those modules but hdf5's are attributes of this module too, imported on first use
(clairfs.records.tar_members is clairfs.tar.tar_members); the package exports them all
(clairfs.tar_members).
"""
import importlib
import os
from typing import TYPE_CHECKING

from .control import _register_compact, check_stream_name, manifest_line, relative_path, write_manifest

__all__ = ["range_manifest_lines", "register_records"]


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


if TYPE_CHECKING:  # what __getattr__ returns, for type checkers (nothing imported at run time)
    from ._record import Record  # noqa: F401
    from .fixed import fixed_records  # noqa: F401
    from .lmdb_pages import lmdb_data_path, lmdb_ranges_for_keys, lmdb_records  # noqa: F401
    from .npy import npy_header, npy_records  # noqa: F401
    from .tar import tar_members  # noqa: F401
    from .tfrecord import (crc32c, iter_tfrecord, masked_crc32c, read_tfrecord_at,  # noqa: F401
                           tfrecord_records, write_tfrecord)

# The parsers' names that resolve here as well, and the module defining each.
_PARSERS = {"Record": "_record", "tar_members": "tar", "fixed_records": "fixed",
            "npy_header": "npy", "npy_records": "npy", "crc32c": "tfrecord",
            "iter_tfrecord": "tfrecord", "masked_crc32c": "tfrecord",
            "read_tfrecord_at": "tfrecord", "tfrecord_records": "tfrecord",
            "write_tfrecord": "tfrecord", "lmdb_data_path": "lmdb_pages",
            "lmdb_ranges_for_keys": "lmdb_pages", "lmdb_records": "lmdb_pages"}


def __getattr__(name):
    module = _PARSERS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __package__), name)
