"""Byte ranges of the rows (or chunks) of an HDF5 dataset, and of the file's metadata that
h5py reads to get at them.

Needs h5py (Debian: python3-h5py), imported on first use: importing this module, or the
package, does not import it. h5py 3.x over HDF5 1.10.5 or later (the chunk queries below);
tested with Debian 12's h5py 3.7 over HDF5 1.10.8.

What a job reading `dset[i]` through h5py reads from the file:

- metadata: the superblock, the object headers of the groups on the dataset's path and of
  the dataset itself, the group structures that lead there (symbol-table B-trees, local
  heaps, or link messages and their fractal heaps), the dataset's attributes, and for a
  chunked dataset its chunk index (a v1 B-tree, or in newer files a fixed array, an extensible
  array or a v2 B-tree). HDF5's format spreads these over the file, and which of them a given
  open reads depends on the library's code paths, so they are not parsed here: they are
  *traced*. The file is opened with h5py through a Python file object (h5py's "fileobj"
  driver) that records every (offset, length) HDF5 asks of it, while the dataset is looked
  up, its attributes read, its whole chunk index walked (H5Dget_num_chunks iterates it all),
  and one element read. Every read of that trace is metadata except the raw data read of the
  element, which lies inside the dataset's storage and is left out. These reads are the ones
  HDF5 makes through its default "sec2" driver too: the object headers' speculative reads,
  the superblock probe and the metadata cache live above the driver, and what sec2 adds
  (metadata accumulation) only merges neighbouring reads.
- data: a contiguous dataset stores its rows back to back from one offset, so row i is
  [offset + i * row_bytes, +row_bytes). A chunked dataset stores each chunk on its own,
  compressed or not: reading any element of a chunk reads the whole chunk (only an unfiltered
  chunk larger than HDF5's chunk cache, 1 MiB by default, is read in part), so a row's record
  is the byte range of each chunk it lies in (several when the chunks split the other axes).
  (Through the default driver HDF5 reads contiguous data through a sieve buffer of up to
  64 KiB from the requested row on, never past the dataset's storage: registering every row
  keeps those reads inside the plan.)

Refused with a ValueError saying why, rather than mapped with ranges that might be wrong:
compact layout (the data lives in the object header, which the metadata ranges already
hold), external storage (the rows are in other files), virtual datasets (rows gathered from
other datasets or files), a dataset reached through an external link, storage that is not
allocated (a contiguous dataset never written, or any chunk never written: h5py returns the
fill value without reading the file), variable-length types (strings, ragged arrays: the
values are in the global heap, the dataset holds only their heap ids), scalar and null
dataspaces (no axis 0), rows of 0 bytes, and ranges past the end of the file.

The ranges describe the file as it is when scanned: a file written to afterwards (or while
this runs) can move everything; compute them on a file that is no longer being written.

hdf5_layout() finds all of it in one scan (an HDF5Layout); hdf5_records,
hdf5_metadata_ranges and hdf5_ranges_for_indices are its parts. register_hdf5() registers a
job's reads of rows, each epoch the metadata ranges and then each row's, through
clairfs.records.register_records.
"""
from __future__ import annotations

import bisect
import io
import itertools
import operator
import os
from typing import Any, Iterable, List, Sequence, Tuple

from ._manifest_text import StrPath
from ._record import Record
from .records import register_records

__all__ = ["HDF5Layout", "hdf5_layout", "hdf5_metadata_ranges", "hdf5_ranges_for_indices",
           "hdf5_records", "register_hdf5"]

Range = Tuple[int, int]  # (offset, length): bytes [offset, offset + length) of the file


def _h5py() -> Any:
    """The h5py module, imported now; ImportError naming the package to install otherwise."""
    try:
        import h5py  # type: ignore
    except ImportError as e:
        raise ImportError(f"clairfs.hdf5 needs h5py, which cannot be imported ({e}); "
                          f"Debian: apt-get install python3-h5py") from None
    return h5py


