"""The manifest's text form, one line at a time: manifest_line() and check_stream_name().

Standard library only, and imports nothing of this package: control (which writes manifests)
and compact (which encodes the same lines in the binary form) both build on it. The rules are
the daemon's, docs/control-interface.md.
"""
from __future__ import annotations

import os
from typing import Tuple, Union

# The types in the signatures of the package (annotations only: nothing checks them at run time).
StrPath = Union[str, "os.PathLike[str]"]
AnyPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
Item = Union[StrPath, Tuple[StrPath, int, int]]  # a file, or a (path, offset, length) range

_MAX_OFF = (1 << 63) - 1  # off_t: no byte of any file lies past it
MAX_STREAM_NAME = 128
_STREAM_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@:+-")


def manifest_line(rel: AnyPath, offset: int | None = None, length: int | None = None) -> bytes:
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
    start, size = _range_int("offset", offset, 0), _range_int("length", length, 1)
    if start + size > _MAX_OFF:
        raise ValueError(f"range {start}+{size} ends past the largest file offset (2**63 - 1)")
    return b"%s\t%d+%d\n" % (b, start, size)


def _range_int(what, v, least):
    # Exact ints only: a float, a str or a bool would be a silent conversion, not a byte count.
    if isinstance(v, bool) or not hasattr(type(v), "__index__"):
        raise ValueError(f"{what} must be an int, not {type(v).__name__} ({v!r})")
    v = v.__index__()
    if v < least:
        raise ValueError(f"{what} must be >= {least}, got {v}")
    return v


def check_stream_name(name: str) -> str:
    """`name` (a str) if it can name a stream, else ValueError saying why.

    A stream name is 1 to 128 bytes of [A-Za-z0-9._@:+-], not beginning with '.' or '-'
    (the daemon's rule, docs/control-interface.md, "Streams").
    """
    if not isinstance(name, str):
        raise ValueError(f"a stream name must be a str, not {type(name).__name__} ({name!r})")
    b = name.encode("utf-8", "surrogateescape")
    if not b:
        raise ValueError("empty stream name")
    if len(b) > MAX_STREAM_NAME:
        raise ValueError(f"stream name {name!r} is longer than {MAX_STREAM_NAME} bytes")
    if b[:1] in (b".", b"-"):
        raise ValueError(f"stream name {name!r}: a stream name cannot begin with '.' or '-'")
    if not _STREAM_BYTES.issuperset(b):
        raise ValueError(f"stream name {name!r} has a character outside [A-Za-z0-9._@:+-]")
    return name
