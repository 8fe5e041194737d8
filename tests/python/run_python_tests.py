#!/usr/bin/env python3
"""Tests of the clairfs Python package (python/clairfs) on real mounts.

Usage: CLAIRFS_BIN=/abs/build/daemon/clairfs /usr/bin/python3 tests/python/run_python_tests.py [FILTER...]

Mounts, daemons and temp dirs are managed by tests/fs/harness.py, so nothing outlives the run.
The torch tests are skipped when torch or torchvision cannot be imported, the LMDB and .npy
ones of test_records (which needs no mount) when lmdb or numpy cannot (tools/setup.sh
--with-tests installs Debian's python3-torch, python3-torchvision, python3-lmdb, python3-numpy).
test_hdf5 checks clairfs.hdf5 against h5py without a mount, then reads registered datasets
with h5py through real mounts; skipped without python3-h5py.
test_compact and test_orders need no mount (the compact encoder against a decoder written in
the test; the orders computed with tensor ops against torch's own iteration). test_streams
runs several processes (DistributedSampler ranks, jobs) as streams of one mount. test_resume
(no mount) resumes jobs part-way through an epoch against the same jobs run through.
test_imports (no mount) checks the package's modules import each other without a cycle.
test_batch_client reads through the batch path (clairfs.batch, clairfs.torch_batch) of a
real daemon: bytes, ranges, errors, windows, fork, DataLoader workers, the fallback.
test_packaging pip-installs python/ into fresh venvs offline (skipped without
python3-venv, python3-pip, python3-setuptools, python3-wheel).
Exit status: 0 all passed, 1 a failure, 77 skipped (no usable /dev/fuse or fusermount3).
Ends with the line "python: N passed, N failed, N skipped".
"""
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # in the Python processes the tests start too

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "tests", "fs"), os.path.join(REPO, "python")]

import run_fs_tests  # noqa: E402

MODULES = ["test_control", "test_cli", "test_serve_metrics", "test_cache_admin", "test_torch",
           "test_records", "test_hdf5", "test_compact", "test_orders", "test_locality",
           "test_streams", "test_resume", "test_packaging", "test_imports", "test_predict",
           "test_loaders", "test_batch_client"]

# Modules that assert what the page cache holds (run_fs_tests.SHARED_STATE): one after the
# other, in the first of the suite's two processes. test_packaging (two venvs and pip
# installs, about 30 s) goes there too, so that both processes take about as long.
SHARED_STATE = {"test_predict", "test_serve_metrics", "test_torch", "test_packaging"}

if __name__ == "__main__":
    sys.exit(run_fs_tests.main(sys.argv[1:], modules=MODULES, label="python", split=True,
                               shared=SHARED_STATE))
