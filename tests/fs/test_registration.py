"""Issue 25 items 3, 6 and 7: a manifest's paths are checked with the rights of the process
that wrote it (a control.group member learns nothing of files it could not stat, and nothing
it could not read is fetched); what close() accepted is installed, at the stream limit too;
and a shell `>` of a manifest naming a missing file fails in the shell.

Runs as root (a root mount with allow_other); other users are played with setpriv (no accounts
needed). Shell commands get every user-supplied value as an argument ("$1"), never inside the
script."""
import errno
import os
import shutil
import subprocess
import sys
import time
import unittest

from harness import ClairfsCase, config, setpriv, wait_for
from test_access import control_group

USER = 64123    # a member of control.group
OWNER = 64125   # the owner of the private files
PRIVATE_SIZE = 12345

# Run as another user: writes argv[2] to the manifest at argv[1] with one write(), then
# closes; prints "OK", or "WRITE <errno>" / "CLOSE <errno>" where it failed.
CHILD = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
try:
    os.write(fd, sys.argv[2].encode())
except OSError as e:
    sys.stdout.write("WRITE %d" % e.errno)
    try:
        os.close(fd)
    except OSError:
        pass
    sys.exit(0)
try:
    os.close(fd)
except OSError as e:
    sys.stdout.write("CLOSE %d" % e.errno)
    sys.exit(0)
sys.stdout.write("OK")
"""


def usable():
    if os.geteuid() != 0:
        return "needs root (a root mount with allow_other)"
    if shutil.which("setpriv") is None:
        return "setpriv is missing (util-linux)"
    return None


@unittest.skipIf(usable(), usable())
class RegistrationRightsTest(ClairfsCase):
    """Item 3: registration with the writer's rights."""

    def setUp(self):
        super().setUp()
        base = self.tmpdir("reg")
        os.chmod(base, 0o755)
        self.ds = os.path.join(base, "ds")
        self.mnt = os.path.join(base, "m")
        os.mkdir(self.ds, 0o755)
        os.mkdir(self.mnt, 0o755)
        self.put("pub/a.bin", b"a" * 1000, 0o644)
        self.put("pub/unreadable.bin", b"u" * 777, 0o600, owner=OWNER)
        self.put("priv/p.bin", b"p" * PRIVATE_SIZE, 0o600, owner=OWNER)
        os.chown(os.path.join(self.ds, "priv"), OWNER, OWNER)
        os.chmod(os.path.join(self.ds, "priv"), 0o700)
        self.group = control_group()
        cfg = config(control={"group": self.group.gr_name})
        self.mount(self.ds, self.mnt, cfg=cfg)
        self.manifest = os.path.join(self.mnt, ".clairfs", "manifest")

    def put(self, rel, data, mode, owner=0):
        path = os.path.join(self.ds, rel)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        os.chown(path, owner, owner)

    def write_as_member(self, text, more_groups=()):
        r = subprocess.run(setpriv(USER, [self.group.gr_gid, *more_groups]) +
                           [sys.executable, "-I", "-S", "-c", CHILD, self.manifest, text],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def fetched(self):
        st = self.stats(self.mnt)
        return st["backing_reads"], st["ram_bytes"], st["prefetch"]["planned_files"]

    def test_a_file_the_writer_cannot_stat_is_refused_as_a_missing_one(self):
        refusals = {}
        for rel in ("priv/p.bin", "priv/nope.bin", "pub/unreadable.bin", "pub/nope.bin"):
            self.assertEqual(self.write_as_member(rel + "\n"), f"WRITE {errno.EINVAL}", rel)
            report = self.control_read(self.mnt, "errors")
            self.assertIn(f"line 1: '{rel}'", report)
            refusals[rel] = report.replace(rel, "PATH")
        # The same words for a private file as for a missing name: nothing to tell them apart.
        self.assertEqual(refusals["priv/p.bin"], refusals["priv/nope.bin"])
        self.assertEqual(refusals["pub/unreadable.bin"], refusals["pub/nope.bin"])
        self.assertNotIn(str(PRIVATE_SIZE), "".join(refusals.values()))
        plan = self.plan(self.mnt)
        self.assertEqual((plan["files"], plan["bytes"]), (0, 0), plan)
        self.assertEqual(self.fetched(), (0, 0, 0))
        # What the member may read is registered and fetched.
        self.assertEqual(self.write_as_member("pub/a.bin\n"), "OK")
        self.assertEqual(self.plan(self.mnt)["bytes"], 1000)
        wait_for(lambda: self.stats(self.mnt)["ram_bytes"] == 1000, 20, "pub/a.bin fetched")
        # A file among readable ones: the whole text is refused, nothing of it installed.
        self.assertEqual(self.write_as_member("pub/a.bin\npriv/p.bin\n"), f"WRITE {errno.EINVAL}")
        self.assertEqual(self.plan(self.mnt)["bytes"], 1000)
        # The mount's owner (root, the daemon's user) registers the private file.
        self.write_manifest(self.mnt, "priv/p.bin\n")
        self.assertEqual(self.plan(self.mnt)["bytes"], PRIVATE_SIZE)

    def test_supplementary_groups_count(self):
        team = 64200  # a group without an entry: setpriv needs none
        self.put("team/t.bin", b"t" * 300, 0o640, owner=OWNER)
        os.chown(os.path.join(self.ds, "team", "t.bin"), OWNER, team)
        self.assertEqual(self.write_as_member("team/t.bin\n"), f"WRITE {errno.EINVAL}")
        self.assertEqual(self.write_as_member("team/t.bin\n", more_groups=[team]), "OK")
        self.assertEqual(self.plan(self.mnt)["bytes"], 300)

    def test_a_readable_file_behind_a_symlink_into_a_private_directory_is_refused(self):
        os.symlink("../priv/p.bin", os.path.join(self.ds, "pub", "link.bin"))
        self.assertEqual(self.write_as_member("pub/link.bin\n"), f"WRITE {errno.EINVAL}")
        self.assertEqual(self.plan(self.mnt)["files"], 0)

    def test_a_shell_redirection_by_the_member_fails(self):
        r = subprocess.run(setpriv(USER, [self.group.gr_gid]) +
                           ["sh", "-c", 'echo "$1" > "$2"', "sh", "priv/p.bin", self.manifest],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.plan(self.mnt)["files"], 0)


@unittest.skipIf(usable(), usable())
class ShellRedirectionTest(ClairfsCase):
    """Item 7: `echo missing > manifest` fails in the shell (the write fails)."""

    def setUp(self):
        super().setUp()
        base = self.tmpdir("sh")
        self.ds = os.path.join(base, "ds")
        os.makedirs(os.path.join(self.ds, "d"))
        for i in range(3):
            with open(os.path.join(self.ds, "d", f"{i}.bin"), "wb") as f:
                f.write(b"x" * 100)
        self.mnt = os.path.join(base, "m")
        os.mkdir(self.mnt)
        self.mount(self.ds, self.mnt)
        self.manifest = os.path.join(self.mnt, ".clairfs", "manifest")

    def sh(self, script, *args):
        return subprocess.run(["sh", "-c", script, "sh", *args], capture_output=True, text=True,
                              timeout=60)

    def test_echo_of_a_missing_file_fails_in_the_shell(self):
        self.write_manifest(self.mnt, "d/0.bin\n")
        for text in ("typo/name.jpg", "d/0.bin\nd/missing.bin"):
            r = self.sh('echo "$1" > "$2"', text, self.manifest)
            self.assertNotEqual(r.returncode, 0, text)
            self.assertIn("echo", r.stderr)  # dash: "I/O error", bash: "Invalid argument"
            report = self.control_read(self.mnt, "errors")
            self.assertIn("no such file or directory", report)
            self.assertIn("(refused at write()", report)
            self.assertEqual(self.plan(self.mnt)["files"], 1)  # the plan stays
        r = self.sh('echo "$1" > "$2"', "d/1.bin", self.manifest)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.control_read(self.mnt, "errors"), "")
        self.assertEqual(self.plan(self.mnt)["files"], 1)


