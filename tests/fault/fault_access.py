"""Fault-matrix rows of access (docs/reliability.md): a file another user could read stops
being readable (mode bits, ACL), and a control.group member registers names it may not see.
The table of rows is in fault_rows.py."""
import errno
import os
import shutil
import subprocess
import time

import harness
from fault_lib import NOBODY, PY, REVOKE_WINDOW, register


def nobody_can_read(path):
    p = subprocess.run(harness.setpriv(NOBODY) +
                       [PY, "-c", "import sys;open(sys.argv[1],'rb').read()", path],
                       capture_output=True, timeout=30)
    return p.returncode == 0


def revoke_row(ctx, revoke):
    """A file readable by another user (nobody) through the root mount stops being so."""
    r = ctx.row
    d = ctx.mount(ctx.ds)
    names = sorted(ctx.files)
    early, late = names[9], names[10]
    revoke(os.path.join(ctx.ds, early))   # before the mount saw the file
    if nobody_can_read(os.path.join(ctx.ds, early)):
        r.notes.append("the dataset's file system ignores the change: not reproduced")
        r.goals["reproduced"] = False
        return
    register(d.mountpoint, ctx.files)
    ctx.wait_prefetched(d.mountpoint, len(ctx.files))
    # nobody reads everything else, and is refused the revoked file.
    r.add(*ctx.verify(d.mountpoint, uid=NOBODY, paths=[p for p in names if p != early]),
          strict=True)
    res, hung = ctx.verify(d.mountpoint, uid=NOBODY, paths=[early])
    r.add(res, hung, touched={early}, widened=True)
    # A file nobody has just read is revoked: refused within REVOKE_WINDOW.
    r.add(*ctx.verify(d.mountpoint, uid=NOBODY, paths=[late]), strict=True)
    revoke(os.path.join(ctx.ds, late))
    t0, refused = time.monotonic(), None
    while time.monotonic() - t0 < REVOKE_WINDOW and refused is None:
        res, hung = ctx.verify(d.mountpoint, uid=NOBODY, paths=[late])
        r.hung += len(hung)
        if res and all(isinstance(x, int) for _, x in res):
            refused = res[0][1]
    if refused is None:
        r.wrong += 1
        r.wrong_examples.append(f"{late}: still readable {REVOKE_WINDOW:.0f} s after revoking")
    else:
        r.notes.append(f"revocation took effect after {time.monotonic() - t0:.1f} s "
                       f"({errno.errorcode.get(refused, refused)})")
        if refused not in (errno.EACCES, errno.EPERM):
            r.goals["refused with EACCES"] = False
    # The owner still reads the revoked files.
    r.add(*ctx.verify(d.mountpoint, paths=[early, late]), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def row_chmod_revoke(ctx):
    revoke_row(ctx, lambda p: os.chmod(p, 0o600))


def row_acl_deny(ctx):
    if shutil.which("setfacl") is None:
        ctx.row.notes.append("setfacl missing (Debian package acl)")
        ctx.row.goals["setfacl installed"] = False
        return
    revoke_row(ctx, lambda p: subprocess.run(["setfacl", "-m", f"u:{NOBODY}:---", p],
                                             check=True, timeout=10))


# Writes argv[2] to the manifest at argv[1] (one write, then close) as the user setpriv made;
# prints OK, or WRITE/CLOSE and the errno where it failed.
MANIFEST_CHILD = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
try:
    os.write(fd, sys.argv[2].encode())
except OSError as e:
    print("WRITE", e.errno)
    sys.exit(0)
try:
    os.close(fd)
except OSError as e:
    print("CLOSE", e.errno)
    sys.exit(0)
print("OK")
"""


def register_as(uid, gid, groups, mnt, text):
    """Replaces the manifest with text as uid (gid, supplementary groups): OK or where it
    failed."""
    p = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}",
                        f"--groups={','.join(map(str, groups))}", PY, "-I", "-S", "-c",
                        MANIFEST_CHILD, os.path.join(mnt, ".clairfs", "manifest"), text],
                       capture_output=True, text=True, timeout=30)
    return p.stdout.strip() or f"child failed: {p.stderr.strip()[-200:]}"


def row_register_private(ctx):
    """Issue 25 item 3: a control.group member (nobody) registers a file in a directory
    another user keeps private (0700), and a name that does not exist there: the same
    refusal, and nothing fetched."""
    import grp
    r = ctx.row
    group = next((g for g in grp.getgrall() if g.gr_gid not in (0, NOBODY)), None)
    if group is None or shutil.which("setpriv") is None:
        r.notes.append("needs setpriv and a group other than root's")
        r.goals["setpriv and a group"] = False
        return
    owner = 64126  # the private directory's owner: no account needed
    private_dir = os.path.join(ctx.ds, "c7")
    secret = sorted(rel for rel in ctx.files if rel.startswith("c7/"))[0]
    os.chown(private_dir, owner, owner)
    os.chmod(private_dir, 0o700)
    d = ctx.mount(ctx.ds, cfg=ctx.config(control={"group": group.gr_name}))
    mnt = d.mountpoint
    outcome, report = {}, {}
    for rel in (secret, "c7/no-such-file"):
        outcome[rel] = register_as(NOBODY, NOBODY, [group.gr_gid], mnt, rel + "\n")
        with open(os.path.join(mnt, ".clairfs", "errors")) as f:
            report[rel] = f.read().replace(rel, "PATH")
    r.notes.append(f"private file: {outcome[secret]}; missing name: "
                   f"{outcome['c7/no-such-file']}; report: {report[secret].strip()[:160]!r}")
    r.goals["refused"] = all(o != "OK" for o in outcome.values())
    r.goals["refused at the write"] = all(o == f"WRITE {errno.EINVAL}" for o in outcome.values())
    r.goals["same refusal"] = (outcome[secret] == outcome["c7/no-such-file"]
                               and report[secret] == report["c7/no-such-file"])
    st = ctx.stats(mnt)
    fetched = (st.get("backing_reads"), st.get("backing_bytes"), st.get("ram_bytes"),
               st.get("prefetch", {}).get("planned_files"))
    r.notes.append(f"after the refusals: backing reads, bytes, RAM bytes, planned files "
                   f"{fetched}")
    r.goals["nothing fetched"] = fetched == (0, 0, 0, 0)
    # The member's readable files, and the owner's (root) registration of everything, work.
    public = sorted(rel for rel in ctx.files if not rel.startswith("c7/"))
    r.goals["member registers readable files"] = register_as(
        NOBODY, NOBODY, [group.gr_gid], mnt, "\n".join(public) + "\n") == "OK"
    register(mnt, ctx.files)
    ctx.wait_prefetched(mnt, len(ctx.files))
    r.add(*ctx.verify(mnt), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)
