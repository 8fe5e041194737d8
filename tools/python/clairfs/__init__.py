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

docs/pytorch.md has a worked example; docs/control-interface.md the contract underneath.
clairfs.__version__ is the package's version, the same as the daemon's (`clairfs --version`).
"""
from typing import TYPE_CHECKING

from ._version import __version__
from .control import (ManifestError, check_stream_name, control_path, default_stream_name, errors,
                      manifest_line, plan, register_paths, relative_path, stats, unregister,
                      write_compact_manifest, write_manifest)

_TORCH_NAMES = ("LocalitySampler", "ResumeSampler", "dataset_paths", "loader_orders", "register_dataset",
                "register_loader", "sampler_orders")
_RECORDS_NAMES = ("Record", "fixed_records", "iter_tfrecord", "lmdb_data_path",
                  "lmdb_ranges_for_keys", "lmdb_records", "npy_records", "range_manifest_lines",
                  "read_tfrecord_at", "register_records", "tar_members", "tfrecord_records",
                  "write_tfrecord")
_HDF5_NAMES = ("HDF5Layout", "hdf5_layout", "hdf5_metadata_ranges", "hdf5_ranges_for_indices",
               "hdf5_records", "register_hdf5")

__all__ = ["ManifestError", "check_stream_name", "control_path", "default_stream_name", "errors",
           "manifest_line", "plan", "register_paths", "relative_path", "stats", "unregister",
           "write_compact_manifest", "write_manifest", *_RECORDS_NAMES, *_HDF5_NAMES, *_TORCH_NAMES]

if TYPE_CHECKING:  # what __getattr__ returns, for type checkers (nothing imported at run time)
    from .records import (Record, fixed_records, iter_tfrecord, lmdb_data_path,
                          lmdb_ranges_for_keys, lmdb_records, npy_records, range_manifest_lines,
                          read_tfrecord_at, register_records, tar_members, tfrecord_records,
                          write_tfrecord)
    from .hdf5 import (HDF5Layout, hdf5_layout, hdf5_metadata_ranges, hdf5_ranges_for_indices,
                       hdf5_records, register_hdf5)
    from .locality import LocalitySampler
    from .torch_order import (ResumeSampler, dataset_paths, loader_orders, register_dataset,
                              register_loader, sampler_orders)


def __getattr__(name: str) -> object:
    # Lazy: importing torch takes seconds and a job listing paths by itself does not need it.
    if name == "LocalitySampler":
        from . import locality
        return locality.LocalitySampler
    if name in _TORCH_NAMES:
        from . import torch_order
        return getattr(torch_order, name)
    if name in _RECORDS_NAMES:
        # Lazy too: a job registering whole files needs neither tarfile nor mmap.
        from . import records
        return getattr(records, name)
    if name in _HDF5_NAMES:
        # clairfs.hdf5 itself imports h5py only when a function of it runs.
        from . import hdf5
        return getattr(hdf5, name)
    raise AttributeError(f"module 'clairfs' has no attribute {name!r}")