class StreamReservationTest(ClairfsCase):
    """Item 6: at the stream limit, with a large stream making installations slow, writers
    registering new streams one after another: each close() that returned 0 is installed, each
    refused one failed at its close() with the reason."""

    FILES = 200
    LIMIT = 6

    def setUp(self):
        super().setUp()
        base = self.tmpdir("streams")
        self.ds = os.path.join(base, "ds")
        os.makedirs(self.ds)
        for i in range(self.FILES):
            with open(os.path.join(self.ds, f"f{i}"), "wb") as f:
                f.write(b"x")
        self.mnt = os.path.join(base, "m")
        os.mkdir(self.mnt)
        cfg = config(staging="2MiB")
        cfg["cache"]["max_streams"] = self.LIMIT
        self.mount(self.ds, self.mnt, cfg=cfg)

    def test_every_accepted_close_is_installed(self):
        # The large stream: 400k entries, so that each installation takes a while.
        names = "\n".join(f"f{i}" for i in range(self.FILES)) + "\n"
        self.write_manifest(self.mnt, "#stream big\n" + names * 2000)
        accepted, refused = [], []
        for round_ in range(3):
            for i in range(2 * self.LIMIT):
                name = f"r{round_}-s{i}"
                fd = os.open(os.path.join(self.mnt, ".clairfs", "manifest"),
                             os.O_WRONLY | os.O_TRUNC)
                os.write(fd, f"#stream {name}\nf{i}\n".encode())
                try:
                    os.close(fd)
                    accepted.append(name)
                except OSError as e:
                    self.assertEqual(e.errno, errno.EINVAL)
                    report = self.control_read(self.mnt, "errors")
                    self.assertIn(f"stream '{name}'", report)
                    self.assertIn("cache.max_streams", report)
                    refused.append(name)
            streams = {s["name"] for s in self.plan(self.mnt)["streams"]}
            self.assertEqual(streams, {"big"} | {n for n in accepted if n.startswith(f"r{round_}-")})
            # Make room for the next round: remove this round's streams.
            for name in list(streams - {"big"}):
                self.write_manifest(self.mnt, f"#stream {name}\n")
        self.assertEqual(len(accepted), 3 * (self.LIMIT - 1), (accepted, refused))
        self.assertEqual(len(refused), 3 * (self.LIMIT + 1))
