"""Fault-matrix rows of the batch path (docs/batch-path.md): hostile clients of the daemon's
batch socket. Each row asserts the clear error the client gets (a kError's errno, a per-sample
errno, or the connection cut off) and that another client is served right after, with every
byte right, while the mount goes on. The table of rows is in fault_rows.py; the client is the
fs tests' (tests/fs/batchutil.py, written from the doc)."""
import errno
import json
import os
import select
import socket
import struct
import time

import batchutil
from batchutil import HEADER, MAGIC, READ, Client, frame
from fault_lib import wait_for

SEND_TIMEOUT = 1  # batch.send_timeout of these rows (seconds): a silent client is cut soon


def batch_mount(ctx):
    d = ctx.mount(ctx.ds, cfg=ctx.config(batch={"send_timeout": SEND_TIMEOUT}))
    with open(os.path.join(d.mountpoint, ".clairfs", "batch")) as f:
        sock = f.read().rstrip("\n")
    return d, sock


def batch_stats(d):
    with open(os.path.join(d.mountpoint, ".clairfs", "stats")) as f:
        return json.load(f)["batch"]


def others_served(ctx, sock):
    """A fresh client reads every file in one batch: true when every byte is right."""
    names = sorted(ctx.files)
    c = Client(sock, buffer_bytes=64 << 20)
    try:
        got = c.read(names)
    finally:
        c.close()
    bad = [n for n, (e, b) in zip(names, got) if e != 0 or b != ctx.files[n]]
    if bad:
        ctx.row.wrong += len(bad)
        ctx.row.wrong_examples.extend(bad[:5])
    return not bad


def read_error(s, timeout=10.0):
    """The errno of the kError s receives next (None at EOF or timeout): frames before it that
    are not kError are skipped."""
    s.settimeout(timeout)
    try:
        while True:
            batchutil.recv_frame(s)
    except batchutil.BatchError as e:
        return e.errno
    except OSError:
        return None


