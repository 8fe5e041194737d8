"""The rows of the fault matrix (docs/reliability.md): each fn(ctx) injects one fault and
measures into ctx.row (fault_lib.Row). A row that raises is recorded with goal "ran" false.
This module holds the table (ROWS) and the rows of the store and the daemon; rows of access
are in fault_access.py, of versions in fault_versions.py, of freshness in fault_fresh.py."""
import errno
import os
import random
import shutil
import signal
import subprocess
import threading
import time
import types

import harness
from fault_access import row_acl_deny, row_chmod_revoke, row_register_private
from fault_lib import PY, make_tmpdir, mount_tmpfs, read_log, register, sha, touched_by, wait_for
from fault_versions import row_inode_reuse, row_rewrite_in_place, row_rewrite_same_size_mtime


def backend_row(ctx, ram="64MiB"):
    """clairfs over a faultfs mount of the dataset, every file planned."""
    backend = ctx.start_faultfs()
    d = ctx.mount(backend, cfg=ctx.config(ram=ram))
    return backend, d


def row_backing_eio(ctx):
    r = ctx.row
    backend, d = backend_row(ctx)
    bad = touched_by(ctx.files, "c1/")
    ctx.set_rules("open,read c1/* eio\n")
    register(d.mountpoint, ctx.files)
    rs = ctx.readers(d.mountpoint)
    time.sleep(ctx.p["run"])  # the readers run under the fault for this long
    r.add(*rs.stop(), touched=bad)
    r.goals["failed files fail, others read"] = r.errors.get("EIO", 0) > 0 or not bad
    r.goals["alive"] = r.alive = ctx.alive(d)
    ctx.set_rules("")
    res, hung = ctx.verify(d.mountpoint)
    before = r.collateral
    r.add(res, hung, strict=True)
    r.goals["right after the fault ends"] = r.collateral == before
    r.goals["no collateral errors"] = before == 0
    r.goals["logged"] = any("c1/" in line for line in read_log(d))
    r.goals["stops"] = ctx.stops(d)


