"""Issue 14 item 4: POSIX ACLs are honoured on a root mount with allow_other, a revocation
takes effect at the caller's next open, and only the mount's owner (or control.group) may
write the manifest. Runs as root; other users are played with setpriv (no accounts needed)."""
import errno
import grp
import json
import os
import shutil
import subprocess
import sys
import unittest

import harness
from harness import ClairfsCase, config

USER = 64123    # ids without accounts: setpriv needs none
OTHER = 64124

# Run as another user. argv: PATH r (print the contents), PATH l (print the sorted names), or
# PATH w TEXT (replace the manifest at PATH with TEXT, print "OK"); on an error "ERRNO <n>".
# No stat before the open: it would refresh the kernel's cached attributes.
CHILD = r"""
import os, sys
path, op = sys.argv[1], sys.argv[2]
try:
    if op == "w":
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, sys.argv[3].encode())
        finally:
            os.close(fd)
        sys.stdout.write("OK")
    elif op == "l":
        sys.stdout.write(",".join(sorted(os.listdir(path))))
    else:
        fd = os.open(path, os.O_RDONLY)
        try:
            sys.stdout.write(os.read(fd, 1 << 16).decode())
        finally:
            os.close(fd)
except OSError as e:
    sys.stdout.write("ERRNO %d" % e.errno)
"""


def as_user(uid, args, gid=None, groups=()):
    r = subprocess.run(harness.setpriv(uid, groups, gid) + [sys.executable, "-I", "-S", "-c", CHILD, *args],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"child as uid {uid} failed: {r.stderr}")
    return r.stdout


def read_as(uid, path, **kw):
    return as_user(uid, [path, "r"], **kw)


def list_as(uid, path, **kw):
    return as_user(uid, [path, "l"], **kw)


def write_manifest_as(uid, mnt, text, **kw):
    return as_user(uid, [os.path.join(mnt, ".clairfs", "manifest"), "w", text], **kw)


def setfacl(*args):
    subprocess.run(["setfacl", *args], check=True, timeout=30)


DENIED = f"ERRNO {errno.EACCES}"


