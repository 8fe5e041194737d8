"""The `<mount>/.clairfs/` control files from Python: manifests, stats, plan, errors.

Standard library only. The contract these functions rely on is docs/control-interface.md.
"""
import errno
import json
import os

CONTROL_DIR = ".clairfs"
_CHUNK = 1 << 20  # bytes handed to one write(); the daemon parses the text as it arrives
_MAX_OFF = (1 << 63) - 1  # off_t: no byte of any file lies past it


class ManifestError(ValueError):
    """clairfs rejected a manifest: close() failed with EINVAL and nothing changed.

    `errors` holds the daemon's report (`line N: 'path': reason`, up to 20 problems and the
    total), read from `<mount>/.clairfs/errors` just after the failed close. Another writer
    committing at the same moment could replace that report; the rejection itself is certain.
    """

    def __init__(self, mount, errors):
        self.mount = mount
        self.errors = errors
        super().__init__(f"clairfs at {mount} rejected the manifest: {errors.strip() or '(no reason given)'}")


def control_path(mount, name=""):
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


def stats(mount):
    """The daemon's counters as a dict (keys in README.md, "Stats"), a snapshot taken now."""
    return json.loads(_read(mount, "stats"))


def plan(mount):
    """A dict summarizing the active plan: epochs, entries, files, bytes, per tier and staging."""
    return json.loads(_read(mount, "plan"))


def errors(mount):
    """The report of the last manifest commit on this mount: "" when it was accepted."""
    return _read(mount, "errors")


def manifest_line(rel, offset=None, length=None):
    """One manifest line (bytes, with its newline) for `rel`, a path relative to the dataset root.

    Without `offset` and `length` the line names the whole file. With both it is a record-range
    entry, `<path>\\t<offset>+<length>`: bytes [offset, offset + length) of the file (the daemon
    takes the path to be everything before the last tab). Both must be ints (not bool), offset
    >= 0, length >= 1, offset + length <= 2**63 - 1; they are written in decimal, no sign, no
    leading zeros.

    A name starting with '#' gets './' so it is not read as a comment or an epoch marker.
    Raises ValueError for a path that no manifest line can carry (empty, newline, NUL,
    absolute), for one of offset/length given without the other or out of range, and for a
    path containing a tab without a range: such a path can only be named with a range suffix
    (the whole file: offset 0, length its size; an empty file cannot be named at all).
    """
    b = os.fsencode(rel)
    if not b or b"\n" in b or b"\0" in b:
        raise ValueError(f"path {rel!r} cannot be written in a manifest (empty, newline or NUL)")
    if b.startswith(b"/"):
        raise ValueError(f"path {rel!r} must be relative to the dataset root")
    if b.startswith(b"#"):
        b = b"./" + b
    if offset is None and length is None:
        if b"\t" in b:
            raise ValueError(f"path {rel!r} contains a tab: a range is required to name it "
                             f"(the whole file: offset=0, length=<its size>)")
        return b + b"\n"
    if offset is None or length is None:
        raise ValueError("a range needs both offset and length (or neither for the whole file)")
    offset, length = _range_int("offset", offset, 0), _range_int("length", length, 1)
    if offset + length > _MAX_OFF:
        raise ValueError(f"range {offset}+{length} ends past the largest file offset (2**63 - 1)")
    return b"%s\t%d+%d\n" % (b, offset, length)


def _range_int(what, v, least):
    # Exact ints only: a float, a str or a bool would be a silent conversion, not a byte count.
    if isinstance(v, bool) or not hasattr(type(v), "__index__"):
        raise ValueError(f"{what} must be an int, not {type(v).__name__} ({v!r})")
    v = v.__index__()
    if v < least:
        raise ValueError(f"{what} must be >= {least}, got {v}")
    return v


def relative_path(path, root):
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


def write_manifest(mount, epochs, append=False):
    """Writes a manifest of `epochs` to `<mount>/.clairfs/manifest` and commits it.

    epochs: an iterable of epochs, each an iterable of manifest lines as bytes ending in a
      newline (see manifest_line()); consumed lazily, so a long plan is never held whole.
    append: False replaces the active plan (O_TRUNC); True adds these epochs after it.

    Returns the number of entries written. Raises ManifestError (with the daemon's reason)
    when clairfs rejects the text. The text starts with `#begin` and ends with the trailer
    `#end <entries>`: a text cut off anywhere (this process killed mid-write, or a forked
    child closing its copy of the descriptor) never becomes the plan. If producing the epochs
    raises, the trailer is not written and the write is spoiled on purpose (an empty line), so
    the daemon rejects it, and the original exception propagates.
    """
    path = control_path(mount, "manifest")
    fd = os.open(path, os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
    entries = 0
    buf = bytearray(b"#begin\n")

    def flush():
        view = memoryview(bytes(buf))
        buf.clear()
        while view:
            view = view[os.write(fd, view):]

    try:
        for i, epoch in enumerate(epochs):
            if isinstance(epoch, (str, bytes)):
                raise TypeError("each epoch must be an iterable of lines, not one string")
            buf += b"#epoch\n"
            n = 0
            for line in epoch:
                buf += line
                n += 1
                if len(buf) >= _CHUNK:
                    flush()
            if n == 0:
                raise ValueError(f"epoch {i} is empty: clairfs rejects empty epochs")
            entries += n
        buf += b"#end %d\n" % entries
        flush()
    except BaseException:
        try:
            os.write(fd, b"\n\n")  # an empty line: the daemon rejects the whole text
        except OSError:
            pass
        try:
            os.close(fd)
        except OSError:
            pass
        raise
    try:
        os.close(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        raise ManifestError(mount, errors(mount)) from None
    return entries


def register_paths(mount, epochs, root=None, append=False):
    """Registers the read order given as paths, one list per epoch.

    mount: the clairfs mount point.
    epochs: a list (or iterable) of epochs, each a list of paths in the order they will be
      opened. A relative path is relative to the dataset root, as in the manifest itself; an
      absolute path must lie under `root` and is made relative to it.
    root: the directory absolute paths are made relative to; default: the mount point.
    append: add these epochs to the active plan instead of replacing it.

    Returns the number of entries registered. Raises ValueError for a path outside the root
    (before anything is written), TypeError when `epochs` is a flat list of strings (wrap one
    epoch as [paths]), ManifestError when clairfs rejects the manifest (e.g. a missing file).
    """
    root = os.fspath(mount if root is None else root)
    epochs = list(epochs)
    if epochs and isinstance(epochs[0], (str, bytes, os.PathLike)):
        raise TypeError("epochs must be a list of lists of paths; for one epoch pass [paths]")
    lines = []
    for epoch in epochs:
        if isinstance(epoch, (str, bytes, os.PathLike)):
            raise TypeError("epochs must be a list of lists of paths; for one epoch pass [paths]")
        lines.append([manifest_line(p if not os.path.isabs(os.fspath(p)) else relative_path(p, root))
                      for p in epoch])
    return write_manifest(mount, lines, append=append)