def closed_by_server(s, timeout=10.0):
    """True once s reads EOF (or a reset) within timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([s], [], [], max(0.0, end - time.monotonic()))
        if not r:
            break
        try:
            if not s.recv(1 << 16):
                return True
        except ConnectionResetError:
            return True
    return False


def finish(ctx, d, sock):
    r = ctx.row
    r.goals["another client served"] = others_served(ctx, sock)
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def row_batch_huge_request(ctx):
    """A request of 10^6 samples (a body over 16 MiB) and one of 100,000 (over max_samples):
    kError E2BIG and the connection closed, each."""
    r = ctx.row
    d, sock = batch_mount(ctx)
    c = Client(sock)
    n = 1_000_000
    body = struct.pack("<QQII", 0, 1 << 20, n, 0)
    item = struct.pack("<QQII", 0, (1 << 64) - 1, 1, 0)
    body += item * n + b"x" * n
    try:
        c.sock.sendall(frame(READ, 7, body))
    except OSError:
        pass  # the server refused at the header and closed: the kError waits to be read
    e1 = read_error(c.sock)
    c.close()
    r.notes.append(f"10^6 samples ({len(body) >> 20} MiB body): {errno.errorcode.get(e1, e1)}")
    c = Client(sock)
    n = 100_000
    body = struct.pack("<QQII", 0, 1 << 20, n, 0) + item * n + b"x" * n
    try:
        c.sock.sendall(frame(READ, 8, body))
    except OSError:
        pass
    e2 = read_error(c.sock)
    closed = closed_by_server(c.sock)
    c.close()
    r.notes.append(f"100,000 samples (over max_samples): {errno.errorcode.get(e2, e2)}")
    r.goals["E2BIG for each"] = e1 == errno.E2BIG and e2 == errno.E2BIG
    r.goals["connection closed"] = closed
    finish(ctx, d, sock)


def row_batch_outside_paths(ctx):
    """Paths that lead outside the dataset or through links: a per-sample errno each, no
    byte of anything outside, the rest of the batch served."""
    r = ctx.row
    os.symlink("/etc/passwd", os.path.join(ctx.ds, "c0", "out"))
    os.symlink("..", os.path.join(ctx.ds, "c1", "up"))
    d, sock = batch_mount(ctx)
    hostile = {"../x": errno.EINVAL, "/etc/passwd": errno.EINVAL, "c0/../../x": errno.EINVAL,
               "c0/out": errno.ELOOP, "c1/up/c0/f0000.bin": errno.ELOOP,
               ".clairfs/stats": errno.ELOOP, "c0/./f0000.bin": errno.EINVAL,
               "c0//f0000.bin": errno.EINVAL, "c0/f0000.bin\0x": errno.EINVAL,
               "a" * 5000: errno.EINVAL}
    good = sorted(ctx.files)[:4]
    c = Client(sock)
    try:
        got = c.read(list(hostile) + good)
    finally:
        c.close()
    errs = [e for e, _ in got]
    wrong = [(p, errno.errorcode.get(e, e)) for (p, want), e in zip(hostile.items(), errs)
             if e != want]
    r.notes.append(f"{len(hostile)} hostile paths; unexpected: {wrong[:5]}")
    r.goals["each refused with its errno"] = not wrong
    r.goals["no bytes for them"] = all(not b for _, b in got[:len(hostile)])
    r.goals["the rest served"] = [b for _, b in got[len(hostile):]] == [ctx.files[p] for p in good]
    finish(ctx, d, sock)


def row_batch_garbage(ctx):
    """Random bytes instead of a frame, a hello with a regular file's descriptor instead of a
    sealed memfd, and a frame with a wrong reserved field."""
    r = ctx.row
    d, sock = batch_mount(ctx)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    s.sendall(os.urandom(4096))
    e1 = read_error(s)
    closed = closed_by_server(s)
    s.close()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    with open(os.path.join(ctx.ds, sorted(ctx.files)[0]), "rb+") as f:
        socket.send_fds(s, [frame(batchutil.HELLO, 1, struct.pack("<II", 1, 0))], [f.fileno()])
    e2 = read_error(s)
    s.close()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    s.sendall(HEADER.pack(MAGIC, READ, 0, 24, 7, 1) + bytes(24))
    e3 = read_error(s)
    s.close()
    r.notes.append("garbage: %s, a file for a buffer: %s, reserved field set: %s" % tuple(
        errno.errorcode.get(e, e) for e in (e1, e2, e3)))
    r.goals["EPROTO and closed"] = e1 == errno.EPROTO and closed
    r.goals["not a memfd: EINVAL"] = e2 == errno.EINVAL
    r.goals["reserved field: EPROTO"] = e3 == errno.EPROTO
    r.goals["counted"] = batch_stats(d)["protocol_errors"] >= 3
    finish(ctx, d, sock)


def row_batch_never_reads(ctx):
    """A client asks for a batch whose reply outgrows the socket's buffer and never reads it:
    cut off after batch.send_timeout, while another client is served meanwhile."""
    r = ctx.row
    d, sock = batch_mount(ctx)
    c = Client(sock)
    name = sorted(ctx.files)[0].encode()
    n = 60_000  # a 1.9 MiB reply
    body = struct.pack("<QQII", 0, 0, n, 0) + struct.pack("<QQII", 0, 0, len(name), 0) * n
    body += name * n
    c.sock.sendall(frame(READ, 3, body))
    served_meanwhile = others_served(ctx, sock)
    t0 = time.monotonic()
    try:
        cut = wait_for(lambda: batch_stats(d)["protocol_errors"] >= 1, 30, "the client cut off")
    except AssertionError:
        cut = False
    r.notes.append(f"cut off {time.monotonic() - t0:.1f} s after the other client was served "
                   f"(send_timeout {SEND_TIMEOUT} s)")
    closed = closed_by_server(c.sock, timeout=30)
    c.close()
    r.goals["served meanwhile"] = served_meanwhile
    r.goals["cut off"] = bool(cut) and closed
    finish(ctx, d, sock)


def row_batch_disconnect(ctx):
    """Clients that send a large batch and hang up before the reply: the server drops the rest
    of the work; every other client is served, the daemon stops in time."""
    r = ctx.row
    d, sock = batch_mount(ctx)
    names = [p.encode() for p in sorted(ctx.files)]
    for k in range(8):
        c = Client(sock)
        n = 20_000
        items = [names[i % len(names)] for i in range(n)]
        body = struct.pack("<QQII", 0, c.size, n, 0)
        body += b"".join(struct.pack("<QQII", 0, (1 << 64) - 1, len(p), 0) for p in items)
        body += b"".join(items)
        c.sock.sendall(frame(READ, 1, body))
        c.close()
    r.goals["others served after"] = others_served(ctx, sock)
    r.goals["served again"] = others_served(ctx, sock)
    finish(ctx, d, sock)


ROWS = [
    ("batch_huge_request", row_batch_huge_request,
     "batch clients ask for 10^6 samples (a 40 MiB body) and for 100,000 (over max_samples)"),
    ("batch_outside_paths", row_batch_outside_paths,
     "a batch of paths leading outside the dataset or through symlinks, among good ones"),
    ("batch_garbage", row_batch_garbage,
     "batch clients send random bytes, a file instead of a memfd, a bad reserved field"),
    ("batch_never_reads", row_batch_never_reads,
     "a batch client never reads its 1.9 MiB reply (batch.send_timeout 1 s)"),
    ("batch_disconnect", row_batch_disconnect,
     "8 batch clients each send 20,000 samples and hang up at once"),
]
