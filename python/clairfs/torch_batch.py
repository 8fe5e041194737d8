"""Map-style PyTorch datasets that read a whole batch in one request (the batch path).

    BatchImageFolder(root, transform=None, target_transform=None, decode=None)
        torchvision's ImageFolder over a directory of a clairfs mount: the same classes, class
        indices and samples in the same order; a sample is (decode(bytes), target), decode
        defaulting to PIL's RGB image (as ImageFolder's default loader), then the transforms.
    BatchFiles(paths, decode=bytes, root=None)
        sample i is decode(the bytes of paths[i]); an item may also be a record
        (path, offset, length), length None or -1 meaning to the end of the file.

Both define __getitems__(indices): torch 1.13's DataLoader (with a batch size) calls it with a
batch's indices, and the batch is read in one round trip to the daemon (clairfs.batch), into
this process's buffer; DataLoader workers each open their own connection. decode gets a
memoryview of the sample's bytes in that buffer. The dataset keeps the batch open until it
reads its next batch in the same process, so what decode returns may refer to the view's
memory without a copy (torch.frombuffer(view, dtype=torch.uint8)) as long as it is used up
before that: the DataLoader's default collate copies a batch's samples into the batch tensor
before its worker fetches the next batch. A result kept longer (a collate_fn that returns the
samples as they are, results of __getitems__ called by hand and kept) must be a copy:
bytes(view), a decoded image (the default decodes are copies). A sample's failure raises as
open() of its path would (FileNotFoundError, PermissionError, ...).

Both have `.samples` (ImageFolder's list of (path, target); BatchFiles' items), so
clairfs.register_loader and clairfs.LocalitySampler take them like an ImageFolder.

When the mount has no batch path (not a clairfs mount, a daemon without one, `batch.enabled:
false`, the socket unreachable), the datasets read through the mount instead: the reason is
logged once per process and mount (logger "clairfs.batch"), and the samples are the same.

Importing this module imports torch; `clairfs` imports it only when one of its names is used.
"""
from __future__ import annotations

import io
import logging
import os
import threading
from typing import Any, Callable, Sequence

import torch.utils.data

from .batch import Batch, BatchError, BatchUnavailable, client_for
from .control import CONTROL_DIR

LOG = logging.getLogger("clairfs.batch")

# torchvision's IMG_EXTENSIONS (0.14), matched case-insensitively at the end of a file name.
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

_logged: set[tuple[int, str]] = set()   # (pid, mount) whose fallback reason was logged
_logged_lock = threading.Lock()


def find_mount(path: str) -> str | None:
    """The root of the clairfs mount holding `path` (the nearest mountpoint above it with a
    .clairfs directory), or None when it is on none."""
    p = os.path.abspath(path)
    while True:
        if os.path.ismount(p):
            return p if os.path.isdir(os.path.join(p, CONTROL_DIR)) else None
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent


def pil_decode(view: memoryview):
    """The image in `view` as an RGB PIL.Image (ImageFolder's default loader's result)."""
    from PIL import Image  # pylint: disable=import-outside-toplevel
    with Image.open(io.BytesIO(view)) as img:  # BytesIO copies the bytes
        return img.convert("RGB")


def _read_through_mount(item) -> bytes:
    """One sample read with open(), as the fallback does."""
    if isinstance(item, (tuple, list)):
        path, offset, length = item
        with open(path, "rb", buffering=0) as f:
            if length is None or length < 0:
                f.seek(offset)
                return f.readall()
            return os.pread(f.fileno(), length, offset)
    with open(item, "rb", buffering=0) as f:
        return f.readall()


class _BatchReader:
    """Reads items (absolute paths or records under `mount`) through the batch path of the
    mount, or through the mount itself when the batch path is unavailable.

    Picklable (DataLoader workers get a copy): it keeps only the mount's path; the connection
    is clairfs.batch's per-process client, so each worker makes its own."""

    def __init__(self, mount: str | None, reason: str | None = None) -> None:
        self.mount = mount
        self.reason = reason       # why the batch path is not used, when that is known at once
        self._held: tuple[int, Batch] | None = None  # the last batch (with its pid), open
        #                                              until this process's next read

    def __getstate__(self):
        return {"mount": self.mount, "reason": self.reason, "_held": None}

    def _release_held(self) -> None:
        held, self._held = self._held, None
        if held is not None and held[0] == os.getpid():
            held[1].close()

    def _fallback(self, reason: str) -> None:
        key = (os.getpid(), self.mount or "")
        with _logged_lock:
            if key in _logged:
                return
            _logged.add(key)
        LOG.warning("clairfs: reading through the mount, not the batch path: %s", reason)

    def read(self, items: Sequence[Any], decode: Callable[[memoryview], Any]) -> list:
        """[decode(bytes of item) for item in items], in one request when it can."""
        if self.mount is not None and self.reason is None:
            self._release_held()  # the previous batch's results were collated by now
            try:
                client = client_for(self.mount)
                batch = client.read(items)
                try:
                    out = [decode(batch[i]) for i in range(len(items))]
                except BaseException:
                    batch.close()
                    raise
                self._held = (os.getpid(), batch)
                return out
            except BatchUnavailable as e:
                self.reason = e.reason    # for this process's copy of the dataset from now on
                self._fallback(e.reason)
            except BatchError as e:       # a broken connection: this batch through the mount;
                self._fallback(f"{e}")    # the client reconnects at its next request
        elif self.reason is not None:
            self._fallback(self.reason)
        return [decode(memoryview(_read_through_mount(item))) for item in items]


