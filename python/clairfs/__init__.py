"""clairfs from Python: tell a clairfs mount the order a training job will read its files in.

Without torch (standard library only):
    register_paths(mount, [[paths of epoch 0], [paths of epoch 1], ...], stream=None, compact=False)
    unregister(mount, stream)                         # remove one stream of the plan
    default_stream_name()                             # "p<pid>" or "rank<R>-p<pid>"
    stats(mount), plan(mount), errors(mount); ManifestError when clairfs rejects a manifest
    clairfs.compact.write_compact(f, items, epochs)   # the compact (binary) form, to any file

Records inside big files (standard library only; docs/records.md):
    manifest_line(path, offset, length)               # a record-range entry
    tar_members, tfrecord_records, lmdb_records, fixed_records, npy_records -> [Record]
    register_records(mount, [[(path, offset, length), ...], ...])

HDF5 datasets (h5py imported on first use of these names; docs/records.md, "HDF5"):
    hdf5_layout(path, dataset) -> HDF5Layout           # rows' or chunks' ranges, metadata ranges
    hdf5_records, hdf5_metadata_ranges, hdf5_ranges_for_indices
    register_hdf5(mount, path, dataset, [[row indices of epoch 0], ...])

With torch (imported on first use of these names):
    register_loader(mount, loader, epochs)            # a DataLoader, before its first epoch
    register_dataset(mount, dataset, sampler, epochs) # a dataset with .samples and a sampler
    loader_orders, sampler_orders, dataset_paths      # the same orders, without registering
    ResumeSampler(sampler, skip)                      # resume part-way through an epoch
    LocalitySampler(dataset, ..., batch_size=B)       # DistributedSampler whose ranks read what
                                                      # their node holds (clairfs.locality)
    register_loader(..., skip_batches=B)              # a plan that starts at batch B

The batch path (docs/batch-path.md): a whole batch in one request, into this process's memory
    BatchClient(mount).read([path or (path, offset, length), ...]) -> Batch   (standard library)
    read_batch(mount, samples), client_for(mount); BatchUnavailable, BatchError
    prefetch(client, batches, depth=2)   # batches read ahead by a thread of the training process
    BatchImageFolder(root, transform=...), BatchFiles(paths, decode=...)     (with torch)

Reading files without a request to the daemon per warm file (standard library; PIL for images):
    open_file(path), read_file(path), pil_loader(path) # as open(path, "rb"), no isatty probe

docs/pytorch.md has a worked example; docs/control-interface.md the contract underneath.
clairfs.__version__ is the package's version, the same as the daemon's (`clairfs --version`).
The commands of clairfs-ctl (and `python3 -m clairfs`) are the subpackage clairfs.ctl.
"""
import importlib
from typing import TYPE_CHECKING

from ._version import __version__
from .loaders import open_file, pil_loader, read_file
from .control import (ManifestError, check_stream_name, control_path, default_stream_name, errors,
                      manifest_line, plan, register_paths, relative_path, stats, unregister,
                      write_compact_manifest, write_manifest)

_TORCH_NAMES = ("LocalitySampler", "ResumeSampler", "dataset_paths", "loader_orders", "register_dataset",
                "register_loader", "sampler_orders")
_RECORDS_NAMES = ("Record", "fixed_records", "iter_tfrecord", "lmdb_data_path",
                  "lmdb_ranges_for_keys", "lmdb_records", "npy_records", "range_manifest_lines",
                  "read_tfrecord_at", "register_records", "tar_members", "tfrecord_records",
                  "write_tfrecord")
_BATCH_NAMES = ("Batch", "BatchClient", "BatchError", "BatchUnavailable", "client_for", "prefetch",
                "read_batch")
_TORCH_BATCH_NAMES = ("BatchFiles", "BatchImageFolder")
_HDF5_NAMES = ("HDF5Layout", "hdf5_layout", "hdf5_metadata_ranges", "hdf5_ranges_for_indices",
               "hdf5_records", "register_hdf5")

__all__ = ["ManifestError", "check_stream_name", "control_path", "default_stream_name", "errors",
           "manifest_line", "plan", "register_paths", "relative_path", "stats", "unregister",
           "write_compact_manifest", "write_manifest", "open_file", "pil_loader", "read_file",
           *_RECORDS_NAMES, *_HDF5_NAMES, *_TORCH_NAMES, *_BATCH_NAMES, *_TORCH_BATCH_NAMES]

if TYPE_CHECKING:  # what __getattr__ returns, for type checkers (nothing imported at run time)
    from ._record import Record
    from .batch import (Batch, BatchClient, BatchError, BatchUnavailable, client_for, prefetch,
                        read_batch)
    from .fixed import fixed_records
    from .hdf5 import (HDF5Layout, hdf5_layout, hdf5_metadata_ranges, hdf5_ranges_for_indices,
                       hdf5_records, register_hdf5)
    from .lmdb_pages import lmdb_data_path, lmdb_ranges_for_keys, lmdb_records
    from .locality import LocalitySampler
    from .npy import npy_records
    from .records import range_manifest_lines, register_records
    from .tar import tar_members
    from .tfrecord import iter_tfrecord, read_tfrecord_at, tfrecord_records, write_tfrecord
    from .torch_batch import BatchFiles, BatchImageFolder
    from .torch_order import (ResumeSampler, dataset_paths, loader_orders, register_dataset,
                              register_loader, sampler_orders)

# The module defining each name of the groups above, imported when the name is first
# used: torch takes seconds to import, and a job registering whole files needs neither
# tarfile, mmap nor h5py (clairfs.hdf5 itself imports h5py only when a function of it runs).
_HOME = {**dict.fromkeys(_TORCH_NAMES, "torch_order"), "LocalitySampler": "locality",
         **dict.fromkeys(_HDF5_NAMES, "hdf5"), **dict.fromkeys(_BATCH_NAMES, "batch"),
         **dict.fromkeys(_TORCH_BATCH_NAMES, "torch_batch"),
         "Record": "_record", "tar_members": "tar", "fixed_records": "fixed",
         "npy_records": "npy", "iter_tfrecord": "tfrecord", "read_tfrecord_at": "tfrecord",
         "tfrecord_records": "tfrecord", "write_tfrecord": "tfrecord",
         "lmdb_data_path": "lmdb_pages", "lmdb_ranges_for_keys": "lmdb_pages",
         "lmdb_records": "lmdb_pages", "range_manifest_lines": "records",
         "register_records": "records"}


def __getattr__(name: str) -> object:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'clairfs' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
