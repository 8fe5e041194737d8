"""The batch path's client: a whole batch of samples in one request, into memory this process owns.

docs/batch-path.md is the contract (discovery, protocol, trust, memory); this module is its
Python side, standard library only:

    client = BatchClient(mount)               # finds <mount>/.clairfs/batch, connects, says hello
    with client.read(["train/a.jpg", ("big.tar", 4096, 512), "/mnt/ds/b.jpg"]) as batch:
        for i in range(len(batch)):
            view = batch[i]                   # a memoryview of the sample's bytes (no copy), or
                                              # raises the item's OSError (FileNotFoundError...)
    client_for(mount)                         # this process's shared client of that mount
    for batch in prefetch(client, batches, depth=2):   # batches read ahead by a thread, in order
        with batch: ...

A sample is a path (relative to the mount's root, or absolute under the mountpoint: the whole
file) or a record (path, offset, length): `length` None or -1 reads to the end of the file.

Memory and lifetime (the contract):
- A client owns one buffer, a memfd sealed against shrinking and mapped with MAP_POPULATE, so
  its pages are this process's (charged to its memory cgroup), cut into `windows` windows of
  `window_bytes`. A batch is written into free windows; the Batch holds them until it is
  closed (close(), the `with` block's end) or garbage-collected, and only then may they be
  written again. A sample's memoryview is valid while its Batch is open: close() releases the
  views the Batch handed out (using them then raises ValueError). What was made from a view
  without a copy (memoryview(view), numpy.frombuffer, torch.frombuffer) is not released with
  it and shows whatever the window holds next: copy what you keep past the Batch (bytes(view),
  bytearray(view)). (A view still exported at close, which release() refuses, keeps its
  windows out of use for good.)
- A batch larger than a free window takes several windows (the samples that did not fit are
  asked for again in the next); when every window is held by open Batches, a single sample
  is larger than a window, or the last batch took several windows (the next batch then gets
  windows that hold it whole), the client makes a new, larger buffer and hands it to the
  server (a second hello replaces the first); windows of the old buffer stay mapped until the
  Batches holding them are closed.
- One connection per client, one request at a time (a lock serialises threads). After a
  fork() the child cannot share the parent's connection or buffer: a client used in a process
  other than the one that made it opens its own connection and buffer first (DataLoader
  workers each get their own).

Every receive has a deadline (`timeout`, seconds). BatchUnavailable is raised when the mount
has no batch path (no control file: not a clairfs mount, an older daemon, `batch.enabled:
false`), the socket cannot be reached, or the server refuses the hello; BatchError (also an
OSError) for a request the server refuses as a whole. A sample's own failure is the errno the
server reported, raised as the OSError subclass open() would raise (FileNotFoundError,
PermissionError...) when that sample is accessed.
"""
from __future__ import annotations

import errno
import mmap
import os
import socket
import struct
import threading
import weakref
from typing import Iterable, Sequence, Union

from .control import CONTROL_DIR

StrPath = Union[str, "os.PathLike[str]"]

MAGIC = 0x31424643
VERSION = 1
HELLO, HELLO_REPLY, READ, READ_REPLY, ERROR = 1, 2, 3, 4, 5
MAX_BODY = 16 << 20           # the protocol's largest frame body
MAX_PATH = 4096
TO_END = 2**64 - 1             # length: to the end of the file
ALIGN = 64                     # each sample begins at a 64-byte boundary of its window

_HEADER = struct.Struct("<IHHIIQ")          # magic, type, flags, body_bytes, reserved, tag
_HELLO = struct.Struct("<II")               # version, reserved
_HELLO_REPLY = struct.Struct("<IIQ")        # version, max_samples, buffer_bytes
_READ = struct.Struct("<QQII")              # window_offset, window_bytes, count, reserved
_ITEM = struct.Struct("<QQII")              # offset, length, path_bytes, reserved
_REPLY = struct.Struct("<II")               # count, reserved
_REPLY_ITEM = struct.Struct("<iIQQQ")       # error, reserved, buffer_offset, length, file_size
_ERROR = struct.Struct("<iI")               # error, reserved; then a UTF-8 message

