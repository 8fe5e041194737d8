#!/usr/bin/env python3
"""clairfs MPI test suite: several daemons under mpiexec on one machine, real mounts.

Usage: CLAIRFS_BIN=/abs/build/daemon/clairfs python3 tests/mpi/run_mpi_tests.py [FILTER...]
Exit status: 0 all passed, 1 a failure, 77 skipped (no /dev/fuse, or no mpiexec).
Uses the real-mount harness of tests/fs; prints "mpi: N passed, N failed, N skipped".
"""
import os
import shutil
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fs"))

import run_fs_tests  # noqa: E402

# test_netns_cluster: the same daemons in network namespaces, MPI over TCP between them (root,
# ip, tc and nsenter; it skips itself without them).
MODULES = ["test_cluster", "test_cluster_key", "test_netns_cluster"]

if __name__ == "__main__":
    if shutil.which("mpiexec") is None:
        print("SKIP: mpiexec is not on PATH")
        sys.exit(77)
    sys.exit(run_fs_tests.main(sys.argv[1:], modules=MODULES, label="mpi"))
