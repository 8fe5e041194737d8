"""A memory cgroup for tests: made under this process's own memory cgroup (v1 memory
controller, or v2 with the memory controller delegated), with a limit; processes are started in
it through a preexec function that writes their pid into it before exec; removed again (its
processes moved to the parent first, every wait with a deadline).

    cg = MemoryCgroup.create(256 << 20)   # None when no memory cgroup can be made (see .why)
    subprocess.Popen(argv, preexec_fn=cg.enter)
    cg.oom_kills(), cg.peak(), cg.anon()
    cg.remove()
"""
import os
import time

from harness import unescape_mountinfo

_why = "not tried"


def _mounts():
    """[(fstype, root, mountpoint, superoptions)] of the cgroup mounts."""
    result = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            lf, rf = left.split(), right.split()
            if len(rf) >= 3 and rf[0] in ("cgroup", "cgroup2"):
                result.append((rf[0], unescape_mountinfo(lf[3]), unescape_mountinfo(lf[4]), rf[2].split(",")))
    return result


def _own_dir(version):
    """This process's cgroup directory in the v1 memory or the v2 hierarchy, or None."""
    with open("/proc/self/cgroup") as f:
        lines = [ln.rstrip("\n").split(":", 2) for ln in f]
    for fstype, root, point, opts in _mounts():
        for hid, ctrls, path in lines:
            if version == 1 and fstype == "cgroup" and "memory" in opts \
                    and "memory" in ctrls.split(","):
                pass
            elif version == 2 and fstype == "cgroup2" and hid == "0" and ctrls == "":
                pass
            else:
                continue
            if root != "/" and path != root and not path.startswith(root + "/"):
                continue
            rel = path[len(root):] if root != "/" else path
            return point + rel.rstrip("/") if rel not in ("", "/") else point
    return None


def _write(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path):
    with open(path) as f:
        return f.read()


def _v2_memory_for_children(base):
    """True when children of the v2 group base get the memory controller (enabled in its
    subtree_control, or enabled now)."""
    control = os.path.join(base, "cgroup.subtree_control")
    try:
        if "memory" in _read(control).split():
            return True
        if "memory" not in _read(os.path.join(base, "cgroup.controllers")).split():
            return False
        _write(control, "+memory")
        return True
    except OSError:
        return False


class MemoryCgroup:
    def __init__(self, path, version, limit):
        self.path, self.version, self.limit = path, version, limit
        self.parent = os.path.dirname(path)
        self._procs = os.path.join(path, "cgroup.procs").encode()

    @staticmethod
    def why():
        """Why the last create() returned None."""
        return _why

    @classmethod
    def create(cls, limit, tag="clairfs-test"):
        """A new memory cgroup below this process's own, limited to limit bytes; None (reason in
        why()) when none can be made: not root, no memory controller, not delegated."""
        global _why
        if os.geteuid() != 0:
            _why = "not root"
            return None
        for version in (1, 2):
            try:
                own = _own_dir(version)
            except OSError as e:
                _why = f"cannot read /proc/self: {e}"
                return None
            if own is None:
                continue
            # v1: below this process's own group. v2: a child gets memory.max only where its
            # parent's subtree_control enables memory, which a group holding processes cannot
            # (no internal processes): its own group if it can, else the hierarchy's root.
            bases = [own]
            if version == 2:
                root = next((m[2] for m in _mounts() if m[0] == "cgroup2"), None)
                bases = [b for b in (own, root) if b and _v2_memory_for_children(b)]
                if not bases:
                    _why = "no v2 group here can give its children the memory controller"
                    continue
            for base in bases:
                path = os.path.join(base, f"{tag}-{os.getpid()}-{time.monotonic_ns()}")
                try:
                    os.mkdir(path)
                except OSError as e:
                    _why = f"cannot make a cgroup under {base}: {e}"
                    continue
                try:
                    if version == 1:
                        _write(os.path.join(path, "memory.limit_in_bytes"), str(limit))
                    else:
                        _write(os.path.join(path, "memory.max"), str(limit))
                        if os.path.exists(os.path.join(path, "memory.swap.max")):
                            _write(os.path.join(path, "memory.swap.max"), "0")
                except OSError as e:
                    _why = f"cannot set the limit of {path}: {e}"
                    os.rmdir(path)
                    continue
                return cls(path, version, limit)
        if _why == "not tried":
            _why = "no memory cgroup hierarchy is mounted"
        return None

    def enter(self):
        """preexec_fn: moves the calling (child) process into the group before it execs."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    def pids(self):
        try:
            return [int(p) for p in _read(os.path.join(self.path, "cgroup.procs")).split()]
        except OSError:
            return []

    def _field(self, name, key):
        try:
            for line in _read(os.path.join(self.path, name)).splitlines():
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
        except (OSError, ValueError):
            pass
        return None

    def oom_kills(self):
        """Processes the kernel's OOM killer killed in this group."""
        if self.version == 1:
            return self._field("memory.oom_control", "oom_kill") or 0
        return self._field("memory.events", "oom_kill") or 0

    def limit_hits(self):
        """v1 memory.failcnt (times the limit was reached: reclaim, not a kill); v2 the 'max'
        events."""
        if self.version == 1:
            return int(_read(os.path.join(self.path, "memory.failcnt")))
        return self._field("memory.events", "max") or 0

    def usage(self):
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        return int(_read(os.path.join(self.path, name)))

    def peak(self):
        """Highest usage (page cache included), or None where the kernel does not say."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int(_read(os.path.join(self.path, name)))
        except OSError:
            return None

    def anon(self):
        """Anonymous memory of the group now (what reclaim cannot drop without swap)."""
        return self._field("memory.stat", "rss" if self.version == 1 else "anon") or 0

    def remove(self, timeout=10.0):
        """Moves what is left in the group to its parent and removes it. True when removed."""
        deadline = time.monotonic() + timeout
        parent_procs = os.path.join(self.parent, "cgroup.procs")
        while time.monotonic() < deadline:
            for pid in self.pids():
                try:
                    _write(parent_procs, str(pid))
                except OSError:
                    pass  # exited meanwhile
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.05)
        return False


def write_uncached_dataset(ds, total, seed=25, small=(200_000, 1_500_000), big=(5 << 20, 7 << 20)):
    """Writes about total bytes of random files under ds (every 8th file of size big, chunked
    at the default 4 MiB chunk size; the others of size small), each fsynced and dropped from
    the page cache, so that the first read of each comes from the disk and its page cache is
    charged to the reader's cgroup. Returns {relative path: sha256 digest}."""
    import hashlib
    import random
    rng = random.Random(seed)
    digests, written, i = {}, 0, 0
    while written < total:
        lo, hi = big if i % 8 == 7 else small
        data = rng.randbytes(rng.randint(lo, hi))
        rel = f"d{i % 16:02d}/f{i:05d}.bin"
        path = os.path.join(ds, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        digests[rel] = hashlib.sha256(data).hexdigest()
        written += len(data)
        i += 1
    return digests