# Linux constants that Python 3.11's os/fcntl do not all name.
MFD_CLOEXEC = getattr(os, "MFD_CLOEXEC", 0x0001)
MFD_ALLOW_SEALING = getattr(os, "MFD_ALLOW_SEALING", 0x0002)
F_ADD_SEALS = 1033
F_SEAL_SHRINK = 0x0002
MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0x8000)

DEFAULT_WINDOW_BYTES = 32 << 20   # a batch of 256 samples of 110 KiB, aligned, fits in one
DEFAULT_WINDOWS = 1               # a dataset closes its batch before the next (more: on demand)
MAX_WINDOW_BYTES = 1 << 30        # no larger windows for spilled batches (the server's default cap)
DEFAULT_TIMEOUT = 60.0            # seconds for one reply (the server's own deadlines are shorter)


class BatchUnavailable(OSError):
    """The mount has no usable batch path; `reason` says why (read through the mount instead)."""

    def __init__(self, reason: str) -> None:
        super().__init__(errno.EOPNOTSUPP, reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"batch path unavailable: {self.reason}"


class BatchError(OSError):
    """The server refused a request as a whole (its kError), or the connection broke."""


def socket_path(mount: StrPath) -> str:
    """The batch socket of the mount at `mount`, read from its control file `.clairfs/batch`.
    Raises BatchUnavailable when there is none."""
    control = os.path.join(os.fspath(mount), CONTROL_DIR, "batch")
    try:
        with open(control, "rb", buffering=0) as f:
            text = f.read(MAX_PATH + 2)
    except OSError as e:
        raise BatchUnavailable(f"no batch control file {control} ({e.strerror or e}): not a clairfs "
                               f"mount, a daemon without the batch path, or batch.enabled: false") from e
    path = text.decode("utf-8", "surrogateescape").rstrip("\n")
    if not path.startswith("/") or "\n" in path or "\0" in path:
        raise BatchUnavailable(f"{control} does not hold a socket path: {text[:200]!r}")
    return path


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    """n bytes from sock; each recv bounded by the socket's timeout (socket.timeout past it)."""
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise BatchError(errno.ECONNRESET, "the batch server closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _error_for(code: int, path: str) -> OSError:
    """The exception open(path) would raise for errno `code` (OSError picks the subclass)."""
    return OSError(code, os.strerror(code), path)


class _Buffer:
    """One memfd buffer, mapped, cut into equal windows; `free` lists the windows not held."""

    def __init__(self, window_bytes: int, windows: int) -> None:
        self.window_bytes, self.windows = window_bytes, windows
        self.size = window_bytes * windows
        fd = os.memfd_create("clairfs-batch", MFD_CLOEXEC | MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, self.size)
            import fcntl  # pylint: disable=import-outside-toplevel
            fcntl.fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK)
            self.map = mmap.mmap(fd, self.size, flags=mmap.MAP_SHARED | MAP_POPULATE,
                                 prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.view = memoryview(self.map)
        self.free = list(range(windows - 1, -1, -1))  # pop() hands out window 0 first

    def close_fd(self) -> None:
        """The descriptor is needed only for the hello; the mapping keeps the memory."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class _Lease:
    """A window held by a Batch: given back to its buffer's free list when released, if that
    buffer is still the client's (an old buffer's windows are never written again)."""

    __slots__ = ("client", "buffer", "index")

    def __init__(self, client: "BatchClient", buffer: _Buffer, index: int) -> None:
        self.client, self.buffer, self.index = client, buffer, index

    @property
    def offset(self) -> int:
        return self.index * self.buffer.window_bytes


def _release(client_ref, leases, views) -> None:
    exported = False
    for v in views:
        try:
            v.release()
        except BufferError:  # something still holds the view's memory (numpy, torch.frombuffer)
            exported = True
    client = client_ref()
    if client is not None and not exported:
        client._give_back(leases)  # pylint: disable=protected-access
    # With a view still exported, the windows are never written again: that memory stays with
    # whoever holds it, and the client makes a new buffer when it runs out of windows.


class Batch:
    """The samples of one request, by position: batch[i] is a memoryview of sample i's bytes or
    raises its OSError. Valid until close() (or until the Batch is garbage-collected)."""

    def __init__(self, client: "BatchClient", paths: list[str], leases: list[_Lease],
                 places: list[tuple]) -> None:
        self.paths = paths
        self._views: list = []
        self._results: list = []
        for path, place in zip(paths, places):
            err, buf, off, length, file_size = place
            if err:
                self._results.append(_error_for(err, path))
            else:
                v = buf.view[off:off + length]
                self._views.append(v)
                self._results.append(v)
        self.file_sizes = [p[4] for p in places]
        self._finalizer = weakref.finalize(self, _release, weakref.ref(client), leases, self._views)

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, i: int) -> memoryview:
        self._check_open()
        r = self._results[i]
        if isinstance(r, OSError):
            raise _error_for(r.errno, r.filename)
        return r

    def error(self, i: int) -> int:
        """Sample i's errno, 0 when it was read."""
        r = self._results[i]
        return r.errno if isinstance(r, OSError) else 0

    def results(self) -> list:
        """Each sample's memoryview, or its OSError (not raised)."""
        self._check_open()
        return list(self._results)

    def _check_open(self) -> None:
        if not self._finalizer.alive:
            raise ValueError("the Batch is closed: its samples' memory may hold another batch")

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Releases the samples' views and gives the windows back for other batches."""
        self._finalizer()

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


Sample = Union[StrPath, Sequence]


class BatchClient:
    """A connection to the batch server of one mount, with its buffer (see the module's doc)."""

    def __init__(self, mount: StrPath, *, window_bytes: int = DEFAULT_WINDOW_BYTES,
                 windows: int = DEFAULT_WINDOWS, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.mount = os.path.abspath(os.fspath(mount))
        self._prefix = self.mount.rstrip("/") + "/"
        self.window_bytes = max(ALIGN, -(-int(window_bytes) // ALIGN) * ALIGN)
        self.windows = max(1, int(windows))
        self.timeout = float(timeout)
        self.max_samples = 0
        self._lock = threading.RLock()  # a Batch's finalizer may run in a read's GC
        self._pid = -1
        self._sock: socket.socket | None = None
        self._buffer: _Buffer | None = None
        self._tag = 0
        self.hellos = 0   # how many buffers were handed to the server (growth shows here)
        self._want_window = 0  # the window size the next read should have (0: as it is)
        self._connect()

    # ------------------------------------------------------------ connection

    def _connect(self) -> None:
        """A new connection and buffer for this process (called again after a fork)."""
        self._drop()
        path = socket_path(self.mount)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.settimeout(self.timeout)
        try:
            sock.connect(path)
        except OSError as e:
            sock.close()
            raise BatchUnavailable(f"cannot connect to {path}: {e.strerror or e}") from e
        self._sock, self._pid = sock, os.getpid()
        try:
            self._hello(_Buffer(self.window_bytes, self.windows))
        except BatchError as e:
            self._drop()
            raise BatchUnavailable(f"the server refused the hello: {e.strerror}") from e
        except OSError as e:  # closed on us (over the server's limits), timed out, ...
            reason = f"the hello to {path} failed: {e.strerror or e}"
            if self._sock is not None:  # a refused connection has the server's kError waiting
                try:
                    self._sock.settimeout(min(self.timeout, 5.0))
                    self._receive(0, HELLO_REPLY)
                except BatchError as refusal:
                    reason = f"the server refused the connection: {refusal.strerror}"
                except OSError:
                    pass
            self._drop()
            raise BatchUnavailable(reason) from e
        except BaseException:
            self._drop()
            raise

    def _drop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()  # after a fork: only this process's copy of the descriptor
            except OSError:
                pass
        self._sock, self._buffer = None, None

    def close(self) -> None:
        """Closes the connection; open Batches stay readable (their memory is this process's)."""
        with self._lock:
            self._drop()

    def __enter__(self) -> "BatchClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_process(self) -> None:
        if self._pid != os.getpid() or self._sock is None:
            self._connect()

    def _send(self, ftype: int, body: bytes, fds: Sequence[int] = ()) -> int:
        self._tag += 1
        frame = _HEADER.pack(MAGIC, ftype, 0, len(body), 0, self._tag) + body
        assert self._sock is not None
        if fds:
            sent = socket.send_fds(self._sock, [frame], list(fds))
            if sent < len(frame):
                self._sock.sendall(frame[sent:])
        else:
            self._sock.sendall(frame)
        return self._tag

    def _receive(self, tag: int, expect: int) -> bytes:
        """The body of the reply to `tag`; kError raised as BatchError."""
        assert self._sock is not None
        try:
            header = _recv_exact(self._sock, _HEADER.size)
            magic, ftype, _flags, body_bytes, _res, rtag = _HEADER.unpack(header)
            if magic != MAGIC or body_bytes > MAX_BODY:
                raise BatchError(errno.EPROTO, f"not a batch frame (magic {magic:#x})")
            body = _recv_exact(self._sock, body_bytes)
        except socket.timeout as e:
            self._drop()  # the reply may still come: the stream's position is unknown now
            raise BatchError(errno.ETIMEDOUT, f"no reply from the batch server in {self.timeout} s") from e
        except (BatchError, OSError):
            self._drop()
            raise
        if ftype == ERROR:
            code, _ = _ERROR.unpack_from(body)
            message = body[_ERROR.size:].decode("utf-8", "replace")
            if rtag != tag:
                self._drop()
            raise BatchError(code or errno.EPROTO, f"batch server: {message}")
        if ftype != expect or rtag != tag:
            self._drop()
            raise BatchError(errno.EPROTO, f"unexpected frame type {ftype} tag {rtag}")
        return body

    def _hello(self, buffer: _Buffer) -> None:
        try:
            tag = self._send(HELLO, _HELLO.pack(VERSION, 0), [buffer.fd])
            body = self._receive(tag, HELLO_REPLY)
        finally:
            buffer.close_fd()
        version, self.max_samples, _size = _HELLO_REPLY.unpack_from(body)
        if version != VERSION:
            raise BatchError(errno.EPROTO, f"batch protocol version {version}, not {VERSION}")
        self._buffer = buffer
        self.window_bytes, self.windows = buffer.window_bytes, buffer.windows
        self.hellos += 1

    def _grow(self, window_bytes: int) -> None:
        """A new buffer with twice the windows (and windows of at least window_bytes)."""
        assert self._buffer is not None
        window_bytes = max(self._buffer.window_bytes, -(-window_bytes // ALIGN) * ALIGN)
        windows = self._buffer.windows * 2 if window_bytes == self._buffer.window_bytes else \
            self._buffer.windows
        self._hello(_Buffer(window_bytes, windows))

    def _give_back(self, leases: list[_Lease]) -> None:
        with self._lock:
            for lease in leases:
                if lease.buffer is self._buffer:
                    lease.buffer.free.append(lease.index)
            leases.clear()

    def _take_window(self) -> _Lease:
        assert self._buffer is not None
        if self._want_window > self._buffer.window_bytes:
            self._grow(self._want_window)  # the last batch spilled over: windows that hold one
        elif not self._buffer.free:
            self._grow(self._buffer.window_bytes)
        buf = self._buffer
        return _Lease(self, buf, buf.free.pop())

    # ------------------------------------------------------------ requests

    def relative(self, path: StrPath) -> str:
        """The mount-relative path the server takes for `path` (absolute under the mountpoint,
        or already relative to the mount's root). ValueError for a path outside the mount."""
        p = os.fspath(path)
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        if p.startswith("/"):
            if not p.startswith(self._prefix):
                raise ValueError(f"{p!r} is not under the mount {self.mount!r}")
            p = p[len(self._prefix):]
        return p

    def read(self, samples: Iterable[Sample]) -> Batch:
        """One batch: each sample a path or (path, offset, length). Returns the Batch."""
        items = []
        for s in samples:
            if isinstance(s, (tuple, list)):
                path, offset, length = s
                length = TO_END if length is None or length < 0 else int(length)
                items.append((self.relative(path), int(offset), length))
            else:
                items.append((self.relative(s), 0, TO_END))  # type: ignore[arg-type]
        with self._lock:
            self._check_process()
            return self._read_locked(items)

    def _read_locked(self, items: list[tuple[str, int, int]]) -> Batch:
        places: list = [None] * len(items)
        pending = list(range(len(items)))
        leases: list[_Lease] = []
        try:
            while pending:
                lease = self._take_window()
                leases.append(lease)
                step = self._fitting(items, pending)
                got = self._request(lease, [items[i] for i in step])
                retry = []
                for n, (i, reply) in enumerate(zip(step, got)):
                    err, _res, off, length, file_size = reply
                    if err != errno.ENOBUFS:
                        places[i] = (err, lease.buffer, off, length, file_size)
                        continue
                    retry.append(i)
                    if n == 0:
                        # It did not fit an empty window: make windows large enough for it
                        # (its size as the server saw it, or twice the window if it said none).
                        _path, start, want = items[i]
                        need = min(want, max(0, file_size - start)) + ALIGN
                        if need <= lease.buffer.window_bytes:
                            need = 2 * lease.buffer.window_bytes
                        self._grow(need)
                pending = retry + pending[len(step):]
            need = sum(-(-p[3] // ALIGN) * ALIGN for p in places if not p[0])
            if len(leases) > 1 and self._buffer is not None and need > self._buffer.window_bytes:
                # A batch larger than a window: the next of its size gets one window (so its
                # samples are not refused with ENOBUFS and sent again).
                self._want_window = min(need + need // 4, MAX_WINDOW_BYTES)
        except BaseException:
            for lease in leases:
                if lease.buffer is self._buffer:
                    lease.buffer.free.append(lease.index)
            raise
        return Batch(self, [p for p, _, _ in items], leases, places)

    def _fitting(self, items: list[tuple[str, int, int]], pending: list[int]) -> list[int]:
        """The first of `pending` that one request may carry: at most max_samples, and a body
        of at most MAX_BODY bytes."""
        room = MAX_BODY - _READ.size
        limit = min(len(pending), self.max_samples or len(pending))
        for n, i in enumerate(pending[:limit]):
            room -= _ITEM.size + len(os.fsencode(items[i][0]))
            if room < 0:
                if n == 0:
                    raise BatchError(errno.ENAMETOOLONG, f"path too long: {items[i][0][:100]!r}...")
                return pending[:n]
        return pending[:limit]

    def _request(self, lease: _Lease, items: list[tuple[str, int, int]]) -> list[tuple]:
        window_bytes = lease.buffer.window_bytes
        names = [os.fsencode(p) for p, _, _ in items]
        body = b"".join([_READ.pack(lease.offset, window_bytes, len(items), 0),
                         *(_ITEM.pack(off, length, len(n), 0) for n, (_, off, length) in zip(names, items)),
                         *names])
        if len(body) > MAX_BODY:
            raise BatchError(errno.E2BIG, f"a request of {len(items)} samples is over {MAX_BODY} bytes")
        tag = self._send(READ, body)
        reply = self._receive(tag, READ_REPLY)
        count, _ = _REPLY.unpack_from(reply)
        if count != len(items) or len(reply) != _REPLY.size + count * _REPLY_ITEM.size:
            self._drop()
            raise BatchError(errno.EPROTO, f"a reply of {count} items to a request of {len(items)}")
        got = list(_REPLY_ITEM.iter_unpack(memoryview(reply)[_REPLY.size:]))
        for err, _res, off, length, _size in got:  # buffer_offset: from the buffer's start
            if not err and (off < lease.offset or off + length > lease.offset + window_bytes):
                self._drop()
                raise BatchError(errno.EPROTO, "the server placed a sample outside its window")
        return got


def prefetch(client: BatchClient, batches: Iterable[Sequence[Sample]], depth: int = 2):
    """Yields client.read(b) for each batch b of `batches`, in order, with up to `depth` batches
    read ahead by a thread of its own while the caller works on the one it has: a training loop
    in one process that overlaps its reads with its compute, with no worker process and no copy
    (the views are into the client's buffer, as read() gives them).

    Close each Batch once done with it (or use it in a `with` block): its windows are then free
    for the batches read ahead; the client grows its buffer while depth + 1 Batches are held.
    A read's error is raised where its batch would have been yielded. Closing the generator (or
    leaving the loop) stops the thread after the read it is in; every wait is bounded by the
    client's timeout."""
    import queue  # pylint: disable=import-outside-toplevel
    if depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth}")
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()       # the consumer left: read no more
    ready_end = threading.Event()  # the thread put its last item

    def produce() -> None:
        try:
            for b in batches:
                if stop.is_set():
                    return
                try:
                    item = (True, client.read(b))
                except Exception as e:  # pylint: disable=broad-except  # raised in the consumer
                    item = (False, e)
                while not stop.is_set():
                    try:
                        ready.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                else:
                    if item[0]:
                        item[1].close()
                    return
                if not item[0]:
                    return
        finally:
            ready_end.set()

    thread = threading.Thread(target=produce, name="clairfs-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            deadline = client.timeout * 2 + 1
            while True:
                try:
                    ok, item = ready.get(timeout=0.1)
                    break
                except queue.Empty:
                    if ready_end.is_set() and ready.empty():
                        return
                    deadline -= 0.1
                    if deadline <= 0:
                        raise BatchError(errno.ETIMEDOUT, "no batch read ahead within the client's timeout")
            if not ok:
                raise item
            yield item
    finally:
        stop.set()
        thread.join(client.timeout + 1)
        while not ready.empty():  # read ahead and never yielded: their windows go back
            ok, item = ready.get_nowait()
            if ok:
                item.close()


_CLIENTS: dict[str, BatchClient] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(mount: StrPath, **kwargs) -> BatchClient:
    """This process's shared client of the mount at `mount` (made on first use; a forked child
    gets its own connection at its first read). BatchUnavailable as BatchClient."""
    key = os.path.abspath(os.fspath(mount))
    with _CLIENTS_LOCK:
        c = _CLIENTS.get(key)
        if c is None:
            c = _CLIENTS[key] = BatchClient(key, **kwargs)
        return c


def _after_fork_in_child() -> None:
    # The parent's clients stay in the table; each reconnects at its next use (pid check).
    global _CLIENTS_LOCK  # pylint: disable=global-statement
    _CLIENTS_LOCK = threading.Lock()  # it may have been held by another thread at the fork
    for c in _CLIENTS.values():
        c._lock = threading.RLock()  # pylint: disable=protected-access


os.register_at_fork(after_in_child=_after_fork_in_child)


def read_batch(mount: StrPath, samples: Iterable[Sample]) -> Batch:
    """client_for(mount).read(samples)."""
    return client_for(mount).read(samples)