def usable():
    if os.geteuid() != 0:
        return "needs root (a root mount with allow_other)"
    for tool in ("setpriv", "setfacl"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (util-linux, acl)"
    return None


@unittest.skipIf(usable(), usable())
class AccessCase(ClairfsCase):
    def setUp(self):
        super().setUp()
        base = self.tmpdir("acc")
        os.chmod(base, 0o755)  # other users must reach the dataset and the mountpoint
        self.ds = os.path.join(base, "ds")
        self.mnt = os.path.join(base, "m")
        os.mkdir(self.ds, 0o755)
        os.mkdir(self.mnt, 0o755)

    def put(self, rel, text, mode=0o644):
        path = os.path.join(self.ds, rel)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def start(self, **extra):
        cfg = config(**{k: v for k, v in extra.items() if k != "fuse"})
        cfg["fuse"].update(extra.get("fuse", {}))
        return self.mount(self.ds, self.mnt, cfg=cfg)

    def at(self, rel):
        return os.path.join(self.mnt, rel)


class AclTest(AccessCase):
    def test_acl_entry_denies_user_that_mode_bits_allow(self):
        f = self.put("a/denied.txt", "secret\n", 0o644)
        setfacl("-m", f"u:{USER}:---", f)
        self.start()
        self.assertEqual(read_as(USER, self.at("a/denied.txt")), DENIED)
        self.assertEqual(read_as(OTHER, self.at("a/denied.txt")), "secret\n")
        with open(self.at("a/denied.txt")) as fh:
            self.assertEqual(fh.read(), "secret\n")  # the owner (root) still reads

    def test_acl_entry_grants_user_a_0600_file(self):
        f = self.put("granted.txt", "for you\n", 0o600)
        setfacl("-m", f"u:{USER}:r--", f)
        self.start()
        self.assertEqual(read_as(USER, self.at("granted.txt")), "for you\n")
        self.assertEqual(read_as(OTHER, self.at("granted.txt")), DENIED)

    def test_directory_acl_denies_search(self):
        self.put("dir/inside.txt", "in\n", 0o644)
        setfacl("-m", f"u:{USER}:---", os.path.join(self.ds, "dir"))
        self.start()
        self.assertEqual(read_as(USER, self.at("dir/inside.txt")), DENIED)
        self.assertEqual(list_as(USER, self.at("dir")), DENIED)
        self.assertEqual(read_as(OTHER, self.at("dir/inside.txt")), "in\n")
        self.assertEqual(list_as(OTHER, self.at("dir")), "inside.txt")

    def test_xattrs_forwarded_read_only_and_privileged_ones_hidden(self):
        f = self.put("x.txt", "x\n", 0o644)
        setfacl("-m", f"u:{USER}:---", f)
        os.setxattr(f, "user.label", b"cat")
        os.setxattr(f, "trusted.secret", b"root only")
        self.start()
        m = self.at("x.txt")
        self.assertEqual(os.getxattr(m, "system.posix_acl_access"),
                         os.getxattr(f, "system.posix_acl_access"))
        self.assertEqual(os.getxattr(m, "user.label"), b"cat")
        self.assertEqual(sorted(os.listxattr(m)), ["system.posix_acl_access", "user.label"])
        with self.assertRaises(OSError) as cm:
            os.getxattr(m, "trusted.secret")
        self.assertEqual(cm.exception.errno, errno.ENODATA)
        with self.assertRaises(OSError) as cm:
            os.getxattr(m, "user.absent")
        self.assertEqual(cm.exception.errno, errno.ENODATA)
        with self.assertRaises(OSError) as cm:
            os.setxattr(m, "user.label", b"dog")
        self.assertEqual(cm.exception.errno, errno.EROFS)
        out = subprocess.run(["getfacl", "-n", m], capture_output=True, text=True,
                             check=True, timeout=30).stdout
        self.assertIn(f"user:{USER}:---", out)


class RevocationTest(AccessCase):
    """In the default no-open mode the kernel checks every open against the attributes and
    ACLs it caches, which the backing watch drops as soon as they change (fs/fresh/backing_watch.h):
    the change counts at the next open. RevocationPerOpenTest: the daemon's own re-check."""
    OPEN_MODE = "none"

    def start(self, **extra):
        fuse = {"open_mode": self.OPEN_MODE}
        fuse.update(extra.pop("fuse", {}))
        return super().start(fuse=fuse, **extra)

    def await_read(self, user, rel, want):
        """per_open: at once. none: the watch drops the kernel's attributes moments after the
        change, so the next open sees it: waits (10 s at most) for that."""
        if self.OPEN_MODE == "per_open":
            self.assertEqual(read_as(user, self.at(rel)), want)
        else:
            harness.wait_for(lambda: read_as(user, self.at(rel)) == want, 10,
                             f"uid {user} to read {want!r} from {rel}")

    def await_denied(self, user, rel):
        self.await_read(user, rel, DENIED)

    def test_chmod_revokes_at_next_open(self):
        f = self.put("r/chmod.txt", "open\n", 0o644)
        self.start()
        self.assertEqual(read_as(USER, self.at("r/chmod.txt")), "open\n")  # attributes cached
        os.chmod(f, 0o000)
        if self.OPEN_MODE == "per_open":
            self.assertEqual(read_as(USER, self.at("r/chmod.txt")), DENIED)
            self.assertEqual(self.stats(self.mnt)["access"]["open_denied"], 1)
        else:  # the kernel refused it: the daemon never saw the open
            self.await_denied(USER, "r/chmod.txt")
        os.chmod(f, 0o644)
        self.await_read(USER, "r/chmod.txt", "open\n")

    def test_setfacl_removal_revokes_at_next_open(self):
        f = self.put("r/acl.txt", "granted\n", 0o600)
        setfacl("-m", f"u:{USER}:r--", f)
        self.start()
        self.assertEqual(read_as(USER, self.at("r/acl.txt")), "granted\n")
        setfacl("-x", f"u:{USER}", f)
        self.await_denied(USER, "r/acl.txt")

    def test_directory_acl_revokes_at_next_open(self):
        self.put("r/sub/file.txt", "below\n", 0o644)
        self.start()
        self.assertEqual(read_as(USER, self.at("r/sub/file.txt")), "below\n")
        setfacl("-m", f"u:{USER}:---", os.path.join(self.ds, "r", "sub"))
        self.await_denied(USER, "r/sub/file.txt")
        self.assertEqual(read_as(OTHER, self.at("r/sub/file.txt")), "below\n")

    def test_group_membership_counts_in_the_recheck(self):
        g = control_group()
        f = self.put("r/group.txt", "members\n", 0o640)
        os.chown(f, 0, g.gr_gid)
        self.start()
        self.assertEqual(read_as(USER, self.at("r/group.txt"), groups=[g.gr_gid]), "members\n")
        self.assertEqual(read_as(USER, self.at("r/group.txt")), DENIED)

    def test_kernel_mode_trusts_the_cached_check(self):
        f = self.put("r/kernel.txt", "cached\n", 0o644)
        self.start(fuse={"access_check": "kernel", "watch_backing": False})
        self.assertEqual(read_as(USER, self.at("r/kernel.txt")), "cached\n")
        os.chmod(f, 0o000)
        # As documented: without the open re-check the kernel's cached attributes decide.
        self.assertEqual(read_as(USER, self.at("r/kernel.txt")), "cached\n")

    def test_bad_access_check_value_fails_to_start(self):
        with self.assertRaises(AssertionError) as cm:
            self.start(fuse={"access_check": "sometimes"})
        msg = str(cm.exception)
        self.assertIn("fuse.access_check", msg)
        self.assertIn("'sometimes' is not one of: open, kernel", msg)


class RevocationPerOpenTest(RevocationTest):
    OPEN_MODE = "per_open"


def control_group():
    """A group of this machine other than root's (members may write the manifest)."""
    for name in ("users", "staff", "daemon"):
        try:
            return grp.getgrnam(name)
        except KeyError:
            pass
    return next(g for g in grp.getgrall() if g.gr_gid != 0)


class ControlWriteTest(AccessCase):
    def setUp(self):
        super().setUp()
        for i in range(3):
            self.put(f"c/{i}.bin", "data %d\n" % i, 0o644)

    def plan_files(self):
        return self.plan(self.mnt)["files"]

    def test_other_user_cannot_write_manifest(self):
        self.start()
        self.write_manifest(self.mnt, "c/0.bin\nc/1.bin\n")
        self.assertEqual(self.plan_files(), 2)
        st = os.stat(self.at(".clairfs/manifest"))
        self.assertEqual((st.st_mode & 0o777, st.st_uid, st.st_gid), (0o644, 0, 0))
        self.assertEqual(write_manifest_as(USER, self.mnt, "c/2.bin\n"), DENIED)
        self.assertEqual(self.plan_files(), 2)
        # The other control files stay readable by everyone (as counts: test_control_views.py).
        self.assertEqual(json.loads(read_as(USER, self.at(".clairfs/plan")))["files"], 2)
        json.loads(read_as(USER, self.at(".clairfs/stats")))
        self.assertEqual(read_as(USER, self.at(".clairfs/errors")), "")

    def test_control_group_member_may_write_manifest(self):
        g = control_group()
        self.start(control={"group": g.gr_name})
        st = os.stat(self.at(".clairfs/manifest"))
        self.assertEqual((st.st_mode & 0o777, st.st_uid, st.st_gid), (0o664, 0, g.gr_gid))
        self.assertEqual(write_manifest_as(USER, self.mnt, "c/0.bin\n"), DENIED)
        self.assertEqual(self.plan_files(), 0)
        self.assertEqual(write_manifest_as(USER, self.mnt, "c/0.bin\n", groups=[g.gr_gid]), "OK")
        self.assertEqual(self.plan_files(), 1)
        self.assertEqual(write_manifest_as(OTHER, self.mnt, "c/0.bin\nc/1.bin\nc/2.bin\n",
                                           gid=g.gr_gid), "OK")
        self.assertEqual(self.plan_files(), 3)
        self.write_manifest(self.mnt, "c/1.bin\n")  # the owner still may
        self.assertEqual(self.plan_files(), 1)

    def test_unknown_control_group_fails_to_start(self):
        with self.assertRaises(AssertionError) as cm:
            self.start(control={"group": "no-such-group-clairfs"})
        msg = str(cm.exception)
        self.assertIn("exited with", msg)
        self.assertIn("config key 'control.group': no group named 'no-such-group-clairfs'", msg)
        self.assertFalse(harness.is_fuse_mounted(self.mnt))
