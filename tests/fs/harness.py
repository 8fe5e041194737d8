"""Mount/daemon management for the clairfs real-mount tests.

Every temp dir, daemon process and FUSE mount created here is recorded in a process-wide
registry; test cleanups release them one by one, and atexit plus SIGINT/SIGTERM handlers
release whatever is left, so no mount or daemon outlives the suite. A per-test watchdog
SIGKILLs the daemons if a test hangs: the kernel then aborts the FUSE connection and the
blocked system calls in the test return ENOTCONN instead of hanging forever.
"""
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CLAIRFS_BIN") or os.path.join(REPO, "build", "daemon", "clairfs")
# Seconds for a daemon to get its mount up. A healthy start takes well under one, and the wait
# ends as soon as the mount is there (or the daemon exits), so the deadline is for a loaded
# machine: a sanitized daemon opening RocksDB beside two busy loops and a compiler took over 10.
MOUNT_TIMEOUT = 60.0
TEST_TIMEOUT = float(os.environ.get("CLAIRFS_TEST_TIMEOUT", "150"))  # watchdog: kill daemons of a hung test

_lock = threading.RLock()
_mounts = []     # mount points we created (absolute paths)
_procs = []      # subprocess.Popen objects or plain pids of daemons
_groups = set()  # pids of registered daemons that lead their own process group
_tmpdirs = []    # temp dirs we created
_teardowns = []  # callables undoing what is neither a mount nor a daemon (network namespaces)
LOGS = {}        # test id -> list of (log path name, text), printed when the test fails


# ---------------------------------------------------------------------------- mounts

