"""`clairfs-ctl cache`: list, verify and clean the SSD tier's cache directories.

    clairfs-ctl cache list [DIR...] [--json]     the caches under the default roots and DIRs
    clairfs-ctl cache verify DIR [--json] [--repair]
                                                 every object's bytes against its xxh3
    clairfs-ctl cache clean (DIR... | --dataset PATH | --unused-for DAYS | --all) [--dry-run]

A cache is a directory holding `clairfs.lock` (the daemon's flock, with its pid) and either
`clairfs.json` (its description: dataset, version, created, last_used; cache/tiers/cache_info.h) or
RocksDB's `CURRENT`; a lock file alone is the remains of a start that never opened it. The
default roots are where the daemon puts caches by default (conf/clairfs.yaml): root's
/var/tmp/clairfs and the calling user's $XDG_CACHE_HOME/clairfs or ~/.cache/clairfs.

A cache is in use while some process holds the flock of its lock file; `list` probes it with a
shared lock taken and dropped at once. `clean` takes the lock itself and holds it while it
renames the directory out of the way and deletes it without following symbolic links, so no
daemon can start on a cache being deleted. `verify` runs the clairfs-cache program
($CLAIRFS_CACHE_BIN, else clairfs-cache on PATH, else next to clairfs on PATH).

Last use: the description's last_used (a start, or a daemon's clean stop), else the newest
modification time of a file in the directory. Sizes are bytes allocated on disk.
"""
from __future__ import annotations

import argparse
import dataclasses
import enum
import errno
import fcntl
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import time
from typing import Any, Iterable, Sequence, TextIO

LOCK_FILE = "clairfs.lock"
INFO_FILE = "clairfs.json"
DB_FILE = "CURRENT"
_MAX_INFO_BYTES = 64 << 10


class State(enum.Enum):
    """Whether a daemon (or a check) holds a cache's lock."""
    IDLE = "idle"
    IN_USE = "in use"
    UNKNOWN = "unknown"  # the lock file cannot be opened (another user's cache)


@dataclasses.dataclass
class Cache:
    """One cache directory as `list` shows it."""
    path: str
    owner: str                # user name (the uid when it has none)
    dataset: str | None       # from the description; None without one
    version: str | None       # clairfs that last described it
    created: int | None       # seconds since the epoch
    last_used: float | None   # see the module's docstring
    size: int                 # bytes allocated on disk
    state: State
    pid: int | None           # the lock's holder while IN_USE

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["state"] = self.state.value
        return d


def default_roots() -> list[str]:
    """Where the daemon creates caches by default: root's and the calling user's."""
    roots = ["/var/tmp/clairfs"]
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    home = os.environ.get("HOME", "")
    if not home.startswith("/"):
        try:
            home = pwd.getpwuid(os.geteuid()).pw_dir
        except KeyError:
            home = ""
    if xdg.startswith("/"):
        roots.append(os.path.join(xdg, "clairfs"))
    elif home and home != "/":
        roots.append(os.path.join(home, ".cache", "clairfs"))
    return roots


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def is_cache(path: str) -> bool:
    """True when path is a directory (not a link) holding a clairfs cache (see above)."""
    st = _lstat(path)
    if st is None or not stat.S_ISDIR(st.st_mode):
        return False
    lock = _lstat(os.path.join(path, LOCK_FILE))
    if lock is None or not stat.S_ISREG(lock.st_mode):
        return False
    for name in (INFO_FILE, DB_FILE):
        mark = _lstat(os.path.join(path, name))
        if mark is not None and stat.S_ISREG(mark.st_mode):
            return True
    try:
        return os.listdir(path) == [LOCK_FILE]
    except OSError:
        return False


