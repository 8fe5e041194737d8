"""The `<mount>/.clairfs/` control files from Python: manifests, stats, plan, errors.

Standard library only. The contract these functions rely on is docs/control-interface.md.
"""
from __future__ import annotations

import errno
import itertools
import json
import operator
import os
from typing import Any, Iterable, Sequence

# The line rules and the signatures' types live in _manifest_text, which compact (imported by
# write_compact_manifest) builds on too, so neither imports the other's importer; they stay
# names of this module as well (MAX_STREAM_NAME and AnyPath only for callers that used them).
from ._manifest_text import (MAX_STREAM_NAME, AnyPath, Item, StrPath,  # noqa: F401
                             check_stream_name, manifest_line)

CONTROL_DIR = ".clairfs"
_CHUNK = 1 << 20  # bytes handed to one write(); the daemon parses the text as it arrives
_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
_INIT_PID_NS = 0xEFFFFFFC  # the kernel's initial pid namespace (PROC_PID_INIT_INO)


class ManifestError(ValueError):
    """clairfs rejected a manifest: a write() or close() failed with EINVAL and nothing changed.

    `errors` holds the daemon's report (`line N: 'path': reason`, up to 20 problems and the
    total), read from `<mount>/.clairfs/errors` just after the failed call. Another writer
    committing at the same moment could replace that report; the rejection itself is certain.
    """

    def __init__(self, mount: StrPath, errors: str) -> None:
        self.mount = mount
        self.errors = errors
        super().__init__(f"clairfs at {mount} rejected the manifest: {errors.strip() or '(no reason given)'}")


def control_path(mount: StrPath, name: str = "") -> str:
    """Path of a control file (`manifest`, `stats`, `plan`, `errors`) of the mount at `mount`.

    Raises FileNotFoundError when `mount` has no `.clairfs/` directory, i.e. is not a clairfs
    mount (or the daemon is gone).
    """
    d = os.path.join(os.fspath(mount), CONTROL_DIR)
    if not os.path.isdir(d):
        raise FileNotFoundError(errno.ENOENT, f"{mount} is not a clairfs mount (no {CONTROL_DIR}/ in it)", d)
    return os.path.join(d, name) if name else d


def _read(mount, name):
    # Each open returns a fresh snapshot; read it whole through one descriptor.
    with open(control_path(mount, name), "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def stats(mount: StrPath) -> dict[str, Any]:
    """The daemon's counters as a dict (keys in README.md, "Stats"), a snapshot taken now.

    A caller who is neither the mount's owner nor in control.group gets the counts view: no
    paths, stream names or byte sizes, and "view": "counts" (docs/permissions.md)."""
    return json.loads(_read(mount, "stats"))


def plan(mount: StrPath) -> dict[str, Any]:
    """A dict summarizing the active plan: epochs, entries, files, bytes, per tier and staging."""
    return json.loads(_read(mount, "plan"))


def errors(mount: StrPath) -> str:
    """The report of the last manifest commit on this mount: "" when it was accepted (for a
    caller outside the mount's owner and control.group, one sentence without the report)."""
    return _read(mount, "errors")


def relative_path(path: StrPath, root: StrPath) -> str:
    """`path` relative to the directory `root`, both taken lexically (no symlink resolution).

    A relative `path` is taken as relative to the current directory, as open() would. Raises
    ValueError when the path is not strictly inside `root`: clairfs serves nothing else.
    """
    root = os.path.abspath(os.fspath(root))
    p = os.path.abspath(os.fspath(path))
    if p == root or os.path.commonpath([p, root]) != root:
        raise ValueError(f"{path!r} is not inside the dataset root {root!r}; "
                         f"build the dataset over the mount (or pass root=) so its paths are under it")
    return os.path.relpath(p, root)


def default_stream_name() -> str:
    """The stream name this process registers under when none is given (register_loader etc.).

    "p<pid>", or "rank<R>-p<pid>" when a launcher set the process's rank (torchrun's RANK,
    Open MPI's OMPI_COMM_WORLD_RANK, MPICH's PMI_RANK, PMIx's PMIX_RANK, Slurm's SLURM_PROCID,
    the first of them that is a decimal number). In a pid namespace other than the host's (a
    container) "-ns<inode of /proc/self/ns/pid>" is added, as two containers on one node can
    run processes with the same pid. So two live processes sharing a mount never get the same
    name, and one process registering again replaces its own stream.
    """
    name = f"p{os.getpid()}"
    for var in _RANK_VARS:
        v = os.environ.get(var, "").strip()
        if v.isdigit() and v.isascii():
            name = f"rank{int(v)}-{name}"
            break
    try:
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        ns = _INIT_PID_NS
    return name if ns == _INIT_PID_NS else f"{name}-ns{ns}"


class _ManifestFile:
    """One writer of `<mount>/.clairfs/manifest`: write() all of a buffer, then commit()
    (close; EINVAL, from a write or the close, becomes ManifestError) or spoil() (an empty line first, so the daemon
    rejects what was written and the active plan stays)."""

    def __init__(self, mount, append):
        self.mount = mount
        path = control_path(mount, "manifest")
        self.fd = os.open(path, os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))

    def write(self, data):
        view = memoryview(data).cast("B")
        n = len(view)
        while view:
            try:
                view = view[os.write(self.fd, view):]
            except OSError as e:
                # The daemon refuses a write that completes a line it can already tell is
                # invalid (the report is in `errors`, as for a failed close).
                if e.errno != errno.EINVAL:
                    raise
                raise ManifestError(self.mount, errors(self.mount)) from None
        return n

    def spoil(self):
        try:
            os.write(self.fd, b"\n\n")  # an empty line (or bytes after a compact trailer)
        except OSError:
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass

    def commit(self):
        try:
            os.close(self.fd)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            raise ManifestError(self.mount, errors(self.mount)) from None


