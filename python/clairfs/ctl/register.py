"""`clairfs-ctl register MNT FILE|- [--append]`: a manifest file (text or compact) written to
the mount's `.clairfs/manifest` as it is, committed, and the daemon's verdict.

Exit 0 when clairfs accepted it; 1 with the daemon's report (`.clairfs/errors`) when it
rejected it, the active plan unchanged (docs/control-interface.md).
"""
from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import Any, BinaryIO, TextIO

from .. import control

_CHUNK = 1 << 20


def _register(mount: str, source: BinaryIO, append: bool, err: TextIO) -> int:
    """Streams source into the control file; 0 when clairfs accepted it, 1 with its reason."""
    path = control.control_path(mount, "manifest")
    fd = os.open(path, os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
    try:
        while True:
            chunk = source.read(_CHUNK)
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
    except OSError as e:
        try:
            os.close(fd)  # the daemon keeps the active plan: nothing is installed
        except OSError:
            pass  # a text refused at a write fails its close() too: the write's error is it
        return _rejected(mount, e, err)
    try:
        os.close(fd)
    except OSError as e:
        return _rejected(mount, e, err)
    return 0


def _rejected(mount: str, e: OSError, err: TextIO) -> int:
    if e.errno != errno.EINVAL:
        print(f"clairfs-ctl: writing the manifest of {mount}: {e.strerror}", file=err)
        return 1
    report = control.errors(mount).strip() or "(no reason given)"
    print(f"clairfs-ctl: {mount} rejected the manifest; the active plan is unchanged:\n{report}",
          file=err)
    return 1


def add_parser(sub: Any) -> None:
    """Adds the register subcommand to clairfs-ctl's subparsers."""
    r = sub.add_parser("register", help="register a manifest (FILE, or - for standard input)")
    r.add_argument("mount")
    r.add_argument("file")
    r.add_argument("--append", action="store_true", help="append epochs to the stream's plan")


def run(args: argparse.Namespace, err: TextIO) -> int:
    """Registers FILE (- for standard input); 0 accepted, 1 rejected with the reason."""
    if args.file == "-":
        return _register(args.mount, sys.stdin.buffer, args.append, err)
    with open(args.file, "rb") as f:
        return _register(args.mount, f, args.append, err)