def unescape_mountinfo(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def rewrite_in_place(path, data):
    """Same size, same inode, the mtime put back: only ctime tells the change."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def fuse_mounts(with_source=False):
    """[(mount point, fstype, major:minor)] of every FUSE mount, read without touching them;
    with_source: the mount's source (what the daemon named it) in place of major:minor."""
    result = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            fstype = tail[0] if tail else ""
            if fstype.startswith("fuse"):
                third = (unescape_mountinfo(tail[1]) if len(tail) > 1 else "") if with_source \
                    else fields[2]
                result.append((unescape_mountinfo(fields[4]), fstype, third))
    return result


def daemons_of(mountpoint):
    """{pid: executable} of every clairfs process (an executable named clairfs...) whose
    command line names mountpoint: the daemons serving it, whoever started them."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            exe = os.readlink(f"/proc/{name}/exe")
        except OSError:
            continue
        if os.path.basename(exe).startswith("clairfs") and os.fsencode(mountpoint) in argv:
            found[int(name)] = exe
    return found


def control_mounts():
    """[(mount point, main mountpoint)] of every control mount (fuse.clairfs-control): its
    source names the clairfs mount it belongs to ("clairfs-control:<mountpoint>")."""
    result = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = right.split()
            if len(fields) >= 2 and fields[0] == "fuse.clairfs-control":
                result.append((unescape_mountinfo(left.split()[4]),
                               unescape_mountinfo(fields[1]).partition(":")[2]))
    return result


def control_mounts_of(prefix):
    """Mount points of the control mounts of clairfs mounts at or under prefix."""
    prefix = os.path.abspath(prefix)
    return [c for c, main in control_mounts() if main == prefix or main.startswith(prefix + "/")]


def is_fuse_mounted(path):
    path = os.path.abspath(path)
    return any(m == path for m, _, _ in fuse_mounts())


def mounts_under(prefix):
    prefix = os.path.abspath(prefix)
    return [m for m, _, _ in fuse_mounts() if m == prefix or m.startswith(prefix + "/")]


def unmount(path):
    """Unmounts every FUSE mount stacked at path: fusermount3 -u, lazy -uz as last resort."""
    path = os.path.abspath(path)
    for attempt in range(6):
        if not is_fuse_mounted(path):
            return True
        flag = "-u" if attempt < 3 else "-uz"
        try:
            subprocess.run(["fusermount3", flag, path], timeout=20,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pass
        if is_fuse_mounted(path) and flag == "-u":
            time.sleep(0.2)
    ok = not is_fuse_mounted(path)
    if not ok:
        print(f"WARNING: could not unmount {path}", file=sys.stderr)
    return ok


def register_mount(path):
    with _lock:
        _mounts.append(os.path.abspath(path))


def release_mount(path):
    ok = unmount(path)
    with _lock:
        if os.path.abspath(path) in _mounts and ok:
            _mounts.remove(os.path.abspath(path))
    return ok


# ---------------------------------------------------------------------------- processes

def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def register_proc(p):
    """Registers a daemon (Popen or pid) for release_proc and cleanup. One started in a new
    session (start_new_session=True) leads its own process group: a kill then goes to the whole
    group, so that a child it forked (clairfs's serving process under its supervisor) cannot
    outlive it holding a mount."""
    pid = p if isinstance(p, int) else p.pid
    try:
        leader = os.getpgid(pid) == pid and pid != os.getpgrp()
    except ProcessLookupError:
        leader = False
    with _lock:
        _procs.append(p)
        if leader:
            _groups.add(pid)


def _alive(p):
    return pid_alive(p) if isinstance(p, int) else p.poll() is None


def _signal(p, sig):
    try:
        if isinstance(p, int):
            os.kill(p, sig)
        elif p.poll() is None:
            p.send_signal(sig)   # Popen does not signal a reaped pid
    except ProcessLookupError:
        pass


def _kill_group(p):
    """SIGKILL to the process group p leads (see register_proc), its members included."""
    pid = p if isinstance(p, int) else p.pid
    with _lock:
        if pid not in _groups:
            return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def release_proc(p, grace=10.0):
    """Waits up to grace seconds for the process to end by itself, then kills it."""
    deadline = time.monotonic() + grace
    while _alive(p) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(p):
        _signal(p, signal.SIGTERM)
        end = time.monotonic() + 2
        while _alive(p) and time.monotonic() < end:
            time.sleep(0.05)
        if _alive(p):
            _signal(p, signal.SIGKILL)
            _kill_group(p)
    if not isinstance(p, int):
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            print(f"WARNING: daemon {p.pid} did not exit", file=sys.stderr)
    with _lock:
        if p in _procs:
            _procs.remove(p)
        _groups.discard(p if isinstance(p, int) else p.pid)


def kill_all_daemons():
    with _lock:
        procs = list(_procs)
    for p in procs:
        _signal(p, signal.SIGKILL)
        _kill_group(p)


# ---------------------------------------------------------------------------- other teardowns

def register_teardown(fn):
    """fn() undoes something set up outside the mounts, daemons and temp dirs (network
    namespaces); cleanup_all calls it after the mounts and daemons are gone, and before the
    temp dirs go, if release_teardown did not call it first."""
    with _lock:
        _teardowns.append(fn)


def release_teardown(fn):
    """Calls fn() (registered with register_teardown) now, once."""
    with _lock:
        if fn not in _teardowns:
            return
        _teardowns.remove(fn)
    fn()


# ---------------------------------------------------------------------------- temp dirs

def _tmp_root():
    """tmpfs when available: creating 100k files on a loaded disk takes minutes."""
    root = os.environ.get("CLAIRFS_TEST_TMP")
    if root:
        return root
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        return "/dev/shm"
    return None


# Every temporary directory of this run (and so every mount point in one) starts with this:
# the end-of-run check for mounts left behind counts only this run's, not those of another
# suite running at the same time (tools/test.sh runs three builds' suites at once).
RUN_PREFIX = f"clairfs-fs-{os.getpid()}-"


def make_tmpdir(tag="t"):
    d = tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{tag}-", dir=_tmp_root())
    with _lock:
        _tmpdirs.append(d)
    return d


def remove_tmpdir(d):
    for m in sorted(mounts_under(d), key=len, reverse=True):
        unmount(m)
    for m in control_mounts_of(d):  # stale: the daemon and its auto_unmount watcher were killed
        unmount(m)
    if mounts_under(d):
        print(f"WARNING: {d} still has mounts; not removing it", file=sys.stderr)
        return
    shutil.rmtree(d, ignore_errors=True)
    with _lock:
        if d in _tmpdirs:
            _tmpdirs.remove(d)


def cleanup_all():
    with _lock:
        mounts, procs, tmpdirs = list(_mounts), list(_procs), list(_tmpdirs)
        teardowns = list(_teardowns)
    for m in reversed(mounts):
        release_mount(m)
    for p in procs:
        release_proc(p, grace=2.0)
    for fn in reversed(teardowns):
        release_teardown(fn)
    for d in tmpdirs:
        remove_tmpdir(d)


def _on_signal(signum, frame):
    kill_all_daemons()   # a hung daemon must not block the unmounts below
    cleanup_all()
    os._exit(128 + signum)


def install_handlers():
    atexit.register(cleanup_all)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)


# ---------------------------------------------------------------------------- config

def _yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    if s == "" or any(c in s for c in ":#{}[],&*?|<>=!%@`'\"\\ ") or s != s.strip():
        return json.dumps(s)
    return s


def to_yaml(obj, indent=0):
    pad = " " * indent
    lines = []
    for k, v in obj.items():
        if isinstance(v, dict):
            lines.append(f"{pad}{k}:")
            lines.extend(to_yaml(v, indent + 2))
        elif isinstance(v, list):
            lines.append(f"{pad}{k}:")
            for item in v:
                sub = to_yaml(item, indent + 4)
                lines.append(f"{pad}  - " + sub[0].lstrip())
                lines.extend(sub[1:])
        else:
            lines.append(f"{pad}{k}: {_yaml_scalar(v)}")
    return lines


def config(ram="64MiB", staging="16MiB", keep_cache=True, log_file=None, open_mode=None,
           **extra):
    """A daemon config. open_mode None: the daemon's default (none; per_open when keep_cache is
    False). Tests that count the opens and reads reaching the daemon name per_open."""
    cfg = {
        "fuse": {"threads": 4, "keep_cache": keep_cache},
        "cache": {
            "tiers": [{"kind": "ram", "capacity": ram, "threads": 2}],
            "staging": {"capacity": staging, "threads": 2},
            "demand_threads": 2,
            "fetch_timeout": 10,
        },
        "log": {"level": "info"},
    }
    if log_file:
        cfg["log"]["file"] = log_file
    if open_mode:
        cfg["fuse"]["open_mode"] = open_mode
    for k, v in extra.items():
        cfg[k] = v
    return cfg


def drop_pages(root):
    """Drops the page-cache pages of every regular file under root (POSIX_FADV_DONTNEED), as
    a dataset larger than the page cache would lose them between epochs: in no-open mode (the
    default) their next reads then reach the daemon. Returns the number of files."""
    n = 0
    for d, _, names in os.walk(root):
        if os.path.basename(d) == ".clairfs":
            continue
        for name in names:
            path = os.path.join(d, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                n += 1
            finally:
                os.close(fd)
    return n


def write_config(path, cfg):
    text = cfg if isinstance(cfg, str) else "\n".join(to_yaml(cfg)) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return path


def write_cluster_key(path):
    """A new cluster secret at path (cluster.key_file): 32 random bytes, mode 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(32))
    return path