def _commit(mount, append, produce):
    f = _ManifestFile(mount, append)
    try:
        result = produce(f)
    except BaseException:
        f.spoil()
        raise
    f.commit()
    return result


def relative_paths(paths: Iterable[StrPath], root: StrPath) -> list[str]:
    """[relative_path(p, root) for p in paths], quick for the common case (absolute,
    normalized str paths under root, as an ImageFolder over the mount holds): same result."""
    root = os.path.abspath(os.fspath(root))
    prefix = root if root.endswith("/") else root + "/"
    paths = paths if isinstance(paths, list) else list(paths)
    if paths and set(map(type, paths)) == {str}:
        # All at once (C loops) when every path is prefix + a normalized relative path: no
        # '.' or '..' or empty component, no trailing '/' (so none is the root itself).
        rep = itertools.repeat
        if (all(map(str.startswith, paths, rep(prefix))) and not any(map(str.endswith, paths, rep("/")))
                and not any(map(operator.contains, paths, rep("/.")))
                and not any(map(operator.contains, paths, rep("//")))):
            cut = len(prefix)
            return [p[cut:] for p in paths]
    return [relative_path(p, root) for p in paths]


def write_manifest(mount: StrPath, epochs: Iterable[Iterable[bytes]], append: bool = False,
                   stream: str | None = None) -> int:
    """Writes a manifest of `epochs` to `<mount>/.clairfs/manifest` and commits it.

    epochs: an iterable of epochs, each an iterable of manifest lines as bytes ending in a
      newline (see manifest_line()); consumed lazily, so a long plan is never held whole.
    append: False replaces the stream's plan (O_TRUNC); True adds these epochs after it.
    stream: the stream this manifest registers (a `#stream NAME` line; see
      check_stream_name); None: the stream "default". Other streams are not touched.

    Returns the number of entries written. Raises ManifestError (with the daemon's reason)
    when clairfs rejects the text. The text starts with `#begin` and ends with the trailer
    `#end <entries>`: a text cut off anywhere (this process killed mid-write, or a forked
    child closing its copy of the descriptor) never becomes the plan. If producing the epochs
    raises, the trailer is not written and the write is spoiled on purpose (an empty line), so
    the daemon rejects it, and the original exception propagates.
    """
    head = b"#begin\n"
    if stream is not None:
        head += b"#stream %s\n" % check_stream_name(stream).encode()

    def produce(f):
        entries = 0
        buf = bytearray(head)
        for i, epoch in enumerate(epochs):
            if isinstance(epoch, (str, bytes)):
                raise TypeError("each epoch must be an iterable of lines, not one string")
            buf += b"#epoch\n"
            n = 0
            for line in epoch:
                buf += line
                n += 1
                if len(buf) >= _CHUNK:
                    f.write(buf)
                    buf.clear()
            if n == 0:
                raise ValueError(f"epoch {i} is empty: clairfs rejects empty epochs")
            entries += n
        buf += b"#end %d\n" % entries
        f.write(buf)
        return entries

    return _commit(mount, append, produce)


