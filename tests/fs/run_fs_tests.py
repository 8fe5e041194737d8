#!/usr/bin/env python3
"""clairfs real-mount test suite.

Usage: CLAIRFS_BIN=/abs/build/daemon/clairfs python3 tests/fs/run_fs_tests.py [FILTER...]

FILTERs select tests like unittest's -k (substring of module.Class.method, or a glob).
Exit status: 0 all passed, 1 a failure, 77 skipped (no usable /dev/fuse or fusermount3, or
every selected test skipped itself).
"""
import os
import shutil
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

# Every test_*.py beside this file, so that a new module cannot be forgotten.
MODULES = sorted(f[:-3] for f in os.listdir(HERE) if f.startswith("test_") and f.endswith(".py"))


def skip_reason():
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as e:
        return f"/dev/fuse cannot be opened: {e}"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not on PATH"
    return None


class LogPrintingResult(unittest.TextTestResult):
    """Prints the daemon logs of a test that failed, once all its cleanups have run."""

    def startTest(self, test):
        self._failed_before = len(self.failures) + len(self.errors)
        self._started = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        self.stream.write(f"  ({time.monotonic() - self._started:.1f}s)\n")
        logs = harness.LOGS.pop(test.id(), [])
        if len(self.failures) + len(self.errors) > self._failed_before:
            for name, text in logs:
                self.stream.write(f"\n----- {test.id()}: {name} -----\n{text}\n")
            self.stream.flush()


def main(argv, modules=None, label="fs"):
    """Runs modules (default MODULES), prints "<label>: N passed, N failed, N skipped"."""
    modules = modules or MODULES
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
    suite = unittest.TestSuite(loader.loadTestsFromName(m) for m in modules)
    if suite.countTestCases() == 0:
        print(f"no test matches {argv}")
        return 1
    start = time.monotonic()
    runner = unittest.TextTestRunner(verbosity=2, resultclass=LogPrintingResult)
    result = runner.run(suite)
    harness.cleanup_all()
    leftover = harness.fuse_mounts()
    mine = [m for m, _, _ in leftover if "/" + harness.RUN_PREFIX in m]
    mine += [c for c, main in harness.control_mounts() if "/" + harness.RUN_PREFIX in main]
    if mine:
        print(f"FAIL: mounts left behind: {mine}")
        return 1
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    print(f"{label} suite: {time.monotonic() - start:.1f}s")
    print(f"{label}: {result.testsRun - failed - skipped} passed, {failed} failed, "
          f"{skipped} skipped")
    if result.wasSuccessful() and skipped and result.testsRun <= skipped:
        return 77  # every selected test skipped (their reasons are printed above)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