# ---------------------------------------------------------------------------- daemon

def read_tail(path, max_lines=120):
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        return f"<no log: {e}>"
    if len(lines) > max_lines:
        lines = [f"... ({len(lines) - max_lines} lines cut)\n"] + lines[-max_lines:]
    return "".join(lines)


class Daemon:
    """One clairfs process started in the foreground, its stderr in a log file."""

    def __init__(self, test_id, workdir, dataset, mountpoint, cfg_path, extra_args=(),
                 preexec_fn=None):
        self.test_id = test_id
        self.preexec_fn = preexec_fn  # run in the child before exec (e.g. enter a cgroup)
        self.dataset = dataset
        self.mountpoint = mountpoint or dataset
        n = len([x for x in os.listdir(workdir) if x.startswith("daemon-")])
        self.log_path = os.path.join(workdir, f"daemon-{n}.log")
        self.argv = [BIN, "-f", "-c", cfg_path, *extra_args, dataset]
        if mountpoint:
            self.argv.append(mountpoint)
        self.proc = None
        self.control = None  # where .clairfs led once mounted (the control mount)

    def start(self, timeout=MOUNT_TIMEOUT):
        if is_fuse_mounted(self.mountpoint):
            raise AssertionError(f"{self.mountpoint} is already a FUSE mount before start")
        self._spawn()
        return self._wait_mounted(lambda: is_fuse_mounted(self.mountpoint), timeout)

    def start_over_stale(self, timeout=MOUNT_TIMEOUT):
        """Starts on a mountpoint a killed daemon left stale (start() refuses to); the new
        daemon detaches it by itself. Returns once its own mount answers."""
        self._spawn()
        target = os.path.abspath(self.mountpoint)

        def live():
            # A clairfs mount listed there that answers STATFS (never cached): statvfs alone
            # also succeeds on the bare directory between the detach and the new mount.
            try:
                return (any(m == target for m, _, _ in fuse_mounts())
                        and os.path.isdir(os.path.join(target, ".clairfs"))
                        and os.statvfs(target) is not None)
            except OSError:
                return False
        return self._wait_mounted(live, timeout)

    def _spawn(self):
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=self.preexec_fn)
        register_proc(self.proc)
        register_mount(self.mountpoint)

    def _wait_mounted(self, mounted, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if mounted():
                try:
                    self.control = os.readlink(os.path.join(self.mountpoint, ".clairfs"))
                except OSError:
                    pass
                return self
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"clairfs exited with {self.proc.returncode} before mounting "
                    f"({' '.join(self.argv)}); log:\n{read_tail(self.log_path)}")
            time.sleep(0.02)
        raise AssertionError(f"{self.mountpoint} not mounted after {timeout}s "
                             f"({' '.join(self.argv)}); log:\n{read_tail(self.log_path)}")

    def stop(self):
        if self.proc is None:
            return
        release_mount(self.mountpoint)
        release_proc(self.proc)
        if self.control:
            # A killed daemon's control mount went with its auto_unmount watcher, but its
            # directory stays (for the next start on the mountpoint): remove it if empty and
            # unmounted (rmdir refuses anything else).
            try:
                os.rmdir(self.control)
            except OSError:
                pass
        LOGS.setdefault(self.test_id, []).append(
            (os.path.basename(self.log_path) + f" (exit {self.proc.returncode})",
             read_tail(self.log_path)))
        self.proc = None