def read_info(path: str) -> dict[str, Any] | None:
    """The cache's description, or None (none, unreadable, a link, not one)."""
    try:
        fd = os.open(os.path.join(path, INFO_FILE),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_INFO_BYTES:
            return None
        info = json.loads(os.read(fd, _MAX_INFO_BYTES).decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return info if isinstance(info, dict) else None


def _usage(path: str) -> tuple[int, float | None]:
    """(bytes allocated on disk, newest modification time of a file) below path, without
    following symbolic links."""
    size = 0
    newest: float | None = None
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    size += st.st_blocks * 512
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(e.path)
                    elif stat.S_ISREG(st.st_mode) and e.name != LOCK_FILE:
                        if newest is None or st.st_mtime > newest:
                            newest = st.st_mtime
        except OSError:
            continue
    return size, newest


def _holder_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def lock_state(path: str) -> tuple[State, int | None]:
    """Whether the cache's lock is held now, and by which pid (as its lock file says)."""
    try:
        fd = os.open(os.path.join(path, LOCK_FILE),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return State.UNKNOWN, None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return State.IN_USE, _holder_pid(fd)
        except OSError:
            return State.UNKNOWN, None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return State.IDLE, None
    finally:
        os.close(fd)


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def describe(path: str) -> Cache:
    """What `list` shows of the cache at path (is_cache(path) holds)."""
    st = os.lstat(path)
    info = read_info(path) or {}
    size, newest = _usage(path)
    state, pid = lock_state(path)

    def field(key: str, kind: type) -> Any:
        v = info.get(key)
        return v if isinstance(v, kind) and not isinstance(v, bool) else None

    last_used = field("last_used", int)
    return Cache(path=path, owner=_owner(st.st_uid), dataset=field("dataset", str),
                 version=field("version", str), created=field("created", int),
                 last_used=float(last_used) if last_used is not None else newest,
                 size=size, state=state, pid=pid)


def find_caches(places: Iterable[str], err: TextIO) -> list[str]:
    """The caches among places (each a cache or a directory of caches), absolute, once each.
    A place that cannot be read is reported on err, unless it does not exist."""
    found: list[str] = []
    for place in places:
        place = os.path.abspath(place)
        if is_cache(place):
            candidates = [place]
        else:
            try:
                names = sorted(os.listdir(place))
            except FileNotFoundError:
                continue
            except OSError as e:
                print(f"clairfs-ctl: cannot read {place}: {e.strerror}", file=err)
                continue
            candidates = [os.path.join(place, n) for n in names]
        found.extend(c for c in candidates if c not in found and is_cache(c))
    return found


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t is not None else "-"


def _state_text(c: Cache) -> str:
    if c.state is State.IN_USE:
        return f"in use by pid {c.pid}" if c.pid else "in use"
    return str(c.state.value)


def list_caches(dirs: Sequence[str], as_json: bool, out: TextIO, err: TextIO) -> int:
    for d in dirs:
        if _lstat(d) is None:
            print(f"clairfs-ctl: {d}: no such directory", file=err)
            return 1
    caches = [describe(p) for p in find_caches(list(default_roots()) + list(dirs), err)]
    if as_json:
        out.write(json.dumps([c.to_json() for c in caches], indent=1, sort_keys=True) + "\n")
        return 0
    if not caches:
        out.write("no clairfs caches found under " + ", ".join(default_roots() + list(dirs))
                  + "\n")
        return 0
    for c in caches:
        out.write(f"{c.path}\n  owner {c.owner}, dataset {c.dataset or '(unknown)'}, "
                  f"{_human(c.size)}, last use {_when(c.last_used)}, {_state_text(c)}\n")
    return 0


def cache_binary() -> str | None:
    """The clairfs-cache program (see the module's docstring), or None."""
    env = os.environ.get("CLAIRFS_CACHE_BIN")
    if env:
        return env
    found = shutil.which("clairfs-cache")
    if found:
        return found
    daemon = shutil.which("clairfs")
    if daemon:
        beside = os.path.join(os.path.dirname(os.path.realpath(daemon)), "clairfs-cache")
        if os.access(beside, os.X_OK):
            return beside
    return None


def verify(path: str, as_json: bool, repair: bool, err: TextIO) -> int:
    """Runs clairfs-cache verify (its output is ours); its exit status: 0 sound, 1 bad
    objects, 66 not a cache, 74 unreadable, 75 in use; 1 when the program is missing."""
    binary = cache_binary()
    if binary is None:
        print("clairfs-ctl: clairfs-cache not found (installed next to clairfs; or set "
              "CLAIRFS_CACHE_BIN)", file=err)
        return 1
    argv = [binary, "verify"] + (["--json"] if as_json else []) + \
        (["--repair"] if repair else []) + ["--", path]
    return subprocess.run(argv, check=False).returncode


@dataclasses.dataclass
class _Held:
    """A cache locked for removal: its parent's descriptor, its name there, its lock."""
    parent_fd: int
    name: str
    lock_fd: int

    def release(self) -> None:
        os.close(self.lock_fd)
        os.close(self.parent_fd)


def _take(path: str) -> _Held | str:
    """Locks the cache at path for removal, or says why not."""
    parent, name = os.path.split(path.rstrip("/"))
    try:
        pfd = os.open(parent or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        return e.strerror or str(e)
    try:
        st = os.lstat(name, dir_fd=pfd)
        if not stat.S_ISDIR(st.st_mode):
            os.close(pfd)
            return "not a directory (or a symbolic link)"
        dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                      dir_fd=pfd)
        try:
            lfd = os.open(LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                          dir_fd=dfd)
        finally:
            os.close(dfd)
    except OSError as e:
        os.close(pfd)
        return e.strerror or str(e)
    try:
        fcntl.flock(lfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        pid = _holder_pid(lfd)
        os.close(lfd)
        os.close(pfd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return f"in use by pid {pid}; unmount it first" if pid else \
                "in use; unmount it first"
        return e.strerror or str(e)
    return _Held(pfd, name, lfd)


def _remove(held: _Held) -> None:
    """Renames the locked cache to a hidden name in its parent (a daemon starting now makes a
    new cache at the old path instead of using one half deleted), then deletes it without
    following symbolic links."""
    hidden = f".{held.name}.removing-{os.getpid()}"
    os.rename(held.name, hidden, src_dir_fd=held.parent_fd, dst_dir_fd=held.parent_fd)
    if sys.version_info >= (3, 11):
        shutil.rmtree(hidden, dir_fd=held.parent_fd)
    else:  # pragma: no cover - Debian 12 has 3.11
        shutil.rmtree(os.path.join(f"/proc/self/fd/{held.parent_fd}", hidden))


def _select(args: argparse.Namespace, err: TextIO) -> list[str] | None:
    """The caches clean should remove; None after a usage error."""
    chosen = [bool(args.dirs), args.dataset is not None, args.unused_for is not None, args.all]
    if sum(chosen) != 1:
        print("clairfs-ctl: cache clean takes DIR..., --dataset, --unused-for or --all "
              "(one of them)", file=err)
        return None
    if args.dirs:
        return [os.path.abspath(d) for d in args.dirs]
    caches = [describe(p) for p in find_caches(args.root or default_roots(), err)]
    if args.dataset is not None:
        wanted = {os.path.realpath(args.dataset), os.path.normpath(os.path.abspath(args.dataset))}
        return [c.path for c in caches if c.dataset in wanted]
    if args.unused_for is not None:
        cutoff = time.time() - args.unused_for * 86400
        return [c.path for c in caches
                if c.state is not State.IN_USE and (c.last_used or 0) < cutoff]
    return [c.path for c in caches]


def clean(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Removes the selected caches; 0 when every one was removed (or would be), 1 when one
    was refused or failed, 2 on bad usage."""
    if args.unused_for is not None and args.unused_for < 0:
        print("clairfs-ctl: --unused-for must be >= 0", file=err)
        return 2
    if not shutil.rmtree.avoids_symlink_attacks:
        print("clairfs-ctl: this Python cannot delete a directory without following symbolic "
              "links; not cleaning", file=err)
        return 1
    targets = _select(args, err)
    if targets is None:
        return 2
    failed, freed, removed = 0, 0, 0
    for path in targets:
        if os.path.islink(path):
            print(f"clairfs-ctl: refusing {path}: a symbolic link (name the cache itself)",
                  file=err)
            failed += 1
            continue
        if not is_cache(path):
            print(f"clairfs-ctl: refusing {path}: not a clairfs cache (no {LOCK_FILE} with "
                  f"{INFO_FILE} or RocksDB's {DB_FILE})", file=err)
            failed += 1
            continue
        held = _take(path)
        if isinstance(held, str):
            print(f"clairfs-ctl: refusing {path}: {held}", file=err)
            failed += 1
            continue
        try:
            c = describe(path)
            what = f"{path} (dataset {c.dataset or 'unknown'}, owner {c.owner}): {_human(c.size)}"
            if args.dry_run:
                out.write(f"would remove {what}\n")
            else:
                _remove(held)
                out.write(f"removed {what}\n")
            freed += c.size
            removed += 1
        except OSError as e:
            print(f"clairfs-ctl: cannot remove {path}: {e.strerror or e}", file=err)
            failed += 1
        finally:
            held.release()
    verb = "would free" if args.dry_run else "freed"
    out.write(f"{verb} {_human(freed)} ({freed} bytes) in {removed} cache(s)\n")
    return 1 if failed else 0


def add_parser(sub: Any) -> None:
    """Adds `cache` with its subcommands to the subparsers of clairfs-ctl."""
    p = sub.add_parser("cache", help="list, verify or clean SSD cache directories")
    cs = p.add_subparsers(dest="cache_command", required=True)
    ls = cs.add_parser("list", help="caches under the default roots and DIRs: owner, dataset, "
                                    "size, last use, in use")
    ls.add_argument("dirs", nargs="*", metavar="DIR", help="a cache, or a directory of caches")
    ls.add_argument("--json", action="store_true", help="as a JSON list")
    v = cs.add_parser("verify", help="check every object of a cache against its xxh3 "
                                     "(exit 0 sound, 1 bad, 75 in use)")
    v.add_argument("dir", metavar="DIR")
    v.add_argument("--json", action="store_true", help="the report as JSON")
    v.add_argument("--repair", action="store_true", help="delete the bad objects")
    c = cs.add_parser("clean", help="remove caches not in use")
    c.add_argument("dirs", nargs="*", metavar="DIR", help="caches to remove")
    c.add_argument("--dataset", metavar="PATH", help="the caches of this dataset")
    c.add_argument("--unused-for", type=float, metavar="DAYS",
                   help="the caches not used for DAYS days")
    c.add_argument("--all", action="store_true", help="every cache found")
    c.add_argument("--root", action="append", metavar="DIR",
                   help="look for caches here instead of the default roots (repeatable)")
    c.add_argument("--dry-run", action="store_true", help="say what would go; remove nothing")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Runs the parsed `cache` subcommand; its exit status."""
    if args.cache_command == "list":
        return list_caches(args.dirs, args.json, out, err)
    if args.cache_command == "verify":
        out.flush()
        return verify(args.dir, args.json, args.repair, err)
    return clean(args, out, err)
