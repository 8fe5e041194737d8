#!/usr/bin/env python3
"""Reads files with a few threads and prints "<sha256 hex> <path>" per file, "ERR <errno> <path>"
for a read that failed. Used as a process of its own, so that tests can start it inside a
memory cgroup (tests/fs/cgrouputil.py).

Usage: read_hashes.py LIST THREADS [HEAD]   (LIST: one path a line, read in that order; HEAD:
read only the first HEAD bytes of each file and hash those, as a reader of headers does)
"""
import hashlib
import sys
import threading


def main():
    with open(sys.argv[1], encoding="utf-8", errors="surrogateescape") as f:
        paths = [ln.rstrip("\n") for ln in f if ln.strip()]
    head = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    it = iter(paths)
    lock = threading.Lock()
    out = []

    def reader():
        while True:
            with lock:
                path = next(it, None)
            if path is None:
                return
            h = hashlib.sha256()
            try:
                with open(path, "rb") as f:
                    if head:
                        h.update(f.read(head))
                    while not head:
                        b = f.read(1 << 20)
                        if not b:
                            break
                        h.update(b)
                line = f"{h.hexdigest()} {path}"
            except OSError as e:
                line = f"ERR {e.errno} {path}"
            with lock:
                out.append(line)

    threads = [threading.Thread(target=reader) for _ in range(int(sys.argv[2]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