# ---------------------------------------------------------------------------- test base

class ClairfsCase(unittest.TestCase):
    """Base class: temp dirs, daemons, control files, a watchdog against hangs."""

    def setUp(self):
        self._watchdog = threading.Timer(TEST_TIMEOUT, self._on_timeout)
        self._watchdog.daemon = True
        self._watchdog.start()
        self.addCleanup(self._watchdog.cancel)

    def _on_timeout(self):
        print(f"\nWATCHDOG: {self.id()} ran over {TEST_TIMEOUT}s; killing daemons",
              file=sys.stderr)
        kill_all_daemons()

    @classmethod
    def class_tmpdir(cls, tag):
        d = make_tmpdir(tag)
        cls.addClassCleanup(remove_tmpdir, d)
        return d

    def tmpdir(self, tag="t"):
        d = make_tmpdir(tag)
        self.addCleanup(remove_tmpdir, d)
        return d

    def mount(self, dataset, mountpoint=None, cfg=None, extra_args=(), workdir=None,
              preexec_fn=None):
        """Starts clairfs -f on dataset (at mountpoint, or over dataset if None); returns it.
        preexec_fn runs in the daemon's process before exec."""
        workdir = workdir or self.tmpdir("d")
        cfg_path = write_config(os.path.join(workdir, f"cfg-{time.monotonic_ns()}.yaml"),
                                cfg if cfg is not None else config())
        d = Daemon(self.id(), workdir, dataset, mountpoint, cfg_path, extra_args, preexec_fn)
        self.addCleanup(d.stop)
        d.start()
        return d

    # control files
    @staticmethod
    def control_read(mnt, name):
        with open(os.path.join(mnt, ".clairfs", name), "rb") as f:
            return f.read().decode("utf-8", errors="replace")

    def assert_bytes_read(self, counted, read, extra_requests, what=None):
        """The daemon's bytes_read (counted) against the bytes the test read: equal, unless the
        kernel asked for some pages again, which shows as READs beyond those the reads needed
        (extra_requests > 0): memory pressure, or another module's drop_caches, can drop pages
        between the kernel's read of them and its copy to the reader. Never fewer."""
        self.assertGreaterEqual(counted, read, what)
        if extra_requests <= 0:
            self.assertEqual(counted, read, what)

    def stats(self, mnt):
        text = self.control_read(mnt, "stats")
        try:
            return json.loads(text)
        except ValueError as e:
            self.fail(f"stats is not JSON ({e}): {text[:500]!r}")

    def plan(self, mnt):
        text = self.control_read(mnt, "plan")
        try:
            return json.loads(text)
        except ValueError as e:
            self.fail(f"plan is not JSON ({e}): {text[:500]!r}")

    @staticmethod
    def write_manifest(mnt, data, append=False):
        """Writes data with os.open/os.write/os.close; raises what write() (a line already
        known to be invalid) or else close() raises."""
        if isinstance(data, str):
            data = data.encode()
        flags = os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC)
        fd = os.open(os.path.join(mnt, ".clairfs", "manifest"), flags)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view[:65536])
                view = view[n:]
        except BaseException:
            try:
                os.close(fd)  # fails too after a refused write: the write's error is the one
            except OSError:
                pass
            raise
        os.close(fd)