class _TracingFile(io.RawIOBase):
    """A read-only file object over `path` that records, in `reads`, the (offset, length) of
    every read made through it. h5py's fileobj driver calls seek(addr) and read(size) for each
    block HDF5 reads, and seek(0, 2) + tell() for the file's size.

    While `known` is set (sorted disjoint ranges), a read lying inside them is served from the
    file and any other read is served zeros without touching the file, and also recorded in
    `faked`: that is how chunks are located without reading their data (_chunk_storage)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._f = open(path, "rb", buffering=0)
        self._size = os.fstat(self._f.fileno()).st_size
        self.reads: List[Range] = []
        self.faked: List[Range] = []
        self.known: List[Range] | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def readinto(self, buf: Any) -> int:
        at = self._f.tell()
        want = len(memoryview(buf).cast("B"))
        if self.known is not None and want and not _inside((at, want), self.known):
            n = max(0, min(want, self._size - at))
            memoryview(buf).cast("B")[:n] = bytes(n)
            self._f.seek(at + n)
            if n:
                self.faked.append((at, n))
        else:
            n = self._f.readinto(buf) or 0
        if n:
            self.reads.append((at, n))
        return n

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()


def _merge(ranges: Iterable[Range]) -> List[Range]:
    """The union of `ranges`, as sorted ranges that neither overlap nor touch."""
    out: List[List[int]] = []
    for off, length in sorted(ranges):
        if out and off <= out[-1][0] + out[-1][1]:
            out[-1][1] = max(out[-1][1], off + length - out[-1][0])
        else:
            out.append([off, length])
    return [(a, b) for a, b in out]


def _inside(r: Range, ranges: Sequence[Range]) -> bool:
    # Whether r lies wholly inside one of `ranges` (sorted, disjoint: the output of _merge).
    i = bisect.bisect_right(ranges, (r[0], float("inf"))) - 1
    return i >= 0 and ranges[i][0] <= r[0] and r[0] + r[1] <= ranges[i][0] + ranges[i][1]


def _variable_length(tid: Any, h5t: Any) -> bool:
    """Whether the HDF5 datatype `tid` holds variable-length data anywhere in it."""
    cls = tid.get_class()
    if cls == h5t.VLEN:
        return True
    if cls == h5t.STRING:
        return bool(tid.is_variable_str())
    if cls == h5t.COMPOUND:
        return any(_variable_length(tid.get_member_type(i), h5t) for i in range(tid.get_nmembers()))
    if cls == h5t.ARRAY:
        return _variable_length(tid.get_super(), h5t)
    return False


def _index(i: Any, rows: int) -> int:
    # A row index: an int (or anything with __index__, not bool), 0 <= i < rows.
    if isinstance(i, bool) or not hasattr(type(i), "__index__"):
        raise TypeError(f"a row index must be an int, not {type(i).__name__} ({i!r})")
    v = operator.index(i)
    if not 0 <= v < rows:
        raise IndexError(f"row {v} is outside the dataset's {rows} rows")
    return v


class HDF5Layout:
    """Where one dataset of one HDF5 file keeps its rows, and the metadata that leads there.

    path, dataset: the file and the dataset's name in it (absolute, as h5py names it).
    layout: "contiguous" or "chunked".
    shape: the dataset's shape; axis 0 is the one records are rows of.
    itemsize: bytes per element as stored in the file (the file's datatype).
    dtype: the NumPy dtype h5py reads the elements as (a str, e.g. "<f4").
    chunk_shape: the chunk shape of a chunked dataset, else None.
    filters: the HDF5 filter ids of the chunks' pipeline (1 deflate, 2 shuffle, 3 fletcher32,
      4 szip, 5 nbit, 6 scaleoffset, 32000+ third-party), () for none.
    metadata: the file's metadata ranges h5py reads to open the file and the dataset, read its
      attributes and find any of its chunks: sorted, disjoint (offset, length) pairs.
    storage: the dataset's data: one Record("data", offset, size) for a contiguous dataset
      (none when it has no rows); for a chunked one a Record(chunk coordinates, offset, stored
      size) per chunk, in C order of the chunk grid (coordinates of the chunk's first element,
      as HDF5 gives them; the size is the compressed size of a filtered chunk).
    """

    __slots__ = ("path", "dataset", "layout", "shape", "itemsize", "dtype", "chunk_shape",
                 "filters", "metadata", "storage")

    def __init__(self, path: str, dataset: str, layout: str, shape: Tuple[int, ...],
                 itemsize: int, dtype: str, chunk_shape: Tuple[int, ...] | None,
                 filters: Tuple[int, ...], metadata: List[Range], storage: List[Record]) -> None:
        self.path, self.dataset, self.layout = path, dataset, layout
        self.shape, self.itemsize, self.dtype = shape, itemsize, dtype
        self.chunk_shape, self.filters = chunk_shape, filters
        self.metadata, self.storage = metadata, storage

    def __repr__(self) -> str:
        return (f"HDF5Layout({self.path!r}, {self.dataset!r}, {self.layout}, shape={self.shape}, "
                f"chunks={self.chunk_shape}, filters={self.filters}, "
                f"{len(self.metadata)} metadata ranges, {len(self.storage)} storage ranges)")

    @property
    def rows(self) -> int:
        return self.shape[0]

    def row_ranges(self, i: int) -> List[Range]:
        """The (offset, length) ranges of the file that reading row `i` (dset[i]) needs, in
        file order: the row itself (contiguous), or every chunk it lies in (chunked)."""
        i = _index(i, self.rows)
        if self.layout == "contiguous":
            row = self._row_bytes()
            return [(self.storage[0].offset + i * row, row)]
        c0 = self.chunk_shape[0] if self.chunk_shape else 1
        per_row = self._chunks_per_row()
        first = (i // c0) * per_row
        return [(r.offset, r.length) for r in self.storage[first:first + per_row]]

    def ranges_for_indices(self, indices: Iterable[int]) -> List[Range]:
        """row_ranges(i) for each i of `indices` in that order, one list (repeats allowed).
        Every index is checked first: TypeError for a non-int, IndexError out of range."""
        out: List[Range] = []
        for i in list(indices):
            out.extend(self.row_ranges(i))
        return out

    def records(self, unit: str = "index") -> List[Record]:
        """unit="index": Record(i, offset, length) for every row i, in order, as row_ranges(i)
        gives them (a row lying in k chunks has k records, all named i; consecutive rows of
        one chunk repeat its range). unit="chunk" (chunked datasets): `storage`, one Record per
        chunk named by its coordinates."""
        if unit == "chunk":
            if self.layout != "chunked":
                raise ValueError(f"{self.path}:{self.dataset}: unit='chunk' needs a chunked "
                                 f"dataset; this one is {self.layout}")
            return list(self.storage)
        if unit != "index":
            raise ValueError(f"unit must be 'index' or 'chunk', not {unit!r}")
        return [Record(i, off, length)
                for i in range(self.rows) for off, length in self.row_ranges(i)]

    def _row_bytes(self) -> int:
        n = self.itemsize
        for d in self.shape[1:]:
            n *= d
        return n

    def _chunks_per_row(self) -> int:
        n = 1
        for d, c in zip(self.shape[1:], (self.chunk_shape or ())[1:]):
            n *= -(-d // c)
        return n


def hdf5_layout(path: StrPath, dataset: str) -> HDF5Layout:
    """Scans dataset `dataset` (a name in the file, e.g. "images" or "/train/x") of the HDF5 file
    at `path` with h5py: its layout, its storage ranges and the metadata ranges (module
    docstring). Reads the file's metadata and one element, not the data.

    Raises ValueError for what cannot be mapped (module docstring: compact, external, virtual,
    unallocated, variable-length, scalar...), for a file that is not HDF5 or a name that is
    not a dataset; ImportError without h5py.
    """
    h5py = _h5py()
    h5d, h5t = h5py.h5d, h5py.h5t
    p = os.fspath(path)
    size = os.stat(p).st_size
    where = f"{p}:{dataset}"
    tracer = _TracingFile(p)
    try:
        try:
            f = h5py.File(tracer, "r")
        except OSError as e:
            raise ValueError(f"{p}: h5py cannot open it as an HDF5 file ({e})") from None
        with f:
            link = f.get(dataset, getlink=True)
            if link is None:
                raise ValueError(f"{where}: no such object in the file")
            if isinstance(link, h5py.ExternalLink):
                raise ValueError(f"{where}: an external link to {link.filename}:{link.path}; "
                                 f"map that file's dataset instead")
            obj = f[dataset]
            if not isinstance(obj, h5py.Dataset):
                raise ValueError(f"{where}: a {type(obj).__name__.lower()}, not a dataset")
            if obj.id.fileno != f.id.fileno:
                raise ValueError(f"{where}: reached through an external link (the dataset is in "
                                 f"another file); map that file's dataset instead")
            layout = _check_dataset(obj, where, h5d, h5t)
            for attr in list(obj.attrs):  # their reads (dense storage, global heap) are metadata
                try:
                    obj.attrs[attr]
                except (OSError, TypeError, ValueError):
                    pass  # an attribute h5py cannot read: a job cannot read it either
            itemsize = int(obj.id.get_type().get_size())
            dcpl = obj.id.get_create_plist()
            chunk_shape: Tuple[int, ...] | None
            filters: Tuple[int, ...]
            if layout == h5d.CONTIGUOUS:
                storage = _contiguous_storage(obj, itemsize, where)
                chunk_shape, filters = None, ()
            else:
                chunk_shape = tuple(dcpl.get_chunk())
                filters = tuple(dcpl.get_filter(k)[0] for k in range(dcpl.get_nfilters()))
                storage = _chunk_storage(obj, chunk_shape, where, tracer)
            opened = list(tracer.reads)
            if obj.size:  # one element: whatever the read path adds (data reads dropped below)
                obj[(0,) * len(obj.shape)]
            element = tracer.reads[len(opened):]
            name, shape, dtype = obj.name, tuple(obj.shape), obj.dtype.str
    finally:
        tracer.close()
    if storage and not any(at == storage[0].offset for at, _ in element):
        raise ValueError(f"{where}: reading its first element read {element}, not from "
                         f"{storage[0].offset} where its storage was found; not mapped")
    data = _merge((r.offset, r.length) for r in storage)
    metadata = _merge(opened + [r for r in element if not _inside(r, data)])
    for r in storage:
        if r.offset + r.length > size:
            raise ValueError(f"{where}: storage {r.name} at {r.offset}+{r.length} runs past the "
                             f"end of the {size}-byte file (truncated)")
    lay = "contiguous" if chunk_shape is None else "chunked"
    out = HDF5Layout(p, name, lay, shape, itemsize, dtype, chunk_shape, filters, metadata, storage)
    if shape[0] and out._row_bytes() == 0:
        raise ValueError(f"{where}: rows of 0 bytes (shape {shape}) have no byte range")
    return out


def _check_dataset(obj: Any, where: str, h5d: Any, h5t: Any) -> int:
    """The dataset's layout (h5d.CONTIGUOUS or h5d.CHUNKED), or ValueError for what this
    module does not map."""
    dcpl = obj.id.get_create_plist()
    layout = dcpl.get_layout()
    if layout == h5d.COMPACT:
        raise ValueError(f"{where}: compact layout: the data lives in the dataset's object "
                         f"header, not in a range of its own; hdf5_metadata_ranges() covers "
                         f"it (register those ranges alone)")
    if layout == getattr(h5d, "VIRTUAL", -1):
        raise ValueError(f"{where}: a virtual dataset: its rows come from other datasets (or "
                         f"files); map those source datasets instead")
    if layout not in (h5d.CONTIGUOUS, h5d.CHUNKED):
        raise ValueError(f"{where}: storage layout {layout} is not one this module maps")
    if dcpl.get_external_count():
        raise ValueError(f"{where}: external storage: its rows are kept in "
                         f"{dcpl.get_external_count()} other file(s), not in this one")
    if obj.shape is None:
        raise ValueError(f"{where}: a null dataspace holds no data")
    if len(obj.shape) == 0:
        raise ValueError(f"{where}: a scalar dataset has no axis 0 (no rows)")
    if _variable_length(obj.id.get_type(), h5t):
        raise ValueError(f"{where}: variable-length datatype (vlen strings or arrays): the "
                         f"values live in the file's global heap, the dataset holds only "
                         f"references to them, so rows have no byte range of their own")
    return int(layout)


def _contiguous_storage(obj: Any, itemsize: int, where: str) -> List[Record]:
    if obj.shape[0] == 0 or obj.size == 0:
        return []
    offset = obj.id.get_offset()
    if offset is None:
        raise ValueError(f"{where}: contiguous storage not allocated (the dataset was never "
                         f"written: h5py returns the fill value without reading the file)")
    want = obj.size * itemsize
    have = obj.id.get_storage_size()
    if have != want:
        raise ValueError(f"{where}: contiguous storage of {have} bytes, but {obj.size} elements "
                         f"of {itemsize} bytes need {want}")
    return [Record("data", offset, want)]


def _chunk_storage(obj: Any, chunk: Tuple[int, ...], where: str,
                   tracer: _TracingFile) -> List[Record]:
    """Every chunk of the dataset's grid, in C order, with its byte range.

    HDF5 1.10 can list a chunk's address only by walking the whole index (get_chunk_info and
    get_chunk_info_by_coord both do): quadratic, hours for a million chunks. So the index is
    walked once (get_num_chunks, which reads all of it: traced as metadata), and then each
    chunk is fetched raw with read_direct_chunk (a lookup in the index, then one read of the
    chunk's stored bytes, filters bypassed) while the tracer serves every read outside the
    metadata already traced as zeros: that read is the chunk's range, and its data is never
    read. Checked: each fetch ends with exactly that one read, of the size HDF5 returns, and
    three chunks (first, middle, last) against get_chunk_info_by_coord."""
    dsid = obj.id
    counts = [-(-n // c) for n, c in zip(obj.shape, chunk)]
    total = 1
    for n in counts:
        total *= n
    if total == 0:
        return []
    indexed = dsid.get_num_chunks()
    if indexed < total:
        raise ValueError(f"{where}: {total - indexed} of its {total} chunks have no storage in "
                         f"the file (never written: h5py returns the fill value without reading "
                         f"the file); a dataset with unwritten chunks is refused rather than "
                         f"mapped in part")
    if indexed > total:
        raise ValueError(f"{where}: the chunk index holds {indexed} chunks, the dataset's grid "
                         f"{total}")
    before = len(tracer.reads)
    tracer.known = _merge(tracer.reads)
    out = []
    try:
        for grid in itertools.product(*(range(n) for n in counts)):
            coord = tuple(g * c for g, c in zip(grid, chunk))
            n0, f0 = len(tracer.reads), len(tracer.faked)
            try:
                raw = dsid.read_direct_chunk(coord)[1]
            except (RuntimeError, OSError, ValueError) as e:
                raise ValueError(f"{where}: HDF5 could not fetch the chunk at {coord} "
                                 f"({e})") from None
            new, faked = tracer.reads[n0:], tracer.faked[f0:]
            if not new or new[-1][1] != len(raw) or faked not in ([], new[-1:]):
                raise ValueError(f"{where}: fetching the chunk at {coord} read {new} (outside the "
                                 f"traced metadata: {faked}), not index lookups and then one "
                                 f"read of the chunk's {len(raw)} bytes; not mapped")
            out.append(Record(coord, *new[-1]))
    finally:
        tracer.known = None
        del tracer.reads[before:]  # the chunks' reads; any index read in there was known
    # HDF5 lists chunk addresses relative to the superblock, which a user block moves.
    base = obj.file.id.get_create_plist().get_userblock()
    for r in {0: out[0], len(out) // 2: out[len(out) // 2], -1: out[-1]}.values():
        info = dsid.get_chunk_info_by_coord(r.name)
        if (info.chunk_offset, base + info.byte_offset, info.size) != (r.name, r.offset, r.length):
            raise ValueError(f"{where}: the chunk at {r.name} was read at {r.offset}+{r.length} "
                             f"but HDF5 lists it at {base} + {info.byte_offset}+{info.size}; "
                             f"not mapped")
    return out


def hdf5_metadata_ranges(path: StrPath, dataset: str) -> List[Range]:
    """hdf5_layout(path, dataset).metadata: the sorted, disjoint (offset, length) ranges of
    the file's metadata that h5py reads to open the file, find the dataset, read its
    attributes and find its rows."""
    return hdf5_layout(path, dataset).metadata


def hdf5_records(path: StrPath, dataset: str, unit: str = "index") -> List[Record]:
    """hdf5_layout(path, dataset).records(unit): Record(i, offset, length) per row along axis 0
    (unit="index", a row in k chunks has k records), or Record(chunk coordinates, offset,
    stored size) per chunk (unit="chunk"). The metadata ranges are not records: register them
    too (register_hdf5 does)."""
    return hdf5_layout(path, dataset).records(unit)


def hdf5_ranges_for_indices(path: StrPath, dataset: str, indices: Iterable[int]) -> List[Range]:
    """The (offset, length) ranges reading the rows `indices` (in that order) needs:
    hdf5_layout(path, dataset).ranges_for_indices(indices)."""
    return hdf5_layout(path, dataset).ranges_for_indices(indices)


def register_hdf5(mount: StrPath, path: StrPath, dataset: str, epochs: Iterable[Iterable[int]],
                  root: StrPath | None = None, append: bool = False, stream: str | None = None,
                  compact: bool = False) -> int:
    """Registers the reads of a job reading rows of one HDF5 dataset, in the given orders.

    mount: the clairfs mount point.
    path: the HDF5 file; a relative path is relative to `root`. It is scanned (hdf5_layout)
      through that path, normally under the mount.
    dataset: the dataset's name in the file.
    epochs: one iterable of row indices (along axis 0) per epoch, in the order the job will
      read them.
    root, append, stream, compact: as for register_records (root: the dataset root, default
      the mount point).

    Each epoch registers the file's metadata ranges first (the job opens the file, often once
    per epoch and worker), then the ranges of each row in order (hdf5_layout's row_ranges).
    Returns the number of entries registered. Raises what hdf5_layout raises, TypeError or
    IndexError for a bad index and TypeError for a flat list of indices (wrap one epoch as
    [indices]), all before anything is written; ManifestError when clairfs rejects the
    manifest.
    """
    base = os.fspath(mount if root is None else root)
    p = os.fspath(path)
    if not os.path.isabs(p):
        p = os.path.join(base, p)
    epochs = [e for e in epochs]
    for e in epochs:
        if isinstance(e, (str, bytes, os.PathLike)) or not hasattr(e, "__iter__"):
            raise TypeError("epochs must be a list of lists of row indices; for one epoch pass "
                            "[indices]")
    lay = hdf5_layout(p, dataset)
    entries = [[(p, off, length) for off, length in lay.metadata + lay.ranges_for_indices(e)]
               for e in epochs]
    n: int = register_records(mount, entries, root=base, append=append, stream=stream,
                              compact=compact)
    return n
