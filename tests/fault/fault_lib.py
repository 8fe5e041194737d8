"""Parts of the fault matrix (tests/fault/fault_matrix.py): reader processes, the per-row
workspace (dataset, faultfs, clairfs daemons, tmpfs, teardown with deadlines), measurements."""
import errno
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import harness
from harness import wait_for  # also a name of this module: fault_rows imports it from here

REPO = harness.REPO
HERE = os.path.dirname(os.path.abspath(__file__))
# Child processes (readers, also as another user) run Debian's interpreter when it exists.
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
FAULTFS = os.environ.get("FAULTFS_BIN") or os.path.join(REPO, "build", "tests", "faultfs")
READER = os.path.join(HERE, "fault_reader.py")

NOBODY = 65534
STOP_GRACE = 10.0        # seconds a daemon may take to exit after SIGTERM
REVOKE_WINDOW = 5.0      # seconds after chmod/setfacl within which a read must be refused
LOG_RE = re.compile(r"\[(warn|warning|error|critical)\]|assert|terminate called|abort|"
                    r"segmentation|sanitizer|faultfs: '", re.I)


def sha(data):
    return hashlib.sha256(data).hexdigest()


class Readers:
    """Reader processes over one mount; collects per-read outcomes and tells hung reads."""

    def __init__(self, ctx, mount, expect, paths=None, n=None, passes=1, until_stopped=True,
                 uid=None, other=None, tag="r", shuffle=True):
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
                    "expect": {p: sorted(expect[p]) for p in paths}, "other": other or {},
                    "shuffle": shuffle}
            spec_path = os.path.join(ctx.work, f"spec-{tag}-{i}-{time.monotonic_ns()}.json")
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            argv = [PY, READER, spec_path]
            if uid is not None:
                argv = harness.setpriv(uid) + argv
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
        # A stalled backend is noticed within the hang deadline (the default is 30 s).
        cfg["cache"]["backing_timeout"] = 2
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
        return d.start_over_stale(timeout=15)

    def readers(self, mount, **kw):
        r = Readers(self, mount, kw.pop("expect", self.expect), other=self.owner, **kw)
        self.reader_sets.append(r)
        return r

    def verify(self, mount, expect=None, uid=None, paths=None, shuffle=True):
        """One strict pass by one reader (in sorted order of paths unless shuffle): returns
        (results, hung)."""
        r = self.readers(mount, expect=expect or self.expect, paths=paths, n=1,
                         until_stopped=False, uid=uid, tag="v", shuffle=shuffle)
        return r.wait()

    # -- measurements
    def alive(self, d):
        """The daemon runs and serves .clairfs/stats (which needs no backend) within the hang
        deadline."""
        if d.proc is None or d.proc.poll() is not None:
            code = None if d.proc is None else d.proc.returncode
            tail = harness.read_tail(d.log_path, 5).strip().replace("\n", " | ")
            self.row.notes.append(f"daemon not running (exit {code}); log: {tail}")
            return False
        p = subprocess.Popen([PY, "-c", "import sys; open(sys.argv[1]).read()",
                              os.path.join(d.mountpoint, ".clairfs", "stats")],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
        start = time.monotonic()
        try:
            _, err = p.communicate(timeout=self.p["hang"])
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.row.notes.append(f"stats not read within {self.p['hang']} s")
            return False
        if p.returncode != 0:  # say why, so that a failure in CI explains itself
            last = err.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            self.row.notes.append(f"stats read failed after {time.monotonic() - start:.1f} s "
                                  f"(exit {p.returncode}): {last[0]}")
        return p.returncode == 0

    def stops(self, d, held_by_kernel=False):
        """SIGTERM; true when the daemon exits within STOP_GRACE (the fault still active).

        held_by_kernel: the backend is a FUSE daemon that accepted requests and never answers.
        Linux then waits for the answer uninterruptibly (fs/fuse/dev.c request_wait_answer),
        also in a killed process, so no process can exit while one of its threads is in such a
        request. The goal is then that the daemon finished its stop (logged "clairfs stopped",
        its mount gone) within STOP_GRACE; its process entry ends when the backend answers."""
        if d.proc is None or d.proc.poll() is not None:
            return d.proc is not None
        d.proc.send_signal(signal.SIGTERM)
        try:
            d.proc.wait(timeout=STOP_GRACE)
            return True
        except subprocess.TimeoutExpired:
            if not held_by_kernel:
                return False
        stopped = "clairfs stopped" in (read_text(d.log_path) or "")
        if stopped and not harness.is_fuse_mounted(d.mountpoint):
            self.row.notes.append("stopped and unmounted; the process waits on the kernel for "
                                  "the stalled backend's answer")
            return True
        return False

    def stats(self, mnt):
        p = subprocess.run([PY, "-c", "import sys;print(open(sys.argv[1]).read())",
                            os.path.join(mnt, ".clairfs", "stats")], capture_output=True,
                           text=True, timeout=self.p["hang"])
        return json.loads(p.stdout) if p.returncode == 0 else {}

    def wait_prefetched(self, mnt, files, limit=20):
        """Until the prefetch fetched `files` files or stopped progressing for 1.5 s."""
        return harness.wait_progress(
            lambda: self.stats(mnt).get("prefetch", {}).get("fetches", 0), lambda n: n, files, limit)

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


CREATED = []   # every temp dir this run made: only mounts under them are this run's


def make_tmpdir(tag, on_ext4=False):
    """A registered temp dir: tmpfs by default, ext4 (/var/tmp) where inode numbers get reused."""
    if not on_ext4:
        d = harness.make_tmpdir(tag)
    else:
        d = tempfile.mkdtemp(prefix=f"{harness.RUN_PREFIX}{tag}-", dir="/var/tmp")
        with harness._lock:
            harness._tmpdirs.append(d)
    CREATED.append(d)
    return d


def leftover_mounts():
    """FUSE and tmpfs mounts still under a temp dir of this run."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            target = line.split()[1].replace("\\040", " ")
            if any(target == d or target.startswith(d + "/") for d in CREATED):
                out.append(target)
    return out


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


def umount_all_tmpfs():
    for m in list(_tmpfs_mounts):
        umount_tmpfs(m)


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




def read_log(d, warn_only=False):
    lines = (read_text(d.log_path) or "").splitlines()
    return [l for l in lines if LOG_RE.search(l)] if warn_only else lines
