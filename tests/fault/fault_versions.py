"""Fault-matrix rows of versions (docs/reliability.md): files rewritten with the same size and
mtime, a new file on a deleted one's inode number, files rewritten in place under readers.
The table of rows is in fault_rows.py."""
import os
import random
import time

from fault_lib import Readers, register, sha


def rewrite(path, data, keep_inode):
    """Rewrites path with data of the same size and restores its mtime (and atime): in place
    (`cp -p` over an existing file, `touch -r`) or by rename (`rsync -a`, `tar x`)."""
    st = os.stat(path)
    if keep_inode:
        with open(path, "r+b") as f:
            f.write(data)
    else:
        tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.rename(tmp, path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def row_rewrite_same_size_mtime(ctx):
    r = ctx.row
    d = ctx.mount(ctx.ds)
    register(d.mountpoint, ctx.files)
    ctx.wait_prefetched(d.mountpoint, len(ctx.files))
    names = sorted(ctx.files)
    victims = {names[5]: True, names[6]: False, names[7]: True}  # path -> in place
    new = {rel: bytes(b ^ 0xA5 for b in ctx.files[rel]) for rel in victims}
    during = dict(ctx.expect)   # a read begun before the rewrite may give the old version
    for rel in victims:
        during[rel] = ctx.expect[rel] | {sha(new[rel])}
    rs = ctx.readers(d.mountpoint, expect=during)
    time.sleep(ctx.p["run"] / 3)
    for rel, in_place in victims.items():
        rewrite(os.path.join(ctx.ds, rel), new[rel], in_place)
    time.sleep(ctx.p["run"])
    res, hung = rs.stop()
    r.add(res, hung, strict=True)
    after = dict(ctx.expect)
    for rel in victims:
        after[rel] = {sha(new[rel])}
    r.add(*ctx.verify(d.mountpoint, expect=after), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)
    # Across a remount: the SSD tier must not serve the old version either.
    ssd = os.path.join(ctx.work, "ssd")
    cfg = ctx.config(ram="64KiB", ssd="64MiB", ssd_dir=ssd)
    d2 = ctx.mount(ctx.ds, mnt=os.path.join(ctx.work, "mnt2"), cfg=cfg)
    register(d2.mountpoint, ctx.files)
    ctx.wait_prefetched(d2.mountpoint, len(ctx.files))
    r.add(*ctx.verify(d2.mountpoint, expect=after), strict=True)
    d2.stop()
    newer = {}
    for rel, in_place in victims.items():
        newer[rel] = bytes(b ^ 0x3C for b in ctx.files[rel])
        rewrite(os.path.join(ctx.ds, rel), newer[rel], in_place)
    d3 = ctx.mount(ctx.ds, mnt=os.path.join(ctx.work, "mnt2"), cfg=cfg)
    register(d3.mountpoint, ctx.files)
    after3 = dict(ctx.expect)
    for rel in victims:
        after3[rel] = {sha(newer[rel])}
    r.add(*ctx.verify(d3.mountpoint, expect=after3), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["stops"] = r.goals["stops"] and ctx.stops(d3)


def row_inode_reuse(ctx):
    r = ctx.row
    d = ctx.mount(ctx.ds)
    victim = sorted(ctx.files)[8]
    vdir = os.path.join(ctx.ds, os.path.dirname(victim))
    path = os.path.join(ctx.ds, victim)
    # A lookup through the mount: the kernel keeps the victim's node (entry and attribute
    # timeouts), while nothing holds the file open, so its inode can be freed.
    res, hung = ctx.verify(d.mountpoint, paths=[victim])
    r.add(res, hung, strict=True)
    old_ino = os.stat(path).st_ino
    os.unlink(path)
    newcomer = None
    for i in range(5000):   # ext4 hands out the lowest free inode of the group
        cand = os.path.join(vdir, f"new{i}.bin")
        fd = os.open(cand, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        ino = os.fstat(fd).st_ino
        os.close(fd)
        if ino == old_ino:
            newcomer = cand
            break
    if newcomer is None:
        r.notes.append("the file system did not reuse the inode number: not reproduced")
        r.goals["reproduced"] = False
        return
    data = random.Random(7).randbytes(7777)
    with open(newcomer, "wb") as f:
        f.write(data)
    rel_new = os.path.relpath(newcomer, ctx.ds)
    # The victim's path comes back as another file.
    again = bytes(b ^ 0x77 for b in ctx.files[victim])
    with open(path, "wb") as f:
        f.write(again)
    r.notes.append(f"{rel_new} got inode {old_ino} of {victim}, whose node the kernel holds")
    expect = {rel_new: {sha(data)}, victim: {sha(again)}}
    other = dict(ctx.owner)
    other[sha(again)] = victim + " (new)"
    other[sha(ctx.files[victim])] = victim + " (old)"
    rs = Readers(ctx, d.mountpoint, expect, n=1, until_stopped=False, other=other, tag="v")
    ctx.reader_sets.append(rs)
    r.add(*rs.wait(), touched=set())
    rest = {k: v for k, v in ctx.expect.items() if k != victim}
    r.add(*ctx.verify(d.mountpoint, expect=rest), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def row_rewrite_in_place(ctx):
    """Issue 25, item 2: files rewritten in place (truncated then written, overwritten,
    appended to then truncated) while readers read them through the mount (no-open mode, the
    page cache warm, then dropped before every read; small and chunked files, planned and
    not). Every 8-byte word encodes (version, offset): a read with a byte no version held
    (zeros, another offset) or pages of two versions the file never held together is wrong."""
    import rewriteutil as ru   # tests/fs, on the path through fault_matrix.py
    r = ctx.row
    rw = os.path.join(ctx.ds, "rw")
    files, hows = {}, {}
    os.makedirs(rw)
    for kind, size in (("small", 48 << 10), ("big", 5 * (64 << 10) - 8)):
        for how in ("truncate", "inplace", "append"):
            for plan in ("p", "u"):
                rel = f"{plan}-{kind}-{how}.bin"
                files[rel], hows[rel] = size, how
                with open(os.path.join(rw, rel), "wb") as f:
                    f.write(ru.version_bytes(1, size))
    cfg = ctx.config(keep_cache=True)
    cfg["fuse"]["open_mode"] = "none"
    cfg["cache"].update({"chunk_size": "64KiB", "record_chunk_size": "64KiB"})
    d = ctx.mount(ctx.ds, cfg=cfg)
    register(d.mountpoint, [f"rw/{rel}" for rel in files if rel.startswith("p-")] * 20)
    mnt_rw = os.path.join(d.mountpoint, "rw")
    totals = []
    for drop in (False, True):
        counts, rewrites = ru.run_rewrites(rw, mnt_rw, files, hows, ctx.p["run"], drop,
                                           readers=ctx.p["readers"], seed=25 + drop)
        totals.append(counts)
        r.wrong += counts.bad   # a byte no version held
        r.wrong_examples.extend(counts.examples[:5 - len(r.wrong_examples)])
        for name, n in counts.errors.items():
            r.errors[name] = r.errors.get(name, 0) + n
        r.notes.append(f"page cache {'dropped' if drop else 'warm'}: {counts.summary()}; "
                       f"{rewrites} rewrites")
    r.goals["reads checked"] = all(c.reads >= 50 and c.ok > 0 for c in totals)
    # Pages of two versions in one read() the file never held together: none
    # (fs/core/page_versions.h, test_rewrite.py).
    r.goals["no mixed reads"] = all(c.mixed == 0 for c in totals)
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)
