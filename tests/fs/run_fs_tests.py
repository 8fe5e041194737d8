#!/usr/bin/env python3
"""clairfs real-mount test suite.

Usage: CLAIRFS_BIN=/abs/build/daemon/clairfs python3 tests/fs/run_fs_tests.py [FILTER...]

FILTERs select tests like unittest's -k (substring of module.Class.method, or a glob).
Exit status: 0 all passed, 1 a failure, 77 skipped (no usable /dev/fuse or fusermount3, or
every selected test skipped itself).

Without FILTERs the modules run in two processes at once (CLAIRFS_FS_JOBS=1: one): most of a
real-mount test's time is waiting on mounts, daemons and deadlines. The modules that change
or assert what the whole machine's page cache or memory cgroups hold (SHARED_STATE) all run in
the first process, one after the other; every other module in the second. Each process's
output is printed whole once both ended, then the sum of their counts. The Python suite
(tests/python/run_python_tests.py) runs the same way.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

# Every test_*.py beside this file, so that a new module cannot be forgotten.
MODULES = sorted(f[:-3] for f in os.listdir(HERE) if f.startswith("test_") and f.endswith(".py"))

# Modules that drop the page cache (drop_caches), use memory cgroups, or assert that the kernel
# holds names, attributes or pages (a drop made by another module at the same time would fail
# them: test_freshness counts what the sweep told the kernel to forget, and a drop_caches beside
# it made the kernel forget first): never run beside each other.
SHARED_STATE = {"test_cgroup_memory", "test_fresh_epoch", "test_freshness", "test_job_streams",
                "test_no_open", "test_rewrite", "test_signals", "test_warnings"}


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


def run_split(modules, label, shared):
    """Runs modules in two child processes (those in shared in the first), each one the
    running script again (sys.argv[0], with --modules), prints each one's output and the
    summed "<label>: N passed, N failed, N skipped"; returns the exit status."""
    shards = [[m for m in modules if m in shared],
              [m for m in modules if m not in shared]]
    shards = [shard for shard in shards if shard]
    env = dict(os.environ, CLAIRFS_FS_JOBS="1")
    start = time.monotonic()
    children = []
    for i, shard in enumerate(shards):
        out = tempfile.TemporaryFile(mode="w+")
        cmd = [sys.executable, os.path.abspath(sys.argv[0]), "--modules", ",".join(shard)]
        children.append((subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env), out))
    statuses, counts = [], [0, 0, 0]
    for i, (child, out) in enumerate(children):
        statuses.append(child.wait())
        out.seek(0)
        text = out.read()
        print(f"===== {label} process {i + 1} of {len(children)}: {', '.join(shards[i])}")
        print(text, end="" if text.endswith("\n") else "\n")
        m = re.search(rf"^{label}: (\d+) passed, (\d+) failed, (\d+) skipped$", text, re.M)
        if m:
            counts = [a + int(b) for a, b in zip(counts, m.groups())]
        elif statuses[-1] != 77:
            counts[1] += 1  # ended before its count: a crash or a refusal, printed above
    print(f"{label} suite: {time.monotonic() - start:.1f}s (two processes)")
    print(f"{label}: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped")
    if any(s not in (0, 77) for s in statuses) or counts[1]:
        return 1
    return 77 if all(s == 77 for s in statuses) else 0


def main(argv, modules=None, label="fs", split=False, shared=SHARED_STATE):
    """Runs modules (default MODULES), prints "<label>: N passed, N failed, N skipped".
    split: without FILTERs, in two processes (run_split), the modules in shared in the
    first."""
    modules = modules or MODULES
    if argv[:1] == ["--modules"]:  # one process of run_split
        modules, argv = [m for m in argv[1].split(",") if m], argv[2:]
    elif split and not argv and os.environ.get("CLAIRFS_FS_JOBS", "2") != "1":
        return run_split(modules, label, shared)
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
    sys.exit(main(sys.argv[1:], split=True))
