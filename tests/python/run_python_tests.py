#!/usr/bin/env python3
"""Tests of the clairfs Python package (tools/python/clairfs) on real mounts.

Usage: CLAIRFS_BIN=/abs/build/tools/clairfs /usr/bin/python3 tests/python/run_python_tests.py [FILTER...]

Mounts, daemons and temp dirs are managed by tests/fs/harness.py, so nothing outlives the run.
The torch tests are skipped when torch or torchvision cannot be imported (tools/setup.sh
--with-tests installs Debian's python3-torch and python3-torchvision).
Exit status: 0 all passed, 1 a failure, 77 skipped (no usable /dev/fuse or fusermount3).
Ends with the line "python: N passed, N failed, N skipped".
"""
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # in the Python processes the tests start too

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "tests", "fs"), os.path.join(REPO, "tools", "python")]

import harness  # noqa: E402
from run_fs_tests import LogPrintingResult, skip_reason  # noqa: E402

MODULES = ["test_control", "test_torch"]


def main(argv):
    reason = skip_reason()
    if reason:
        print(f"SKIP: {reason}")
        return 77
    if not (os.path.isfile(harness.BIN) and os.access(harness.BIN, os.X_OK)):
        print(f"FAIL: clairfs binary not found or not executable: {harness.BIN!r} "
              f"(set CLAIRFS_BIN)")
        return 1
    harness.BIN = os.path.abspath(harness.BIN)
    harness.install_handlers()
    loader = unittest.TestLoader()
    if argv:
        loader.testNamePatterns = [p if "*" in p else f"*{p}*" for p in argv]
    suite = unittest.TestSuite(loader.loadTestsFromName(m) for m in MODULES)
    if suite.countTestCases() == 0:
        print(f"no test matches {argv}")
        return 1
    start = time.monotonic()
    result = unittest.TextTestRunner(verbosity=2, resultclass=LogPrintingResult).run(suite)
    harness.cleanup_all()
    mine = [m for m, _, _ in harness.fuse_mounts() if "/clairfs-fs-" in m]
    if mine:
        print(f"FAIL: mounts left behind: {mine}")
        return 1
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    print(f"python suite: {time.monotonic() - start:.1f}s")
    print(f"python: {result.testsRun - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
