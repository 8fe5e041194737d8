"""Reading a mount's files from Python without a request to the daemon per warm file.

Python's open() in its default buffered mode asks at every open whether the file is a terminal
(isatty(): the ioctl TCGETS). FUSE passes that ioctl to the daemon whatever the daemon answers,
so each open costs a round trip to the daemon even when the page cache holds all of the file's
bytes. An open with an explicit buffer size never asks. These functions open that way and
otherwise read exactly as open(path, "rb") does: any file, on a clairfs mount or not.

    open_file(path)    a binary file object, as open(path, "rb") returns
    read_file(path)    the file's bytes
    pil_loader(path)   the image as an RGB PIL.Image, as torchvision's default loader returns it;
                       pass it as ImageFolder(root, loader=clairfs.pil_loader)
"""
import io
import os
from typing import Union

PathLike = Union[str, bytes, "os.PathLike[str]"]

# The buffer of open_file (8 KiB): small, because it is allocated at every open, and a buffer of
# 128 KiB or more is a mapping of its own (mmap and munmap per file: 4x slower, measured). A
# read of the whole file bypasses the buffer anyway.
BUFFER_SIZE = io.DEFAULT_BUFFER_SIZE


def open_file(path: PathLike) -> io.BufferedReader:
    """open(path, "rb") without the isatty probe: the same reads, one request fewer."""
    return open(path, "rb", buffering=BUFFER_SIZE)  # pylint: disable=consider-using-with


def read_file(path: PathLike) -> bytes:
    """The whole file, read unbuffered (no copy through a buffer, no isatty probe)."""
    with open(path, "rb", buffering=0) as f:
        return f.readall()


def pil_loader(path: PathLike):
    """The image at path as an RGB PIL.Image (torchvision.datasets.folder.pil_loader's result),
    opened without the isatty probe. Needs PIL (Debian: python3-pil)."""
    from PIL import Image  # pylint: disable=import-outside-toplevel
    with open_file(path) as f:
        img = Image.open(f)
        return img.convert("RGB")
