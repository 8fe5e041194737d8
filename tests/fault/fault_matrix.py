#!/usr/bin/env python3
"""The clairfs fault matrix: one injected fault per row, on real mounts, under readers that
check every byte (docs/reliability.md).

Usage: CLAIRFS_BIN=build/tools/clairfs FAULTFS_BIN=build/tests/faultfs \
           python3 tests/fault/fault_matrix.py [--quick] [--only ROW[,ROW]] [--out DIR]

Each row mounts clairfs over a small generated dataset (for the backend faults, over a
faultfs mount of it: tests/fault/faultfs.cc), registers a plan, keeps reader processes reading
and comparing every byte with the original, injects its fault, and reports:
  hung     reads that got no answer within the hang deadline (goal 0)
  wrong    reads that returned bytes other than the file's current (or, during a change, its
           previous) version, and reads the caller's permissions forbid (goal 0)
  alive    the daemon still serves after the fault (where it should)
  logged   the daemon's warning/error lines
  goals    row-specific: no errors on files the fault does not touch, reads right again
           once the fault is removed, the daemon stops within STOP_GRACE s of SIGTERM.
Writes DIR/fault-matrix.md and DIR/fault-matrix.json. Exit status 1 when a row misses a goal
and is not listed in EXPECTED_FAIL, 77 when FUSE is unusable, else 0.
"""
import argparse
import atexit
import errno
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
import zlib

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fs"))

import harness  # noqa: E402
from run_fs_tests import skip_reason  # noqa: E402

REPO = harness.REPO
# Child processes (readers, also as another user) run Debian's interpreter when it exists.
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
FAULTFS = os.environ.get("FAULTFS_BIN") or os.path.join(REPO, "build", "tests", "faultfs")

# Rows that miss a goal on the base commit, each with the item of issue 14 whose fix it waits
# for. A listed row that fails is reported "xfail" and does not fail the run; a listed row that
# passes is reported "XPASS": remove its entry once the fix is merged.
EXPECTED_FAIL = {
    "backend_enotconn": "item 9: a dead backend fails cached files too, unlogged",
    "stall_cached": "item 9: a stalled backend hangs readers of cached files; item 12: stop",
    "stall_uncached": "item 9: no deadline on backing reads; item 12: stop with stuck I/O",
    "ssd_full": "item 10: a full SSD cache file system aborts the daemon (RocksDB)",
    "swap_fifo": "item 8: a FIFO swapped in for a planned file hangs its readers",
    "inode_reuse": "item 1: a reused inode number is served from the old node's path",
    "acl_deny": "item 4: ACLs that deny a user are ignored on a root mount",
}

NOBODY = 65534
STOP_GRACE = 10.0        # seconds a daemon may take to exit after SIGTERM
REVOKE_WINDOW = 5.0      # seconds after chmod/setfacl within which a read must be refused
LOG_RE = re.compile(r"\[(warn|warning|error|critical)\]|assert|terminate called|abort|"
                    r"segmentation|sanitizer|faultfs: '", re.I)

PARAMS = {
    "quick": dict(files=96, lo=8 << 10, hi=24 << 10, run=1.5, hang=10.0, kills=3, readers=2),
    "full": dict(files=800, lo=16 << 10, hi=96 << 10, run=5.0, hang=30.0, kills=10, readers=3),
}

# ------------------------------------------------------------------------------- the reader

def reader_main(spec_path):
    """A reader process: reads spec["paths"] in passes until the stop file exists (at least
    spec["passes"] passes), one JSON line per read: {"p": path, "r": "ok"|"wrong"|errno}.
    Prints {"b": path} before each read so the parent can tell a hung read."""
    with open(spec_path) as f:
        spec = json.load(f)
    rng = random.Random(spec.get("seed", 0))
    paths = list(spec["paths"])
    passes = 0
    out = sys.stdout
    while True:
        if passes >= spec["passes"] and (not spec["stop"] or os.path.exists(spec["stop"])):
            break
        if spec.get("shuffle", True):
            rng.shuffle(paths)
        for rel in paths:
            out.write(json.dumps({"b": rel}) + "\n")
            out.flush()
            try:
                with open(os.path.join(spec["mount"], rel), "rb") as fh:
                    data = fh.read()
                digest = hashlib.sha256(data).hexdigest()
                r = "ok" if digest in spec["expect"][rel] else "wrong"
                if r == "wrong" and digest in spec.get("other", {}):
                    r = "wrong:" + spec["other"][digest]
            except OSError as e:
                r = e.errno or -1
            out.write(json.dumps({"p": rel, "r": r}) + "\n")
            out.flush()
            if spec["stop"] and os.path.exists(spec["stop"]) and passes + 1 >= spec["passes"]:
                break
        passes += 1
    return 0


def sha(data):
    return hashlib.sha256(data).hexdigest()