def row_backend_enotconn(ctx):
    r = ctx.row
    backend, d = backend_row(ctx, ram="64MiB")
    half = sorted(ctx.files)[: len(ctx.files) // 2]
    register(d.mountpoint, half)   # half planned and cached, half read from the backend
    ctx.wait_prefetched(d.mountpoint, len(half))
    for rel in half:  # known to the kernel, as in a job past its first epoch
        os.stat(os.path.join(d.mountpoint, rel))
    rs = ctx.readers(d.mountpoint)
    time.sleep(ctx.p["run"] / 3)
    fp = ctx.faultfs[-1][0]
    fp.kill()
    fp.wait(timeout=10)
    time.sleep(ctx.p["run"])
    r.add(*rs.stop(), touched=set(ctx.files) - set(half))
    r.goals["cached files still read"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["logged"] = bool(read_log(d, warn_only=True))
    # The backend comes back on the same path: report whether clairfs reads it again.
    harness.release_mount(backend)
    ctx.start_faultfs(backend)
    res, hung = ctx.verify(d.mountpoint)
    errs = sum(1 for _, x in res if isinstance(x, int))
    r.notes.append(f"after the backend was remounted: {errs} of {len(res)} reads failed")
    r.add(res, hung, touched=set(ctx.files))
    r.goals["stops"] = ctx.stops(d)


def stall_row(ctx, cached):
    r = ctx.row
    backend, d = backend_row(ctx, ram="64MiB")
    if cached:
        register(d.mountpoint, ctx.files)
        n = ctx.wait_prefetched(d.mountpoint, len(ctx.files))
        r.notes.append(f"{n} of {len(ctx.files)} files prefetched before the stall")
        # A job past its first epoch: the kernel knows every file (name and attributes), so
        # only opens reach clairfs, which serves them from the tiers unverified.
        for rel in ctx.files:
            os.stat(os.path.join(d.mountpoint, rel))
    ctx.set_rules("all * stall\n")
    rs = ctx.readers(d.mountpoint)
    time.sleep(ctx.p["run"])
    res, hung = rs.stop()
    r.add(res, hung, touched=set() if cached else set(ctx.files))
    if cached:
        r.goals["cached files read"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    # Again once the root's attributes (kept 1 s while the store does not answer) expired:
    # the kernel then asks for them and for the root's ACLs on the way to the control files.
    time.sleep(1.5)
    r.goals["alive after the root's attributes expired"] = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d, held_by_kernel=True)   # with the backend still stalled
    if not cached:
        r.goals["logged"] = bool(read_log(d, warn_only=True))


def row_stall_cached(ctx):
    stall_row(ctx, cached=True)


def row_stall_uncached(ctx):
    stall_row(ctx, cached=False)


# Opens the files named after the mountpoint, prints "open", waits for a line on stdin, then
# reads and closes them all at once, one thread each, and prints what each read gave.
HOLD_OPEN = r"""
import os, sys, threading
mnt, names = sys.argv[1], sys.argv[2:]
fds = [os.open(os.path.join(mnt, n), os.O_RDONLY) for n in names]
print("open", flush=True)
sys.stdin.readline()
def read(fd):
    try:
        os.read(fd, 1 << 20)
        os.close(fd)
        print("ok", flush=True)
    except OSError as e:
        print(e.errno, flush=True)
for t in [threading.Thread(target=read, args=(fd,)) for fd in fds]:
    t.start()
"""


def row_stall_open(ctx):
    """Files opened from the backing store (nothing planned) before the store stalls, read
    and closed during the stall, more of them at once than the daemon has FUSE threads."""
    r = ctx.row
    backend, d = backend_row(ctx)
    names = sorted(ctx.files)[:8]  # fuse.threads is 4 in these tests
    holder = subprocess.Popen([PY, "-c", HOLD_OPEN, d.mountpoint] + names, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              start_new_session=True, text=True)
    harness.register_proc(holder)
    try:
        opened = holder.stdout.readline().strip() == "open"  # ends with the process at worst
        r.goals["files opened before the stall"] = opened
        ctx.set_rules("all * stall\n")
        holder.stdin.write("go\n")
        holder.stdin.flush()
        time.sleep(ctx.p["run"])  # the reads run into the stall for this long
        r.goals["alive"] = r.alive = ctx.alive(d)
        r.goals["stops"] = ctx.stops(d, held_by_kernel=True)
    finally:
        holder.kill()


def row_slow_backend(ctx):
    """Every backend read takes 20 ms: slower, never wrong; the stall rule's timed form."""
    r = ctx.row
    backend, d = backend_row(ctx)
    ctx.set_rules("read * stall 20\n")
    register(d.mountpoint, ctx.files)
    rs = ctx.readers(d.mountpoint)
    time.sleep(ctx.p["run"])
    r.add(*rs.stop(), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def row_ssd_full(ctx):
    r = ctx.row
    fs = mount_tmpfs(os.path.join(ctx.work, "ssdfs"), "24m")
    ctx.tmpfs.append(fs)
    total = sum(len(b) for b in ctx.files.values())
    d = ctx.mount(ctx.ds, cfg=ctx.config(ram="256KiB", ssd="16MiB", ssd_dir=f"{fs}/db"))
    # Another user of the disk fills it.
    with open(os.path.join(fs, "ballast"), "wb") as f:
        try:
            while True:
                f.write(b"\0" * (256 << 10))
                f.flush()
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    register(d.mountpoint, ctx.files, row=r)
    rs = ctx.readers(d.mountpoint)
    time.sleep(ctx.p["run"])
    r.add(*rs.stop(), strict=True)
    r.notes.append(f"dataset {total >> 10} KiB; SSD tier 16 MiB on a full 24 MiB tmpfs")
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["logged"] = bool(read_log(d, warn_only=True))
    if r.alive:
        os.unlink(os.path.join(fs, "ballast"))
        r.add(*ctx.verify(d.mountpoint), strict=True)
        r.goals["right after space is freed"] = r.collateral == 0
    r.goals["stops"] = ctx.stops(d)


def swap_row(ctx, kind):
    r = ctx.row
    d = ctx.mount(ctx.ds)
    register(d.mountpoint, ctx.files)
    ctx.wait_prefetched(d.mountpoint, len(ctx.files))
    victim, other = sorted(ctx.files)[3], sorted(ctx.files)[4]
    # During the swap: the old bytes (a read begun before), an error, or what a native read
    # gives now: the other file through the symlink; for the FIFO (opened O_NONBLOCK by the
    # readers, as a blocking open of a FIFO waits for a writer natively too) an empty read.
    now = {"symlink": ctx.expect[other], "fifo": {sha(b"")}}.get(kind, set())
    during = dict(ctx.expect)
    during[victim] = ctx.expect[victim] | now
    rs = ctx.readers(d.mountpoint, expect=during)
    time.sleep(ctx.p["run"] / 3)
    path = os.path.join(ctx.ds, victim)
    tmp = path + ".swap"
    if kind == "fifo":
        os.mkfifo(tmp)
        os.rename(tmp, path)
    elif kind == "symlink":
        os.symlink(os.path.basename(other), tmp)   # same directory (c3/ and c4/ differ)
        os.symlink(os.path.join("..", other), tmp + "2")
        os.unlink(tmp)
        os.rename(tmp + "2", path)
    else:
        os.unlink(path)
        os.mkdir(path)
    time.sleep(ctx.p["run"])
    r.add(*rs.stop(), touched={victim})
    # After: the victim must not give its old bytes any more.
    after = dict(ctx.expect)
    after[victim] = now
    res, hung = ctx.verify(d.mountpoint, expect=after)
    r.add(res, hung, touched={victim})
    r.notes.append("victim after the swap: " + ", ".join(
        sorted({str(errno.errorcode.get(x, x)) if isinstance(x, int) else x
                for p, x in res if p == victim})))
    r.goals["no collateral errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def row_swap_fifo(ctx):
    swap_row(ctx, "fifo")


def row_swap_symlink(ctx):
    swap_row(ctx, "symlink")


def row_swap_dir(ctx):
    swap_row(ctx, "dir")


def row_peer_kill(ctx):
    r = ctx.row
    if shutil.which("mpiexec") is None:
        r.notes.append("mpiexec missing")
        r.goals["mpiexec installed"] = False
        return
    total = sum(len(b) for b in ctx.files.values())
    cfg = ctx.config(ram=str(total // 3), ssd=str(total // 3), ssd_dir=f"{ctx.work}/ssd{{rank}}")
    cfg["cluster"] = {"plan_timeout": 30, "peer_timeout": 2, "down_for": 60,
                      "key_file": harness.write_cluster_key(os.path.join(ctx.work, "cluster.key"))}
    cfg_path = harness.write_config(os.path.join(ctx.work, "cluster.yaml"), cfg)
    mounts = [os.path.join(ctx.work, f"mnt{i}") for i in range(2)]
    for m in mounts:
        os.makedirs(m)
    log = os.path.join(ctx.work, "mpiexec.log")
    with open(log, "wb") as lf:
        mpi = subprocess.Popen(["mpiexec", "-disable-auto-cleanup", "-n", "2", harness.BIN,
                                "--cluster", "-c", cfg_path, ctx.ds, os.path.join(ctx.work, "mnt{rank}")],
                               stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                               start_new_session=True)
    harness.register_proc(mpi)
    for m in mounts:
        harness.register_mount(m)

    def stop():
        """Unmounts; each rank then exits, mpiexec after them; the group is killed last."""
        for m in mounts:
            harness.release_mount(m)
        harness.release_proc(mpi, grace=25.0)
        try:
            os.killpg(mpi.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # What Ctx.close and collect_logs need of a daemon; own_stop: close() only calls stop().
    ctx.daemons.append(types.SimpleNamespace(proc=mpi, mountpoint=mounts[0], log_path=log,
                                             stop=stop, own_stop=True))
    wait_for(lambda: all(harness.is_fuse_mounted(m) for m in mounts) or mpi.poll() is not None,
             30, "the ranks' mounts")
    names = sorted(ctx.files)
    halves = [names[0::2], names[1::2]]
    for m, h in zip(mounts, halves):
        register(m, h)
    rs = [ctx.readers(m, expect={p: ctx.expect[p] for p in h}, tag=f"rank{i}")
          for i, (m, h) in enumerate(zip(mounts, halves))]
    time.sleep(ctx.p["run"] / 3)
    victim = harness.mpi_rank_daemon_pid(1)
    if victim is None:
        raise RuntimeError("no daemon for rank 1")
    os.kill(victim, signal.SIGKILL)
    time.sleep(ctx.p["run"])
    r.add(*rs[0].stop(), strict=True)
    res1, hung1 = rs[1].stop()
    r.add(res1, hung1, touched=set(halves[1]))
    r.goals["survivor reads without errors"] = r.collateral == 0
    r.goals["mpiexec still runs"] = mpi.poll() is None
    r.goals["alive"] = r.alive = ctx.alive(types.SimpleNamespace(proc=mpi, mountpoint=mounts[0]))


def row_daemon_kill9(ctx):
    r = ctx.row
    ssd = os.path.join(ctx.work, "ssd")
    cfg = ctx.config(ram="128KiB", ssd="64MiB", ssd_dir=ssd)
    mnt = os.path.join(ctx.work, "mnt")
    restarts = []
    for i in range(ctx.p["kills"]):
        t0 = time.monotonic()
        d = ctx.mount(ctx.ds, mnt=mnt, cfg=cfg, over_stale=i > 0)
        restarts.append(time.monotonic() - t0)
        register(mnt, ctx.files)
        rs = ctx.readers(mnt)
        time.sleep(ctx.p["run"] / 3 + random.Random(i).random() * 0.3)
        d.proc.kill()
        d.proc.wait(timeout=10)
        # Readers now see ENOTCONN: an error, never a hang or a wrong byte.
        r.add(*rs.stop(), touched=set(ctx.files))
    d = ctx.mount(ctx.ds, mnt=mnt, cfg=cfg, over_stale=True)
    register(mnt, ctx.files)
    r.add(*ctx.verify(mnt), strict=True)
    st = ctx.stats(mnt)
    r.notes.append(f"{ctx.p['kills']} kills; restart took at most {max(restarts):.1f} s; "
                   f"after: served {st.get('served')}, errors {st.get('errors')}")
    r.goals["right after the restarts"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def row_cgroup_memory(ctx):
    """The daemon in a memory cgroup (192 MiB; a Slurm job with --mem) reads a planned epoch
    larger than the limit (quick 300 MB, full 600 MB of files on ext4, out of the page cache,
    so the daemon's reads of them are charged to its cgroup): no OOM kill, every byte right."""
    from cgrouputil import MemoryCgroup, write_uncached_dataset
    r = ctx.row
    limit = 192 << 20
    cg = MemoryCgroup.create(limit, tag="clairfs-fault")
    if cg is None:
        r.notes.append(f"not run: no memory cgroup can be made ({MemoryCgroup.why()})")
        return
    data = make_tmpdir("cgdata", on_ext4=True)
    try:
        ds = os.path.join(data, "ds")
        size = (300 if ctx.p["files"] < 200 else 600) << 20
        digests = write_uncached_dataset(ds, size, seed=5)
        expect = {rel: {h} for rel, h in digests.items()}
        cfg = ctx.config(ram="32MiB")
        cfg["cache"]["fetch_timeout"] = 30  # reclaim under the limit slows the store down
        cfg["cache"]["staging"]["capacity"] = "16MiB"
        cfg_path = harness.write_config(os.path.join(ctx.work, "cfg-cgroup.yaml"), cfg)
        mnt = os.path.join(ctx.work, "mnt")
        os.makedirs(mnt, exist_ok=True)
        d = harness.Daemon(r.name, ctx.work, ds, mnt, cfg_path, preexec_fn=cg.enter)
        ctx.daemons.append(d)
        d.start()
        register(mnt, digests, epochs=1)
        peak = [0]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], cg.anon())
                time.sleep(0.05)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.monotonic()
        try:
            rs = ctx.readers(mnt, expect=expect, until_stopped=False)
            r.add(*rs.wait(), strict=True)
        finally:
            stop.set()
            sampler.join(timeout=5)
        took = time.monotonic() - t0
        kills = cg.oom_kills()
        hwm = 0
        if d.proc.poll() is None:
            with open(f"/proc/{d.proc.pid}/status") as f:
                hwm = next((int(l.split()[1]) << 10 for l in f if l.startswith("VmHWM:")), 0)
        r.notes.append(f"cgroup v{cg.version} limit {limit >> 20} MiB, RAM tier 32 MiB, staging "
                       f"16 MiB; epoch {sum(os.path.getsize(os.path.join(ds, p)) for p in digests) >> 20}"
                       f" MiB in {len(digests)} files, read by {ctx.p['readers']} readers in "
                       f"{took:.1f} s; daemon peak RSS {hwm >> 20} MiB, cgroup peak usage "
                       f"{(cg.peak() or 0) >> 20} MiB, peak anon {peak[0] >> 20} MiB, limit hits "
                       f"{cg.limit_hits()}, OOM kills {kills}")
        r.goals["no OOM kill"] = kills == 0
        r.goals["no errors"] = r.collateral == 0
        r.goals["alive"] = r.alive = ctx.alive(d)
        r.goals["stops"] = ctx.stops(d)
    finally:
        for d in ctx.daemons:  # out of the group before it goes
            if d.proc is not None and d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait(timeout=10)
        if not cg.remove():
            r.notes.append(f"cgroup {cg.path} not removed")
        harness.remove_tmpdir(data)


ROWS = [
    ("backing_eio", row_backing_eio, "faultfs: open/read of c1/* fail with EIO, then heal"),
    ("backend_enotconn", row_backend_enotconn, "faultfs killed -9 under clairfs (ENOTCONN)"),
    ("stall_cached", row_stall_cached, "faultfs stalls every request; files already in RAM"),
    ("stall_uncached", row_stall_uncached, "faultfs stalls every request; nothing cached"),
    ("stall_open", row_stall_open, "faultfs stalls every request while 8 files opened from "
     "it are read and closed"),
    ("slow_backend", row_slow_backend, "faultfs delays every read 20 ms"),
    ("ssd_full", row_ssd_full, "the SSD tier's file system (tmpfs) filled by another writer"),
    ("swap_fifo", row_swap_fifo, "a planned file replaced by a FIFO"),
    ("swap_symlink", row_swap_symlink, "a planned file replaced by a symlink to another"),
    ("swap_dir", row_swap_dir, "a planned file replaced by a directory"),
    ("rewrite_same_size_mtime", row_rewrite_same_size_mtime,
     "cached files rewritten, same size and mtime (in place and by rename), then remount"),
    ("inode_reuse", row_inode_reuse, "a new file gets the inode number of a deleted one "
     "whose node the kernel still holds (ext4)"),
    ("chmod_revoke", row_chmod_revoke, "chmod 0600: another user (nobody) must be refused"),
    ("acl_deny", row_acl_deny, "setfacl u:nobody:---: nobody must be refused"),
    ("register_private", row_register_private, "a control.group member registers another "
     "user's private file (directory 0700) and a missing name"),
    ("peer_kill", row_peer_kill, "2 ranks under mpiexec; rank 1's daemon killed -9"),
    ("daemon_kill9", row_daemon_kill9, "daemon killed -9 mid-prefetch, restarted on the same "
     "mountpoint and SSD dir, N times"),
    ("rewrite_in_place", row_rewrite_in_place, "files rewritten in place (truncate+write, "
     "overwrite, append+truncate) under readers, no-open mode, page cache warm then dropped"),


    ("cgroup_memory", row_cgroup_memory, "the daemon in a 192 MiB memory cgroup reads a planned "
     "epoch larger than the limit"),
]
# Rows of their own modules.
from fault_batch import ROWS as BATCH_ROWS  # noqa: E402
from fault_fresh import ROWS as FRESH_ROWS  # noqa: E402

ROWS += FRESH_ROWS + BATCH_ROWS
EXT4_ROWS = {"inode_reuse"}