def _decoded_bytes(view: memoryview) -> bytes:
    return bytes(view)


class BatchFiles(torch.utils.data.Dataset):
    """Sample i is decode(bytes of items[i]), read a batch per request (see the module's doc).

    items: paths of files on one clairfs mount (absolute, or relative to `root`), or records
    (path, offset, length). root: the directory relative paths are under (default: the current
    directory). decode: called with a memoryview of the sample, valid until this dataset reads
    its next batch in this process (default: bytes, a copy)."""

    def __init__(self, paths: Sequence[Any], decode: Callable[[memoryview], Any] | None = None,
                 root: str | None = None) -> None:
        base = os.path.abspath(root or os.getcwd())
        self.samples: list[Any] = []
        for p in paths:
            if isinstance(p, (tuple, list)):
                path, offset, length = p
                self.samples.append((os.path.join(base, os.fspath(path)), int(offset),
                                     None if length is None or length < 0 else int(length)))
            else:
                self.samples.append(os.path.join(base, os.fspath(p)))
        self.decode = decode or _decoded_bytes
        first = self.samples[0] if self.samples else base
        first = first[0] if isinstance(first, tuple) else first
        mount = find_mount(os.path.dirname(first))
        self._reader = _BatchReader(mount, None if mount else f"{first} is not on a clairfs mount")

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list:
        return self._reader.read([self.samples[i] for i in indices], self.decode)


class BatchImageFolder(torch.utils.data.Dataset):
    """torchvision.datasets.ImageFolder(root) read through the batch path: classes are the
    subdirectories of root, sorted; samples every file under a class directory (symbolic links
    to directories followed) whose name ends with an image extension (or that is_valid_file
    accepts), walked in torchvision's order. dataset[i] is (transform(decode(bytes)),
    target_transform(target)). Raises FileNotFoundError for a class without a valid file."""

    def __init__(self, root: str, transform: Callable | None = None,
                 target_transform: Callable | None = None,
                 decode: Callable[[memoryview], Any] | None = None,
                 is_valid_file: Callable[[str], bool] | None = None) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.transform, self.target_transform = transform, target_transform
        self.decode = decode or pil_decode
        self.classes = sorted(e.name for e in os.scandir(self.root) if e.is_dir())
        if not self.classes:
            raise FileNotFoundError(f"no class directory in {self.root}")
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        valid = is_valid_file or (lambda p: p.lower().endswith(IMG_EXTENSIONS))
        self.samples: list[tuple[str, int]] = []
        empty = []
        for cls in self.classes:
            before = len(self.samples)
            for d, _, names in sorted(os.walk(os.path.join(self.root, cls), followlinks=True)):
                for name in sorted(names):
                    path = os.path.join(d, name)
                    if valid(path):
                        self.samples.append((path, self.class_to_idx[cls]))
            if len(self.samples) == before:
                empty.append(cls)
        if empty:
            raise FileNotFoundError(f"no valid file for the classes {', '.join(empty)} in {self.root}")
        self.targets = [t for _, t in self.samples]
        self.imgs = self.samples
        mount = find_mount(self.root)
        self._reader = _BatchReader(mount, None if mount else f"{self.root} is not on a clairfs mount")

    def __len__(self) -> int:
        return len(self.samples)

    def _sample(self, decoded: Any, target: int) -> tuple[Any, Any]:
        if self.transform is not None:
            decoded = self.transform(decoded)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return decoded, target

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list:
        picked = [self.samples[i] for i in indices]
        decoded = self._reader.read([p for p, _ in picked], self.decode)
        return [self._sample(x, t) for x, (_, t) in zip(decoded, picked)]
