"""Dataset trees for the real-mount tests: builders, snapshots, hashes, diffs."""
import hashlib
import os
import random
import stat
from concurrent.futures import ThreadPoolExecutor

UNICODE_NAME = "ünï cødé ✓"
QUOTE_NAME = "it's a \"quoted\" name.txt"


def write_file(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def build_odd_tree(base, many=0, hardlink=False):
    """Builds base/ds, plus base/outside and base/outside_dir that some symlinks lead to.

    Returns (dataset path, [relative paths of the symlinks that lead outside the tree]).
    many > 0 adds the directory 'many' with that many files of 1-16 bytes.
    """
    rng = random.Random(1234)
    ds = os.path.join(base, "ds")
    os.makedirs(ds)
    write_file(os.path.join(base, "outside"), b"outside the dataset\n")
    os.makedirs(os.path.join(base, "outside_dir"))
    write_file(os.path.join(base, "outside_dir", "secret"), b"secret\n")

    def mk(rel, data=b""):
        p = os.path.join(ds, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        write_file(p, data)

    mk("plain.txt", b"hello clairfs\n")
    mk("empty")
    mk("big.bin", rng.randbytes(3 * 1024 * 1024 + 321))
    mk("with space.txt", b"spaces\n")
    mk(f"{UNICODE_NAME}/{UNICODE_NAME}.txt", "ünïcødé ✓\n".encode())
    mk("#hash.bin", rng.randbytes(777))
    mk("-dash.txt", b"dash\n")
    mk(QUOTE_NAME, b"quotes\n")
    mk("sub/a.dat", rng.randbytes(5000))
    mk("sub/deeper/deepest/file.dat", rng.randbytes(12345))
    mk("sub/deeper/#also hash", b"x")
    os.makedirs(os.path.join(ds, "emptydir"))
    os.makedirs(os.path.join(ds, "links"))
    os.symlink("../plain.txt", os.path.join(ds, "links", "rel_file"))
    os.symlink("../sub", os.path.join(ds, "links", "rel_dir"))
    os.symlink("deeper/deepest/file.dat", os.path.join(ds, "sub", "link_in_sub"))
    outside = {
        "links/out_rel": "../../outside",
        "links/out_rel_dir": "../../outside_dir",
        "links/out_abs_file": "/etc/hostname",
        "links/out_abs_dir": "/etc",
        f"{UNICODE_NAME}/up_and_out": "../../outside",
    }
    for rel, target in outside.items():
        os.symlink(target, os.path.join(ds, rel))
    if hardlink:
        mk("hard/one", b"linked twice\n")
        os.link(os.path.join(ds, "hard", "one"), os.path.join(ds, "hard", "two"))
    if many:
        d = os.path.join(ds, "many")
        os.makedirs(d)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        payload = rng.randbytes(16)
        for i in range(many):
            fd = os.open(os.path.join(d, f"f{i:06d}"), flags, 0o644)
            os.write(fd, payload[: 1 + i % 16])
            os.close(fd)
    return ds, sorted(outside)


def _kind(mode):
    if stat.S_ISLNK(mode):
        return "l"
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISREG(mode):
        return "f"
    return "o"


def _entry(path, dtype):
    st = os.lstat(path)
    target = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    return {"dtype": dtype, "type": _kind(st.st_mode), "mode": st.st_mode, "size": st.st_size,
            "mtime_ns": st.st_mtime_ns, "nlink": st.st_nlink, "uid": st.st_uid,
            "gid": st.st_gid, "target": target}


def snapshot(root, keep=None):
    """{relative path: entry dict} for root ('.') and everything below it, symlinks not followed.

    'dtype' is the type readdir reported (d_type, or lstat where d_type is DT_UNKNOWN).
    keep (a function of the relative path): when given, only the entries it keeps are lstat'ed
    and recorded (directories it drops are not entered).
    """
    snap = {".": _entry(root, "d")}
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(os.path.join(root, rel_dir)) as it:
            for e in it:
                rel = os.path.join(rel_dir, e.name) if rel_dir else e.name
                if keep is not None and not keep(rel):
                    continue
                if e.is_symlink():
                    dtype = "l"
                elif e.is_dir(follow_symlinks=False):
                    dtype = "d"
                    stack.append(rel)
                elif e.is_file(follow_symlinks=False):
                    dtype = "f"
                else:
                    dtype = "o"
                snap[rel] = _entry(e.path, dtype)
    return snap


def sha256_file(path):
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            h.update(b)
    finally:
        os.close(fd)
    return h.hexdigest()


def hashes(root, snap, threads=4):
    """{relative path: sha256} of every regular file in snap, read under root."""
    rels = sorted(r for r, e in snap.items() if e["type"] == "f")
    with ThreadPoolExecutor(threads) as pool:
        digests = pool.map(lambda r: sha256_file(os.path.join(root, r)), rels, chunksize=1000)
        return dict(zip(rels, digests))


def diff(expected, actual, fields=None, limit=25):
    """Human-readable differences between two snapshots (or two plain dicts)."""
    out = []
    for rel in sorted(set(expected) - set(actual)):
        out.append(f"missing in mount: {rel!r}")
    for rel in sorted(set(actual) - set(expected)):
        out.append(f"unexpected in mount: {rel!r}")
    for rel in sorted(set(expected) & set(actual)):
        e, a = expected[rel], actual[rel]
        if isinstance(e, dict):
            keys = fields or e.keys()
            bad = [f"{k}: {e[k]!r} != {a.get(k)!r}" for k in keys if e[k] != a.get(k)]
            if bad:
                out.append(f"{rel!r}: " + ", ".join(bad))
        elif e != a:
            out.append(f"{rel!r}: {e!r} != {a!r}")
    if len(out) > limit:
        out = out[:limit] + [f"... and {len(out) - limit} more differences"]
    return out
