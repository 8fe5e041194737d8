"""Fault-matrix rows other_node_change and other_node_warm_epoch (docs/reliability.md, "What is
seen when"): the dataset changed on "another node" (the directory below faultfs, changed directly: no watch of this node
sees it, as on NFS) while clairfs serves it in no-open mode with the kernel keeping names,
attributes and pages. Each change must reach the mount within its bound: a planned file's
next read within PLANNED_BOUND (fs/fresh/revalidate.h, checks ahead), anything else the kernel holds
within fuse.revalidate_interval (the sweep). Every read meanwhile returns the old or the new
version, never other bytes."""
import errno
import os
import time

import harness
from fault_lib import NOBODY, register, sha

PLANNED_BOUND = 2.0   # seconds, with fuse.stat_max_age 1 (the default)
INTERVAL = 3.0        # fuse.revalidate_interval of the row (default 60)


def row_other_node_change(ctx):
    r = ctx.row
    backend = ctx.start_faultfs()
    cfg = ctx.config(ram="64MiB", keep_cache=True)
    cfg["fuse"]["revalidate_interval"] = INTERVAL
    d = ctx.mount(backend, cfg=cfg)
    names = sorted(ctx.files)
    planned, unplanned = names[: len(names) // 2], names[len(names) // 2:]
    register(d.mountpoint, planned, epochs=2)
    ctx.wait_prefetched(d.mountpoint, len(planned))
    # Epoch 1 by the owner and by another user, unplanned files too: the kernel now holds
    # names, attributes and pages of everything.
    r.add(*ctx.verify(d.mountpoint, paths=planned), strict=True)
    r.add(*ctx.verify(d.mountpoint, paths=unplanned), strict=True)
    r.add(*ctx.verify(d.mountpoint, uid=NOBODY, paths=planned[:8] + unplanned[:8]), strict=True)

    rewritten, revoked = planned[3], planned[5]
    u_rewritten, u_deleted, u_revoked = unplanned[1], unplanned[2], unplanned[3]
    new = {rel: bytes(b ^ 0x5A for b in ctx.files[rel]) for rel in (rewritten, u_rewritten)}
    for rel, data in new.items():
        harness.rewrite_in_place(os.path.join(ctx.ds, rel), data)
    os.chmod(os.path.join(ctx.ds, revoked), 0o600)
    os.chmod(os.path.join(ctx.ds, u_revoked), 0o600)
    os.unlink(os.path.join(ctx.ds, u_deleted))
    t0 = time.monotonic()

    new_expect = {rel: {sha(data)} for rel, data in new.items()}

    def version(rel):
        """"new" or "old" as the mount reads rel now; anything else is a wrong read."""
        res, hung = ctx.verify(d.mountpoint, expect=new_expect, paths=[rel])
        r.hung += len(hung)
        got = res[0][1] if res else None
        if got == "ok":
            return "new"
        if got == f"wrong:{rel}":  # the old version's bytes (ctx.owner names them)
            return "old"
        r.wrong += 1
        r.wrong_examples.append(f"{rel}: {got} while changing")
        return got

    def refused(rel):
        res, hung = ctx.verify(d.mountpoint, uid=NOBODY, paths=[rel])
        r.hung += len(hung)
        got = res[0][1] if res else None
        if got not in ("ok", errno.EACCES, errno.EPERM):
            r.wrong += 1
            r.wrong_examples.append(f"{rel} as nobody: {got} while revoking")
        return got in (errno.EACCES, errno.EPERM)

    def gone(rel):
        res, hung = ctx.verify(d.mountpoint, paths=[rel])
        r.hung += len(hung)
        return bool(res) and res[0][1] == errno.ENOENT

    def first_seen(cond, limit):
        while time.monotonic() - t0 < limit:
            if cond():
                return time.monotonic() - t0
        return None

    seen = {
        "planned rewrite": first_seen(lambda: version(rewritten) == "new", PLANNED_BOUND + 3),
        "planned revocation": first_seen(lambda: refused(revoked), PLANNED_BOUND + 3),
        "unplanned rewrite": first_seen(lambda: version(u_rewritten) == "new", INTERVAL + 5),
        "unplanned revocation": first_seen(lambda: refused(u_revoked), INTERVAL + 5),
        "unplanned deletion": first_seen(lambda: gone(u_deleted), INTERVAL + 5),
    }
    r.notes.append("seen after (s, from the change): " + ", ".join(
        f"{k} {'never' if v is None else f'{v:.1f}'}" for k, v in seen.items()))
    r.goals[f"planned changes seen within {PLANNED_BOUND:.0f} s"] = all(
        seen[k] is not None and seen[k] <= PLANNED_BOUND + 0.5  # + a checking reader's start
        for k in ("planned rewrite", "planned revocation"))
    r.goals[f"the rest within revalidate_interval ({INTERVAL:.0f} s)"] = all(
        seen[k] is not None and seen[k] <= INTERVAL + 1.0
        for k in ("unplanned rewrite", "unplanned revocation", "unplanned deletion"))
    # Everything else reads as before; the revoked files still read for their owner.
    after = {rel: ctx.expect[rel] for rel in names if rel != u_deleted}
    for rel, data in new.items():
        after[rel] = {sha(data)}
    r.add(*ctx.verify(d.mountpoint, expect=after, paths=sorted(after)), strict=True)
    r.goals["no errors"] = r.collateral == 0
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


def row_other_node_warm_epoch(ctx):
    """Changes deep into an epoch the page cache answers: no read of it reaches the daemon, so
    only the signposts (cache/backing/stat_ahead.h) tell it where the reader is."""
    r = ctx.row
    backend = ctx.start_faultfs()
    cfg = ctx.config(ram="64MiB", keep_cache=True)
    cfg["fuse"]["revalidate_interval"] = 3600  # the sweep cannot explain what is seen
    cfg["fuse"]["stat_ahead"] = 32  # a stretch of 32 positions: the changes lie far past it
    d = ctx.mount(backend, cfg=cfg)
    planned = sorted(ctx.files)  # the plan's order, each epoch
    register(d.mountpoint, planned, epochs=3)
    ctx.wait_prefetched(d.mountpoint, len(planned))
    # Epoch 1 in plan order: the kernel now holds names, attributes and pages of every file.
    r.add(*ctx.verify(d.mountpoint, paths=planned, shuffle=False), strict=True)

    n = len(planned)
    rewritten, revoked, deleted = planned[n - 10], planned[n - 7], planned[n - 4]
    new = bytes(b ^ 0x5A for b in ctx.files[rewritten])
    harness.rewrite_in_place(os.path.join(ctx.ds, rewritten), new)
    os.chmod(os.path.join(ctx.ds, revoked), 0o600)
    os.unlink(os.path.join(ctx.ds, deleted))
    changed = time.monotonic()
    harness.wait_for(lambda: time.monotonic() - changed >= PLANNED_BOUND, 10,
                     "the documented bound to pass")

    # Epoch 2 in plan order, every read before the changed files answered by the page cache.
    expect = dict(ctx.expect)
    expect[rewritten] = {sha(new)}
    got = {}

    def read(paths, uid=None):
        res, hung = ctx.verify(d.mountpoint, expect=expect, paths=paths, uid=uid, shuffle=False)
        r.hung += len(hung)
        for rel, outcome in res:
            got[rel] = outcome

    read(planned[: n - 7])
    read([revoked], uid=NOBODY)
    read(planned[n - 6:])
    want = {rewritten: "ok", revoked: errno.EACCES, deleted: errno.ENOENT}
    for rel, outcome in want.items():
        if got.get(rel) != outcome:
            r.wrong += 1
            r.wrong_examples.append(f"{rel}: {got.get(rel)} (want {outcome})")
    others = [rel for rel in planned if rel not in want]
    bad = [rel for rel in others if got.get(rel) != "ok"]
    r.collateral += len(bad)
    r.notes.append(f"epoch 2: changed files {[got.get(rel) for rel in want]}; "
                   f"stat_ahead {ctx.stats(d.mountpoint).get('stat_ahead')}")
    r.goals["changes deep in a warm epoch seen by its reads"] = all(
        got.get(rel) == outcome for rel, outcome in want.items())
    r.goals["no errors"] = r.collateral == 0 and not bad
    r.goals["alive"] = r.alive = ctx.alive(d)
    r.goals["stops"] = ctx.stops(d)


ROWS = [
    ("other_node_change", row_other_node_change,
     "the dataset below faultfs changed directly (another node: no watch sees it): planned and "
     "unplanned files rewritten in place (same size and mtime), chmod 0600, one deleted"),
    ("other_node_warm_epoch", row_other_node_warm_epoch,
     "as other_node_change, deep into an epoch whose reads the page cache answers (none reaches "
     "the daemon): a file rewritten in place, one chmod 0600, one deleted, 10-4 positions "
     "before the epoch's end"),
]