def mpi_rank_daemon_pid(rank, netns=None):
    """The pid of an MPI rank's serving clairfs (its parent is the rank's supervisor), or
    None. netns: a network namespace's file (/run/netns/NAME); only a daemon in it counts, as
    on an emulated cluster where another MPI run has ranks of the same numbers."""
    node = os.stat(netns) if netns else None
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
            ns = os.stat(f"/proc/{pid}/ns/net") if node else None
        except (OSError, ValueError, IndexError):
            continue
        if node and (ns.st_dev, ns.st_ino) != (node.st_dev, node.st_ino):
            continue
        if f"PMI_RANK={rank}".encode() in env and BIN.encode() in parent:
            return int(pid)
    return None


# The shortest deadline of a wait. A deadline only ends a wait for a condition that never
# comes; on a loaded machine under a sanitizer a daemon's log line took longer than 5 s (CI,
# two busy loops, TSan). Tests that promise a bound measure the time themselves and assert it.
MIN_DEADLINE = 60.0


def wait_for(predicate, timeout, what, interval=0.05):
    """Polls predicate() every `interval` seconds until it returns a true value, and returns
    that value; AssertionError ("timed out after Ns waiting for WHAT") once max(`timeout`,
    MIN_DEADLINE) seconds have passed with it false. The one wait of the test suites (fs,
    python, fault)."""
    timeout = max(timeout, MIN_DEADLINE)
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def wait_progress(sample, count, target, timeout, stall=1.5, interval=0.05):
    """Polls sample() (e.g. a mount's stats) until count(sample) reaches target, stops growing
    for `stall` seconds, or `timeout` seconds pass; returns the last sample. For a prefetch
    that may legitimately stop short of the target (a tier full, a file that fails)."""
    deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
    while True:
        s = sample()
        n = count(s)
        now = time.monotonic()
        if n >= target or now > deadline:
            return s
        if n != last:
            last, since = n, now
        elif now - since > stall:
            return s
        time.sleep(interval)


def setpriv(uid, groups=(), gid=None):
    """The argv prefix that runs a command as uid (gid: uid unless given) with exactly the
    supplementary `groups` (none: --clear-groups), through setpriv; the ids need no account."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid if gid is None else gid}",
            f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups"]


def stop_process(pid):
    """SIGSTOPs pid and waits until every thread has stopped. A FUSE daemon's worker woken by
    the signal could otherwise still take a queued request first; the caller waiting for the
    answer then sleeps uninterruptibly (no signal frees it) instead of killably."""
    os.kill(pid, signal.SIGSTOP)

    def all_stopped():
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "T":
                        return False
            except OSError:
                pass
        return True
    wait_for(all_stopped, 10, f"every thread of {pid} to stop")