class Readers:
    """Reader processes over one mount; collects per-read outcomes and tells hung reads."""

    def __init__(self, ctx, mount, expect, paths=None, n=None, passes=1, until_stopped=True,
                 uid=None, other=None, tag="r"):
        self.ctx, self.mount = ctx, mount
        self.procs, self.threads = [], []
        self.lock = threading.Lock()
        self.results = []          # (path, outcome)
        self.pending = {}          # proc index -> (path, start time)
        self.stop_file = os.path.join(ctx.work, f"stop-{tag}-{time.monotonic_ns()}")
        n = n or ctx.p["readers"]
        paths = sorted(paths if paths is not None else expect)
        for i in range(n):
            spec = {"mount": mount, "paths": paths, "passes": passes, "seed": i,
                    "stop": self.stop_file if until_stopped else "",
                    "expect": {p: sorted(expect[p]) for p in paths}, "other": other or {}}
            spec_path = os.path.join(ctx.work, f"spec-{tag}-{i}-{time.monotonic_ns()}.json")
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            argv = [PY, os.path.abspath(__file__), "--reader", spec_path]
            if uid is not None:
                argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] + argv
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, start_new_session=True, text=True)
            harness.register_proc(p)
            self.procs.append(p)
            t = threading.Thread(target=self._collect, args=(i, p), daemon=True)
            t.start()
            self.threads.append(t)

    def _collect(self, i, p):
        for line in p.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                if "b" in msg:
                    self.pending[i] = (msg["b"], time.monotonic())
                else:
                    self.pending.pop(i, None)
                    self.results.append((msg["p"], msg["r"]))

    def stop(self):
        """Asks the readers to finish their pass; waits at most the hang deadline for any
        read in flight. Returns the outcomes and the reads still in flight (hung)."""
        with open(self.stop_file, "w"):
            pass
        hung = []
        for i, p in enumerate(self.procs):
            while p.poll() is None:
                with self.lock:
                    started = self.pending.get(i)
                if started and time.monotonic() - started[1] > self.ctx.p["hang"]:
                    hung.append(started[0])
                    break
                time.sleep(0.05)
        for p in self.procs:
            if p.poll() is None:
                p.kill()   # killable unless its request is held by a daemon; teardown ends it
        for t in self.threads:
            t.join(timeout=2)
        with self.lock:
            return list(self.results), hung

    def wait(self):
        """For readers without a stop file: waits until they end or a read hangs."""
        while any(p.poll() is None for p in self.procs):
            with self.lock:
                now = time.monotonic()
                if any(now - s > self.ctx.p["hang"] for _, s in self.pending.values()):
                    break
            time.sleep(0.05)
        return self.stop()


# ------------------------------------------------------------------------------- the rows

class Row:
    """The measurements of one row; a goal is met when its value is true."""

    def __init__(self, name, injects):
        self.name, self.injects = name, injects
        self.hung = 0
        self.wrong = 0
        self.wrong_examples = []
        self.errors = {}            # errno name -> count, every read
        self.collateral = 0         # errors on reads the fault should not touch
        self.alive = None
        self.logged = []
        self.goals = {}
        self.notes = []

    def add(self, results, hung, touched=(), strict=False, widened=False):
        """Counts reader outcomes. touched: paths the fault may fail; strict: every error
        counts as collateral; widened: a successful read is an access the caller lacks."""
        self.hung += len(hung)
        for rel, r in results:
            if isinstance(r, int):
                name = errno.errorcode.get(r, str(r))
                self.errors[name] = self.errors.get(name, 0) + 1
                if strict or rel not in touched:
                    self.collateral += 1
            elif r != "ok" or widened:
                self.wrong += 1
                if len(self.wrong_examples) < 5:
                    what = "read allowed" if widened and r == "ok" else r
                    self.wrong_examples.append(f"{rel}: {what}")

    def passed(self):
        return self.hung == 0 and self.wrong == 0 and all(self.goals.values())

    def to_json(self):
        d = dict(self.__dict__)
        d["pass"] = self.passed()
        return d


