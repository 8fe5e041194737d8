"""A minimal batch-path client for the fs tests, written from docs/batch-path.md (the wire
format) and independent of the C++ client: a sealed memfd buffer handed over at hello, one
kRead, the reply's samples sliced out of the buffer. Also runnable as a script (for a child
run as another user): `batchutil.py SOCKET PATH...` prints one JSON list of [errno, hex bytes]
per path, or {"error": errno} when the connection or the request as a whole fails."""
import errno
import fcntl
import json
import mmap
import os
import select
import socket
import struct
import sys

MAGIC = 0x31424643
HEADER = struct.Struct("<IHHIIQ")
HELLO, HELLO_REPLY, READ, READ_REPLY, ERROR = 1, 2, 3, 4, 5
TO_END = (1 << 64) - 1
TIMEOUT = 30.0


class BatchError(OSError):
    """A kError from the server: errno is its error. Failures of the connection itself are
    plain OSErrors (ETIMEDOUT, EPIPE, EPROTO for bytes that are no frame)."""


def frame(ftype, tag, body):
    return HEADER.pack(MAGIC, ftype, 0, len(body), 0, tag) + body


def recv_exact(sock, n):
    out = bytearray()
    while len(out) < n:
        r, _, _ = select.select([sock], [], [], TIMEOUT)
        if not r:
            raise OSError(errno.ETIMEDOUT, "no answer in time")
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise OSError(errno.EPIPE, "connection closed")
        out += chunk
    return bytes(out)


def recv_frame(sock):
    magic, ftype, flags, body_bytes, reserved, tag = HEADER.unpack(recv_exact(sock, HEADER.size))
    if magic != MAGIC or flags or reserved:
        raise OSError(errno.EPROTO, "bad frame")
    body = recv_exact(sock, body_bytes)
    if ftype == ERROR:
        err = struct.unpack_from("<i", body)[0]
        raise BatchError(err, body[8:].decode(errors="replace"))
    return ftype, tag, body


class Client:
    def __init__(self, socket_path, buffer_bytes=1 << 24):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(socket_path)
        self.fd = os.memfd_create("batch-test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, buffer_bytes)
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
        self.buf = mmap.mmap(self.fd, buffer_bytes, mmap.MAP_SHARED)
        self.size = buffer_bytes
        self.tag = 1
        socket.send_fds(self.sock, [frame(HELLO, self.tag, struct.pack("<II", 1, 0))], [self.fd])
        ftype, _, body = recv_frame(self.sock)
        assert ftype == HELLO_REPLY, ftype
        _, self.max_samples, self.buffer_bytes = struct.unpack("<IIQ", body)

    def read(self, items, window_offset=0, window_bytes=None):
        """items: paths or (path, offset, length). Returns [(errno, bytes)] in item order."""
        if window_bytes is None:
            window_bytes = self.size - window_offset
        items = [(i, 0, TO_END) if isinstance(i, str) else i for i in items]
        paths = [p.encode() for p, _, _ in items]
        body = struct.pack("<QQII", window_offset, window_bytes, len(items), 0)
        for (_, off, length), p in zip(items, paths):
            body += struct.pack("<QQII", off, length, len(p), 0)
        body += b"".join(paths)
        self.tag += 1
        self.sock.sendall(frame(READ, self.tag, body))
        ftype, tag, reply = recv_frame(self.sock)
        assert ftype == READ_REPLY and tag == self.tag, (ftype, tag)
        count = struct.unpack_from("<I", reply)[0]
        out = []
        for k in range(count):
            err, _, off, length, _size = struct.unpack_from("<iIQQQ", reply, 8 + 32 * k)
            out.append((err, bytes(self.buf[off:off + length]) if err == 0 else b""))
        return out

    def close(self):
        self.buf.close()
        os.close(self.fd)
        self.sock.close()


def main(argv):
    try:
        c = Client(argv[0])
        try:
            print(json.dumps([[e, b.hex()] for e, b in c.read(argv[1:])]))
        finally:
            c.close()
    except OSError as e:
        print(json.dumps({"error": e.errno}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