def write_compact_manifest(mount: StrPath, items: Sequence[Item], epochs: Iterable[Any],
                           append: bool = False, stream: str | None = None, *,
                           epoch_count: int | None = None, entry_count: int | None = None) -> int:
    """Writes a manifest in the compact (binary) form and commits it; see clairfs.compact.

    items: the files (relative paths) or ranges ((path, offset, length)) the epochs refer to.
    epochs: per epoch, the item indexes (0-based) in read order: lists, array('I'), numpy
      arrays or torch tensors. With epoch_count and entry_count given they are produced and
      written one at a time; otherwise a list of epochs is checked whole first, and any other
      iterable is spooled to a temporary file (the header needs both counts).
    append, stream: as for write_manifest; stream=None: the stream "default".

    Everything the encoder can check (items, stream name, indexes) is checked before the
    first byte is written, except for epochs produced lazily with the counts given: there an
    error spoils the write (the daemon rejects it) and propagates. Returns the entry count;
    raises ValueError for bad input, ManifestError when clairfs rejects the manifest.
    """
    from . import compact
    enc = compact.prepare(items, epochs, stream=stream, epoch_count=epoch_count,
                          entry_count=entry_count)
    return _commit(mount, append, enc.write_to)


def unregister(mount: StrPath, stream: str) -> int:
    """Removes the stream `stream` (a name, e.g. default_stream_name()) from the mount's plan.

    Writes a replacement that names the stream and has no entries; other streams are
    untouched. "default" removes the stream of manifests written without a name. Removing a
    stream that does not exist changes nothing.
    """
    check_stream_name(stream)
    return write_manifest(mount, [], stream=stream)


def register_paths(mount: StrPath, epochs: Iterable[Iterable[StrPath]], root: StrPath | None = None,
                   append: bool = False, stream: str | None = None, compact: bool = False) -> int:
    """Registers the read order given as paths, one list per epoch.

    mount: the clairfs mount point.
    epochs: a list (or iterable) of epochs, each a list of paths in the order they will be
      opened. A relative path is relative to the dataset root, as in the manifest itself; an
      absolute path must lie under `root` and is made relative to it.
    root: the directory absolute paths are made relative to; default: the mount point.
    append: add these epochs to the stream's plan instead of replacing it.
    stream: the stream to register (see write_manifest); None: the stream "default".
    compact: write the compact (binary) form: each distinct path once, then 4 bytes per
      entry (needs a clairfs that understands it, docs/control-interface.md).

    Returns the number of entries registered. Raises ValueError for a path outside the root
    (before anything is written), TypeError when `epochs` is a flat list of strings (wrap one
    epoch as [paths]), ManifestError when clairfs rejects the manifest (e.g. a missing file).
    """
    root = os.fspath(mount if root is None else root)
    epochs = list(epochs)
    if epochs and isinstance(epochs[0], (str, bytes, os.PathLike)):
        raise TypeError("epochs must be a list of lists of paths; for one epoch pass [paths]")
    for epoch in epochs:
        if isinstance(epoch, (str, bytes, os.PathLike)):
            raise TypeError("epochs must be a list of lists of paths; for one epoch pass [paths]")

    def rel(p):
        p = os.fspath(p)
        return relative_path(p, root) if os.path.isabs(p) else p

    if compact:
        return _register_compact(mount, epochs, rel, append, stream)
    if stream is not None:
        check_stream_name(stream)
    lines = [[manifest_line(rel(p)) for p in epoch] for epoch in epochs]
    return write_manifest(mount, lines, append=append, stream=stream)


def _register_compact(mount, epochs, item_of, append, stream):
    """Compact registration of epochs of hashable entries: item_of(entry) is the item (a
    relative path or a (path, offset, length) triple), computed once per distinct entry."""
    from array import array
    index, items, orders = {}, [], []
    for epoch in epochs:
        order = array("L" if array("I").itemsize < 4 else "I")
        for e in epoch:
            key = os.fspath(e) if isinstance(e, os.PathLike) else e
            if isinstance(key, list):
                key = tuple(key)  # a [path, offset, length] entry
            i = index.get(key)
            if i is None:
                i = index[key] = len(items)
                items.append(item_of(e))
            order.append(i)
        orders.append(order)
    return write_compact_manifest(mount, items, orders, append=append, stream=stream)