class Ctx:
    """Per-row workspace: temp dirs, the dataset, faultfs and clairfs processes, teardown."""

    def __init__(self, params, row, on_ext4=False):
        self.p, self.row = params, row
        self.work = make_tmpdir("fault", on_ext4=False)
        os.chmod(self.work, 0o755)
        self.data_root = make_tmpdir("data", on_ext4) if on_ext4 else self.work
        os.chmod(self.data_root, 0o755)
        self.ds = os.path.join(self.data_root, "ds")
        self.files = make_dataset(self.ds, params, seed=zlib.crc32(row.name.encode()))
        self.expect = {rel: {sha(b)} for rel, b in self.files.items()}
        self.owner = {sha(b): rel for rel, b in self.files.items()}  # "another file's bytes"
        self.daemons, self.faultfs, self.tmpfs, self.reader_sets = [], [], [], []
        self.logs = []

    # -- processes
    def start_faultfs(self, mnt=None):
        mnt = mnt or os.path.join(self.work, "backend")
        os.makedirs(mnt, exist_ok=True)
        self.rules = os.path.join(self.work, "rules")
        self.set_rules("")
        log = os.path.join(self.work, f"faultfs-{len(self.faultfs)}.log")
        with open(log, "wb") as lf:
            p = subprocess.Popen([FAULTFS, "-f", f"--rules={self.rules}", "-o",
                                  "max_threads=64,fsname=faultfs", self.ds, mnt],
                                 stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        harness.register_proc(p)
        harness.register_mount(mnt)
        self.faultfs.append((p, mnt, log))
        wait_for(lambda: harness.is_fuse_mounted(mnt) or p.poll() is not None, 10, "faultfs")
        if p.poll() is not None:
            raise RuntimeError(f"faultfs exited: {harness.read_tail(log)}")
        return mnt

    def set_rules(self, text):
        """Installs faultfs rules and waits until faultfs applied them."""
        tmp = self.rules + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.rules)
        if self.faultfs and self.faultfs[-1][0].poll() is None:
            wait_for(lambda: read_text(self.rules + ".applied") == text, 5, "faultfs rules")

    def config(self, ram="64MiB", ssd=None, ssd_dir=None, keep_cache=False, **extra):
        cfg = harness.config(ram=ram, staging="2MiB", keep_cache=keep_cache)
        cfg["cache"]["fetch_timeout"] = 3
        if ssd:
            cfg["cache"]["tiers"].append({"kind": "ssd", "capacity": ssd, "threads": 2,
                                          "dir": ssd_dir})
        cfg.update(extra)
        return cfg

    def mount(self, dataset, mnt=None, cfg=None, over_stale=False):
        mnt = mnt or os.path.join(self.work, "mnt")
        os.makedirs(mnt, exist_ok=True)
        cfg_path = harness.write_config(
            os.path.join(self.work, f"cfg-{len(self.daemons)}.yaml"), cfg or self.config())
        d = harness.Daemon(self.row.name, self.work, dataset, mnt, cfg_path)
        self.daemons.append(d)
        if not over_stale:
            d.start()
            return d
        # A killed daemon left its mount behind: the new one detaches it by itself.
        with open(d.log_path, "wb") as log:
            d.proc = subprocess.Popen(d.argv, stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        harness.register_proc(d.proc)
        harness.register_mount(mnt)

        def live():
            if d.proc.poll() is not None:
                return True
            try:
                return harness.is_fuse_mounted(mnt) and os.path.isdir(
                    os.path.join(mnt, ".clairfs")) and os.statvfs(mnt) is not None
            except OSError:
                return False
        wait_for(live, 15, "clairfs over a stale mount")
        if d.proc.poll() is not None:
            raise RuntimeError(f"clairfs exited {d.proc.returncode}: "
                               f"{harness.read_tail(d.log_path)}")
        return d

    def readers(self, mount, **kw):
        r = Readers(self, mount, kw.pop("expect", self.expect), other=self.owner, **kw)
        self.reader_sets.append(r)
        return r

    def verify(self, mount, expect=None, uid=None, paths=None):
        """One strict pass by one reader: returns (results, hung)."""
        r = self.readers(mount, expect=expect or self.expect, paths=paths, n=1,
                         until_stopped=False, uid=uid, tag="v")
        return r.wait()

    # -- measurements
    def alive(self, d):
        """The daemon runs and serves .clairfs/stats (which needs no backend) within the hang
        deadline."""
        if d.proc is None or d.proc.poll() is not None:
            return False
        p = subprocess.Popen([PY, "-c", "import sys; open(sys.argv[1]).read()",
                              os.path.join(d.mountpoint, ".clairfs", "stats")],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            return p.wait(timeout=self.p["hang"]) == 0
        except subprocess.TimeoutExpired:
            p.kill()
            return False

    def stops(self, d):
        """SIGTERM; true when the daemon exits within STOP_GRACE (the fault still active)."""
        if d.proc is None or d.proc.poll() is not None:
            return d.proc is not None
        d.proc.send_signal(signal.SIGTERM)
        try:
            d.proc.wait(timeout=STOP_GRACE)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stats(self, mnt):
        p = subprocess.run([PY, "-c", "import sys;print(open(sys.argv[1]).read())",
                            os.path.join(mnt, ".clairfs", "stats")], capture_output=True,
                           text=True, timeout=self.p["hang"])
        return json.loads(p.stdout) if p.returncode == 0 else {}

    def wait_prefetched(self, mnt, files, limit=20):
        """Until the prefetch fetched `files` files or stopped progressing for 1.5 s."""
        deadline, last, since = time.monotonic() + limit, -1, time.monotonic()
        while time.monotonic() < deadline:
            n = self.stats(mnt).get("prefetch", {}).get("fetched_files", 0)
            if n >= files:
                return n
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since > 1.5:
                return n
            time.sleep(0.05)
        return last

    def collect_logs(self):
        for d in self.daemons:
            text = read_text(d.log_path) or ""
            for line in text.splitlines():
                if LOG_RE.search(line) and "faultfs" not in line:
                    self.row.logged.append(line.strip()[:300])
        for _, _, log in self.faultfs:
            for line in (read_text(log) or "").splitlines()[:3]:
                if LOG_RE.search(line):
                    self.row.notes.append("faultfs: " + line.strip()[:200])
        self.row.logged = dedupe(self.row.logged)[:20]

    # -- teardown: readers, faults released, daemons, backends, tmpfs; each with a deadline
    def close(self):
        for r in self.reader_sets:
            for p in r.procs:
                if p.poll() is None:
                    p.kill()
        for p, _, _ in self.faultfs:
            if p.poll() is None:
                try:
                    self.set_rules("")
                except Exception:  # noqa: BLE001 - teardown goes on
                    pass
        for d in self.daemons:
            if getattr(d, "own_stop", False):
                d.stop()
            elif d.proc is not None:
                if d.proc.poll() is None:
                    d.proc.send_signal(signal.SIGTERM)
                    try:
                        d.proc.wait(timeout=STOP_GRACE)
                    except subprocess.TimeoutExpired:
                        d.proc.kill()
                d.stop()
        for p, mnt, _ in self.faultfs:
            harness.release_mount(mnt)
            if p.poll() is None:
                p.kill()
            harness.release_proc(p, grace=5)
        for r in self.reader_sets:
            for p in r.procs:
                harness.release_proc(p, grace=5)
        for m in self.tmpfs:
            umount_tmpfs(m)
        self.collect_logs()


def wait_for(cond, limit, what):
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {limit}s waiting for {what}")
        time.sleep(0.02)


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def dedupe(lines):
    seen, out = set(), []
    for line in lines:
        key = re.sub(r"^(\[[^]]*\]\s*)+", "", line)
        if key not in seen:
            seen.add(key)
            out.append(line)
    return out


def make_tmpdir(tag, on_ext4=False):
    """A registered temp dir: tmpfs by default, ext4 (/var/tmp) where inode numbers get reused."""
    if not on_ext4:
        return harness.make_tmpdir(tag)
    d = tempfile.mkdtemp(prefix=f"clairfs-fs-{tag}-", dir="/var/tmp")
    with harness._lock:
        harness._tmpdirs.append(d)
    return d


_tmpfs_mounts = []


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", path],
                   check=True, timeout=20)
    _tmpfs_mounts.append(path)
    return path


def umount_tmpfs(path):
    if path not in _tmpfs_mounts:
        return
    for argv in (["umount", path], ["umount", "-l", path]):
        try:
            if subprocess.run(argv, timeout=20, stderr=subprocess.DEVNULL).returncode == 0:
                break
        except subprocess.TimeoutExpired:
            continue
    _tmpfs_mounts.remove(path)


def make_dataset(ds, p, seed):
    rng = random.Random(seed)
    files = {}
    for i in range(p["files"]):
        rel = f"c{i % 8}/f{i:04d}.bin"
        files[rel] = rng.randbytes(rng.randint(p["lo"], p["hi"]))
        os.makedirs(os.path.join(ds, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(ds, rel), "wb") as f:
            f.write(files[rel])
    for d in [ds] + [os.path.join(ds, f"c{i}") for i in range(8)]:
        os.chmod(d, 0o755)
    return files


def manifest(paths, epochs=2, seed=1):
    rng, names, text = random.Random(seed), sorted(paths), ""
    for _ in range(epochs):
        rng.shuffle(names)
        text += "#epoch\n" + "\n".join(names) + "\n"
    return text


def register(mnt, paths, epochs=2, row=None):
    """Writes the manifest through a child process, so a hung mount cannot hold the driver.
    A failure is noted in row (the fault may have taken the daemon) or, without one, raised."""
    code = ("import os,sys\nfd=os.open(sys.argv[1],os.O_WRONLY|os.O_TRUNC)\n"
            "os.write(fd,sys.stdin.buffer.read())\nos.close(fd)")
    p = subprocess.run([PY, "-c", code, os.path.join(mnt, ".clairfs", "manifest")],
                       input=manifest(paths, epochs).encode(), capture_output=True, timeout=30)
    if p.returncode != 0:
        err = (p.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
        if row is None:
            raise RuntimeError(f"registering the plan failed: {err}")
        row.notes.append(f"registering the plan failed: {err}")


def touched_by(files, glob_prefix):
    return {rel for rel in files if rel.startswith(glob_prefix)}


# Each row: fn(ctx) measures into ctx.row. A row that raises is recorded with goal "ran" false.

def backend_row(ctx, ram="64MiB"):
    """clairfs over a faultfs mount of the dataset, every file planned."""
    backend = ctx.start_faultfs()
    d = ctx.mount(backend, cfg=ctx.config(ram=ram))
    return backend, d


def row_backing_eio(ctx):
    r = ctx.row
    backend, d = backend_row(ctx)
    bad = touched_by(ctx.files, "c1/")
    ctx.set_rules("open,read c1/* eio\n")
    register(d.mountpoint, ctx.files)
    rs = ctx.readers(d.mountpoint)
    time.sleep(ctx.p["run"])  # the readers run under the fault for this long
    r.add(*rs.stop(), touched=bad)
    r.goals["failed files fail, others read"] = r.errors.get("EIO", 0) > 0 or not bad
    r.goals["alive"] = r.alive = ctx.alive(d)
    ctx.set_rules("")
    res, hung = ctx.verify(d.mountpoint)
    before = r.collateral
    r.add(res, hung, strict=True)
    r.goals["right after the fault ends"] = r.collateral == before
    r.goals["no collateral errors"] = before == 0
    r.goals["logged"] = any("c1/" in line for line in read_log(d))
    r.goals["stops"] = ctx.stops(d)


def row_backend_enotconn(ctx):
    r = ctx.row
    backend, d = backend_row(ctx, ram="64MiB")
    half = sorted(ctx.files)[: len(ctx.files) // 2]
    register(d.mountpoint, half)   # half planned and cached, half read from the backend
    ctx.wait_prefetched(d.mountpoint, len(half))
    rs = ctx.readers(d.mountpoint)
    time.sleep(ctx.p["run"] / 3)
    fp = ctx.faultfs[-1][0]
    fp.kill()
    fp.wait(timeout=10)
    time.sleep(ctx.p["run"])
    r.add(*rs.stop(), touched=set(ctx.files) - set(half))
    r.goals["cached files still read"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["logged"] = bool(read_log(d, warn_only=True))
    # The backend comes back on the same path: report whether clairfs reads it again.
    harness.release_mount(backend)
    ctx.start_faultfs(backend)
    res, hung = ctx.verify(d.mountpoint)
    errs = sum(1 for _, x in res if isinstance(x, int))
    r.notes.append(f"after the backend was remounted: {errs} of {len(res)} reads failed")
    r.add(res, hung, touched=set(ctx.files))
    r.goals["stops"] = ctx.stops(d)


def stall_row(ctx, cached):
    r = ctx.row
    backend, d = backend_row(ctx, ram="64MiB")
    if cached:
        register(d.mountpoint, ctx.files)
        n = ctx.wait_prefetched(d.mountpoint, len(ctx.files))
        r.notes.append(f"{n} of {len(ctx.files)} files prefetched before the stall")
    ctx.set_rules("all * stall\n")
    rs = ctx.readers(d.mountpoint)
    time.sleep(ctx.p["run"])
    res, hung = rs.stop()
    r.add(res, hung, touched=set() if cached else set(ctx.files))
    if cached:
        r.goals["cached files read"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)   # with the backend still stalled
    if not cached:
        r.goals["logged"] = bool(read_log(d, warn_only=True))


def row_stall_cached(ctx):
    stall_row(ctx, cached=True)


def row_stall_uncached(ctx):
    stall_row(ctx, cached=False)


def row_slow_backend(ctx):
    """Every backend read takes 20 ms: slower, never wrong; the stall rule's timed form."""
    r = ctx.row
    backend, d = backend_row(ctx)
    ctx.set_rules("read * stall 20\n")
    register(d.mountpoint, ctx.files)
    rs = ctx.readers(d.mountpoint)
    time.sleep(ctx.p["run"])
    r.add(*rs.stop(), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def row_ssd_full(ctx):
    r = ctx.row
    fs = mount_tmpfs(os.path.join(ctx.work, "ssdfs"), "24m")
    ctx.tmpfs.append(fs)
    total = sum(len(b) for b in ctx.files.values())
    d = ctx.mount(ctx.ds, cfg=ctx.config(ram="256KiB", ssd="16MiB", ssd_dir=f"{fs}/db"))
    # Another user of the disk fills it.
    with open(os.path.join(fs, "ballast"), "wb") as f:
        try:
            while True:
                f.write(b"\0" * (256 << 10))
                f.flush()
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    register(d.mountpoint, ctx.files, row=r)
    rs = ctx.readers(d.mountpoint)
    time.sleep(ctx.p["run"])
    r.add(*rs.stop(), strict=True)
    r.notes.append(f"dataset {total >> 10} KiB; SSD tier 16 MiB on a full 24 MiB tmpfs")
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["logged"] = bool(read_log(d, warn_only=True))
    if r.alive:
        os.unlink(os.path.join(fs, "ballast"))
        r.add(*ctx.verify(d.mountpoint), strict=True)
        r.goals["right after space is freed"] = r.collateral == 0
    r.goals["stops"] = ctx.stops(d)


def swap_row(ctx, kind):
    r = ctx.row
    d = ctx.mount(ctx.ds)
    register(d.mountpoint, ctx.files)
    ctx.wait_prefetched(d.mountpoint, len(ctx.files))
    victim, other = sorted(ctx.files)[3], sorted(ctx.files)[4]
    # During the swap: the old bytes (a read begun before), an error, or what a native read
    # gives now. A FIFO read natively blocks: clairfs must refuse it instead.
    during = dict(ctx.expect)
    during[victim] = ctx.expect[victim] | (ctx.expect[other] if kind == "symlink" else set())
    rs = ctx.readers(d.mountpoint, expect=during)
    time.sleep(ctx.p["run"] / 3)
    path = os.path.join(ctx.ds, victim)
    tmp = path + ".swap"
    if kind == "fifo":
        os.mkfifo(tmp)
        os.rename(tmp, path)
    elif kind == "symlink":
        os.symlink(os.path.basename(other), tmp)   # same directory (c3/ and c4/ differ)
        os.symlink(os.path.join("..", other), tmp + "2")
        os.unlink(tmp)
        os.rename(tmp + "2", path)
    else:
        os.unlink(path)
        os.mkdir(path)
    time.sleep(ctx.p["run"])
    r.add(*rs.stop(), touched={victim})
    # After: the victim must not give its old bytes any more.
    after = dict(ctx.expect)
    after[victim] = ctx.expect[other] if kind == "symlink" else set()
    res, hung = ctx.verify(d.mountpoint, expect=after)
    r.add(res, hung, touched={victim})
    r.notes.append("victim after the swap: " + ", ".join(
        sorted({str(errno.errorcode.get(x, x)) if isinstance(x, int) else x
                for p, x in res if p == victim})))
    r.goals["no collateral errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def row_swap_fifo(ctx):
    swap_row(ctx, "fifo")


def row_swap_symlink(ctx):
    swap_row(ctx, "symlink")


def row_swap_dir(ctx):
    swap_row(ctx, "dir")


def rewrite(path, data, keep_inode):
    """Rewrites path with data of the same size and restores its mtime (and atime): in place
    (`cp -p` over an existing file, `touch -r`) or by rename (`rsync -a`, `tar x`)."""
    st = os.stat(path)
    if keep_inode:
        with open(path, "r+b") as f:
            f.write(data)
    else:
        tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.rename(tmp, path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def row_rewrite_same_size_mtime(ctx):
    r = ctx.row
    d = ctx.mount(ctx.ds)
    register(d.mountpoint, ctx.files)
    ctx.wait_prefetched(d.mountpoint, len(ctx.files))
    names = sorted(ctx.files)
    victims = {names[5]: True, names[6]: False, names[7]: True}  # path -> in place
    new = {rel: bytes(b ^ 0xA5 for b in ctx.files[rel]) for rel in victims}
    during = dict(ctx.expect)   # a read begun before the rewrite may give the old version
    for rel in victims:
        during[rel] = ctx.expect[rel] | {sha(new[rel])}
    rs = ctx.readers(d.mountpoint, expect=during)
    time.sleep(ctx.p["run"] / 3)
    for rel, in_place in victims.items():
        rewrite(os.path.join(ctx.ds, rel), new[rel], in_place)
    time.sleep(ctx.p["run"])
    res, hung = rs.stop()
    r.add(res, hung, strict=True)
    after = dict(ctx.expect)
    for rel in victims:
        after[rel] = {sha(new[rel])}
    r.add(*ctx.verify(d.mountpoint, expect=after), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)
    # Across a remount: the SSD tier must not serve the old version either.
    ssd = os.path.join(ctx.work, "ssd")
    cfg = ctx.config(ram="64KiB", ssd="64MiB", ssd_dir=ssd)
    d2 = ctx.mount(ctx.ds, mnt=os.path.join(ctx.work, "mnt2"), cfg=cfg)
    register(d2.mountpoint, ctx.files)
    ctx.wait_prefetched(d2.mountpoint, len(ctx.files))
    r.add(*ctx.verify(d2.mountpoint, expect=after), strict=True)
    d2.stop()
    newer = {}
    for rel, in_place in victims.items():
        newer[rel] = bytes(b ^ 0x3C for b in ctx.files[rel])
        rewrite(os.path.join(ctx.ds, rel), newer[rel], in_place)
    d3 = ctx.mount(ctx.ds, mnt=os.path.join(ctx.work, "mnt2"), cfg=cfg)
    register(d3.mountpoint, ctx.files)
    after3 = dict(ctx.expect)
    for rel in victims:
        after3[rel] = {sha(newer[rel])}
    r.add(*ctx.verify(d3.mountpoint, expect=after3), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["stops"] = r.goals["stops"] and ctx.stops(d3)


def row_inode_reuse(ctx):
    r = ctx.row
    d = ctx.mount(ctx.ds)
    victim = sorted(ctx.files)[8]
    vdir = os.path.join(ctx.ds, os.path.dirname(victim))
    path = os.path.join(ctx.ds, victim)
    # A lookup through the mount: the kernel keeps the victim's node (entry and attribute
    # timeouts), while nothing holds the file open, so its inode can be freed.
    res, hung = ctx.verify(d.mountpoint, paths=[victim])
    r.add(res, hung, strict=True)
    old_ino = os.stat(path).st_ino
    os.unlink(path)
    newcomer = None
    for i in range(5000):   # ext4 hands out the lowest free inode of the group
        cand = os.path.join(vdir, f"new{i}.bin")
        fd = os.open(cand, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        ino = os.fstat(fd).st_ino
        os.close(fd)
        if ino == old_ino:
            newcomer = cand
            break
    if newcomer is None:
        r.notes.append("the file system did not reuse the inode number: not reproduced")
        r.goals["reproduced"] = False
        return
    data = random.Random(7).randbytes(7777)
    with open(newcomer, "wb") as f:
        f.write(data)
    rel_new = os.path.relpath(newcomer, ctx.ds)
    # The victim's path comes back as another file.
    again = bytes(b ^ 0x77 for b in ctx.files[victim])
    with open(path, "wb") as f:
        f.write(again)
    r.notes.append(f"{rel_new} got inode {old_ino} of {victim}, whose node the kernel holds")
    expect = {rel_new: {sha(data)}, victim: {sha(again)}}
    other = dict(ctx.owner)
    other[sha(again)] = victim + " (new)"
    other[sha(ctx.files[victim])] = victim + " (old)"
    rs = Readers(ctx, d.mountpoint, expect, n=1, until_stopped=False, other=other, tag="v")
    ctx.reader_sets.append(rs)
    r.add(*rs.wait(), touched=set())
    rest = {k: v for k, v in ctx.expect.items() if k != victim}
    r.add(*ctx.verify(d.mountpoint, expect=rest), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def nobody_can_read(path):
    p = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                        PY, "-c", "import sys;open(sys.argv[1],'rb').read()", path],
                       capture_output=True, timeout=30)
    return p.returncode == 0


def revoke_row(ctx, revoke):
    """A file readable by another user (nobody) through the root mount stops being so."""
    r = ctx.row
    d = ctx.mount(ctx.ds)
    names = sorted(ctx.files)
    early, late = names[9], names[10]
    revoke(os.path.join(ctx.ds, early))   # before the mount saw the file
    if nobody_can_read(os.path.join(ctx.ds, early)):
        r.notes.append("the dataset's file system ignores the change: not reproduced")
        r.goals["reproduced"] = False
        return
    register(d.mountpoint, ctx.files)
    ctx.wait_prefetched(d.mountpoint, len(ctx.files))
    # nobody reads everything else, and is refused the revoked file.
    r.add(*ctx.verify(d.mountpoint, uid=NOBODY, paths=[p for p in names if p != early]),
          strict=True)
    res, hung = ctx.verify(d.mountpoint, uid=NOBODY, paths=[early])
    r.add(res, hung, touched={early}, widened=True)
    # A file nobody has just read is revoked: refused within REVOKE_WINDOW.
    r.add(*ctx.verify(d.mountpoint, uid=NOBODY, paths=[late]), strict=True)
    revoke(os.path.join(ctx.ds, late))
    t0, refused = time.monotonic(), False
    while time.monotonic() - t0 < REVOKE_WINDOW and not refused:
        res, hung = ctx.verify(d.mountpoint, uid=NOBODY, paths=[late])
        r.hung += len(hung)
        refused = bool(res) and all(isinstance(x, int) for _, x in res)
    if not refused:
        r.wrong += 1
        r.wrong_examples.append(f"{late}: still readable {REVOKE_WINDOW:.0f} s after revoking")
    else:
        r.notes.append(f"revocation took effect after {time.monotonic() - t0:.1f} s")
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def row_chmod_revoke(ctx):
    revoke_row(ctx, lambda p: os.chmod(p, 0o600))


def row_acl_deny(ctx):
    if shutil.which("setfacl") is None:
        ctx.row.notes.append("setfacl missing (Debian package acl)")
        ctx.row.goals["setfacl installed"] = False
        return
    revoke_row(ctx, lambda p: subprocess.run(["setfacl", "-m", f"u:{NOBODY}:---", p],
                                             check=True, timeout=10))


def daemon_pid(rank):
    """The pid of an MPI rank's serving clairfs: its parent is the rank's supervisor."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{ppid}/cmdline", "rb") as f:
                parent = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if f"PMI_RANK={rank}".encode() in env and harness.BIN.encode() in parent:
            return int(pid)
    return None


def row_peer_kill(ctx):
    r = ctx.row
    if shutil.which("mpiexec") is None:
        r.notes.append("mpiexec missing")
        r.goals["mpiexec installed"] = False
        return
    total = sum(len(b) for b in ctx.files.values())
    cfg = ctx.config(ram=str(total // 3), ssd=str(total // 3), ssd_dir=f"{ctx.work}/ssd{{rank}}")
    cfg["cluster"] = {"plan_timeout": 30, "peer_timeout": 2, "down_for": 60}
    cfg_path = harness.write_config(os.path.join(ctx.work, "cluster.yaml"), cfg)
    mounts = [os.path.join(ctx.work, f"mnt{i}") for i in range(2)]
    for m in mounts:
        os.makedirs(m)
    log = os.path.join(ctx.work, "mpiexec.log")
    with open(log, "wb") as lf:
        mpi = subprocess.Popen(["mpiexec", "-disable-auto-cleanup", "-n", "2", harness.BIN,
                                "-c", cfg_path, ctx.ds, os.path.join(ctx.work, "mnt{rank}")],
                               stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                               start_new_session=True)
    harness.register_proc(mpi)
    for m in mounts:
        harness.register_mount(m)

    def stop():
        """Unmounts; each rank then exits, mpiexec after them; the group is killed last."""
        for m in mounts:
            harness.release_mount(m)
        harness.release_proc(mpi, grace=25.0)
        try:
            os.killpg(mpi.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # What Ctx.close and collect_logs need of a daemon; own_stop: close() only calls stop().
    ctx.daemons.append(types.SimpleNamespace(proc=mpi, mountpoint=mounts[0], log_path=log,
                                             stop=stop, own_stop=True))
    wait_for(lambda: all(harness.is_fuse_mounted(m) for m in mounts) or mpi.poll() is not None,
             30, "the ranks' mounts")
    names = sorted(ctx.files)
    halves = [names[0::2], names[1::2]]
    for m, h in zip(mounts, halves):
        register(m, h)
    rs = [ctx.readers(m, expect={p: ctx.expect[p] for p in h}, tag=f"rank{i}")
          for i, (m, h) in enumerate(zip(mounts, halves))]
    time.sleep(ctx.p["run"] / 3)
    victim = daemon_pid(1)
    if victim is None:
        raise RuntimeError("no daemon for rank 1")
    os.kill(victim, signal.SIGKILL)
    time.sleep(ctx.p["run"])
    r.add(*rs[0].stop(), strict=True)
    res1, hung1 = rs[1].stop()
    r.add(res1, hung1, touched=set(halves[1]))
    r.goals["survivor reads without errors"] = r.collateral == 0
    r.goals["mpiexec still runs"] = mpi.poll() is None
    r.goals["alive"] = r.alive = ctx.alive(types.SimpleNamespace(proc=mpi, mountpoint=mounts[0]))


def row_daemon_kill9(ctx):
    r = ctx.row
    ssd = os.path.join(ctx.work, "ssd")
    cfg = ctx.config(ram="128KiB", ssd="64MiB", ssd_dir=ssd)
    mnt = os.path.join(ctx.work, "mnt")
    restarts = []
    for i in range(ctx.p["kills"]):
        t0 = time.monotonic()
        d = ctx.mount(ctx.ds, mnt=mnt, cfg=cfg, over_stale=i > 0)
        restarts.append(time.monotonic() - t0)
        register(mnt, ctx.files)
        rs = ctx.readers(mnt)
        time.sleep(ctx.p["run"] / 3 + random.Random(i).random() * 0.3)
        d.proc.kill()
        d.proc.wait(timeout=10)
        # Readers now see ENOTCONN: an error, never a hang or a wrong byte.
        r.add(*rs.stop(), touched=set(ctx.files))
    d = ctx.mount(ctx.ds, mnt=mnt, cfg=cfg, over_stale=True)
    register(mnt, ctx.files)
    r.add(*ctx.verify(mnt), strict=True)
    st = ctx.stats(mnt)
    r.notes.append(f"{ctx.p['kills']} kills; restart took at most {max(restarts):.1f} s; "
                   f"after: served {st.get('served')}, errors {st.get('errors')}")
    r.goals["right after the restarts"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def read_log(d, warn_only=False):
    lines = (read_text(d.log_path) or "").splitlines()
    return [l for l in lines if LOG_RE.search(l)] if warn_only else lines


ROWS = [
    ("backing_eio", row_backing_eio, "faultfs: open/read of c1/* fail with EIO, then heal"),
    ("backend_enotconn", row_backend_enotconn, "faultfs killed -9 under clairfs (ENOTCONN)"),
    ("stall_cached", row_stall_cached, "faultfs stalls every request; files already in RAM"),
    ("stall_uncached", row_stall_uncached, "faultfs stalls every request; nothing cached"),
    ("slow_backend", row_slow_backend, "faultfs delays every read 20 ms"),
    ("ssd_full", row_ssd_full, "the SSD tier's file system (tmpfs) filled by another writer"),
    ("swap_fifo", row_swap_fifo, "a planned file replaced by a FIFO"),
    ("swap_symlink", row_swap_symlink, "a planned file replaced by a symlink to another"),
    ("swap_dir", row_swap_dir, "a planned file replaced by a directory"),
    ("rewrite_same_size_mtime", row_rewrite_same_size_mtime,
     "cached files rewritten, same size and mtime (in place and by rename), then remount"),
    ("inode_reuse", row_inode_reuse, "a new file gets the inode number of a deleted one "
     "whose node the kernel still holds (ext4)"),
    ("chmod_revoke", row_chmod_revoke, "chmod 0600: another user (nobody) must be refused"),
    ("acl_deny", row_acl_deny, "setfacl u:nobody:---: nobody must be refused"),
    ("peer_kill", row_peer_kill, "2 ranks under mpiexec; rank 1's daemon killed -9"),
    ("daemon_kill9", row_daemon_kill9, "daemon killed -9 mid-prefetch, restarted on the same "
     "mountpoint and SSD dir, N times"),
]
EXT4_ROWS = {"inode_reuse"}


# ------------------------------------------------------------------------------- the runner

def run_row(name, fn, injects, params):
    row = Row(name, injects)
    holder = {}

    def on_timeout():   # kills every process the row started: blocked calls return ENOTCONN
        row.notes.append(f"row watchdog fired after {params['row_timeout']} s")
        row.goals["finished in time"] = False
        harness.kill_all_daemons()
    watchdog = threading.Timer(params["row_timeout"], on_timeout)
    watchdog.daemon = True
    watchdog.start()
    t0 = time.monotonic()
    try:
        holder["ctx"] = Ctx(params, row, on_ext4=name in EXT4_ROWS)
        fn(holder["ctx"])
    except Exception as e:  # noqa: BLE001 - a row that breaks is a failed row, not a crash
        row.goals["ran"] = False
        row.notes.append(f"{type(e).__name__}: {e}"[:500])
    finally:
        ctx = holder.get("ctx")
        if ctx is not None:
            try:
                ctx.close()
            except Exception as e:  # noqa: BLE001
                row.notes.append(f"teardown: {type(e).__name__}: {e}"[:300])
            for d in {ctx.work, ctx.data_root}:
                harness.remove_tmpdir(d)
        watchdog.cancel()
    row.seconds = round(time.monotonic() - t0, 1)
    reason = EXPECTED_FAIL.get(name)
    if row.passed():
        row.status = "XPASS" if reason else "pass"
    else:
        row.status = "xfail" if reason else "FAIL"
    row.expected_fail = reason
    return row


def cell(text, limit=140):
    text = str(text).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def errors_cell(row):
    return ", ".join(f"{k} {v}" for k, v in sorted(row.errors.items())) or "-"


def markdown(rows, mode):
    out = [f"Fault matrix ({mode}): {sum(r.status == 'pass' for r in rows)} pass, "
           f"{sum(r.status == 'xfail' for r in rows)} xfail, "
           f"{sum(r.status == 'XPASS' for r in rows)} XPASS, "
           f"{sum(r.status == 'FAIL' for r in rows)} FAIL", "",
           "| row | hung | wrong | alive | read errors | goals missed | logged | result |",
           "| --- | ---: | ---: | --- | --- | --- | --- | --- |"]
    for r in rows:
        missed = [g for g, ok in r.goals.items() if not ok]
        if r.hung:
            missed.insert(0, "no hang")
        if r.wrong:
            missed.insert(0, "no wrong bytes")
        alive = "-" if r.alive is None else ("yes" if r.alive else "**no**")
        logged = "; ".join(re.sub(r"^\[[^]]*\]\s*", "", l, count=1)
                           for l in r.logged[:2]) or "nothing"
        result = r.status if not r.expected_fail else f"{r.status} ({r.expected_fail})"
        out.append(f"| {r.name} | {r.hung} | {r.wrong} | {alive} | {cell(errors_cell(r))} | "
                   f"{cell(', '.join(missed) or '-')} | {cell(logged)} | {cell(result, 200)} |")
    out += ["", "Rows:", ""]
    for r in rows:
        out.append(f"- **{r.name}** ({r.seconds} s): {r.injects}.")
        for n in r.notes:
            out.append(f"  - {cell(n, 300)}")
        for w in r.wrong_examples:
            out.append(f"  - wrong: {cell(w, 200)}")
    return "\n".join(out) + "\n"


def cleanup_everything():
    harness.kill_all_daemons()
    for m in list(_tmpfs_mounts):
        umount_tmpfs(m)
    harness.cleanup_all()


def on_signal(signum, frame):
    cleanup_everything()
    os._exit(128 + signum)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small dataset, short runs (CI)")
    ap.add_argument("--only", default="", help="comma-separated row names")
    ap.add_argument("--out", default=".", help="directory for fault-matrix.{md,json}")
    ap.add_argument("--list", action="store_true", help="print the rows and exit")
    ap.add_argument("--reader", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reader:
        return reader_main(args.reader)
    if args.list:
        for name, _, injects in ROWS:
            print(f"{name}: {injects}")
        return 0
    mode = "quick" if args.quick else "full"
    params = dict(PARAMS[mode], row_timeout=120 if args.quick else 400)
    rows = ROWS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {n for n, _, _ in ROWS}
        if unknown:
            print(f"unknown row(s): {', '.join(sorted(unknown))} (see --list)", file=sys.stderr)
            return 2
        rows = [r for r in ROWS if r[0] in wanted]
    reason = skip_reason()
    if reason:
        print(f"SKIP: {reason}")
        return 77
    for binary in (harness.BIN, FAULTFS):
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            print(f"FAIL: not an executable: {binary} (set CLAIRFS_BIN and FAULTFS_BIN)")
            return 1
    if os.geteuid() != 0:
        print("SKIP: the fault matrix mounts tmpfs and acts as another user: run it as root")
        return 77
    harness.BIN = os.path.abspath(harness.BIN)
    atexit.register(cleanup_everything)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    os.makedirs(args.out, exist_ok=True)
    results = []
    for name, fn, injects in rows:
        print(f"{name}: {injects} ...", flush=True)
        row = run_row(name, fn, injects, params)
        print(f"{name}: {row.status} (hung {row.hung}, wrong {row.wrong}, alive {row.alive}, "
              f"goals {row.goals}) {row.seconds} s", flush=True)
        results.append(row)
    md = markdown(results, mode)
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with open(os.path.join(args.out, "fault-matrix.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "fault-matrix.json"), "w") as f:
        json.dump({"mode": mode, "commit": commit, "params": params,
                   "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "rows": [r.to_json() for r in results]}, f, indent=1)
    print("\n" + md)
    leftover = [m for m, _, _ in harness.fuse_mounts() if "/clairfs-fs-" in m]
    if leftover:
        print(f"FAIL: mounts left behind: {leftover}")
        return 1
    failed = [r.name for r in results if r.status == "FAIL"]
    xpass = [r.name for r in results if r.status == "XPASS"]
    if xpass:
        print(f"XPASS: {', '.join(xpass)} now meet every goal: remove them from EXPECTED_FAIL")
    print(f"faults: {sum(r.status in ('pass', 'XPASS') for r in results)} passed, "
          f"{len(failed)} failed, {sum(r.status == 'xfail' for r in results)} expected to fail")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
