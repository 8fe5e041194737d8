"""Issue 25, item 4: the control files say nothing to those who could not see it. A user who
is neither the mount's owner nor in control.group reads only counts from stats, plan, errors
and metrics, and from `clairfs-ctl status` (docs/permissions.md, "What the control files
show"): no name from a directory that user cannot search, no stream name, no byte size. The
owner, root and members of control.group see everything. Runs as root; the other users are
played with setpriv."""
import errno
import json
import os
import subprocess
import sys

import harness
from harness import setpriv
from test_access import AccessCase, control_group, usable

import unittest

NOBODY = 65534
MEMBER = 64123          # played with control.group as a supplementary group
SECRET_OWNER = 64124    # owns secretdir (0700): nobody else may search it

PKG = os.path.join(harness.REPO, "python")
FILES = ("stats", "plan", "errors", "metrics")

# Run as another user: prints a JSON object {file: its bytes as text, or "ERRNO n"}.
READ_ALL = r"""
import json, os, sys
out = {}
for name in sys.argv[2:]:
    try:
        fd = os.open(os.path.join(sys.argv[1], name), os.O_RDONLY)
        try:
            data = b""
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(fd)
        out[name] = data.decode("utf-8", "replace")
    except OSError as e:
        out[name] = "ERRNO %d" % e.errno
sys.stdout.write(json.dumps(out))
"""


def read_control_as(uid, mnt, groups=()):
    r = subprocess.run(setpriv(uid, groups) + [sys.executable, "-I", "-S", "-c", READ_ALL,
                                               os.path.join(mnt, ".clairfs"), *FILES],
                       capture_output=True, text=True, timeout=60, cwd="/")
    if r.returncode != 0:
        raise AssertionError(f"reader as uid {uid} failed: {r.stderr}")
    return json.loads(r.stdout)


def ctl_as(uid, *args, groups=()):
    """`clairfs-ctl ARGS...` as uid: (exit status, stdout + stderr)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": PKG,
           "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    r = subprocess.run(setpriv(uid, groups) + [sys.executable, "-m", "clairfs", *args],
                       capture_output=True, text=True, timeout=60, cwd="/", env=env)
    return r.returncode, r.stdout + r.stderr


def ctl_status_as(uid, mnt, groups=()):
    return ctl_as(uid, "status", mnt, groups=groups)


@unittest.skipIf(usable(), usable())
class ControlViewsTest(AccessCase):
    # Sizes written nowhere else: if one shows in a view, the view tells a file's size.
    SECRET_SIZE = 271829
    STRAY_SIZE = 161803

    def setUp(self):
        super().setUp()
        self.group = control_group()
        for i in range(4):
            self.put(f"open/{i}.bin", "public %d\n" % i)
        secret = os.path.join(self.ds, "secretdir")
        os.mkdir(secret, 0o700)
        self.secret_rel = "secretdir/secret_name_q7.bin"
        self.put(self.secret_rel, "s" * self.SECRET_SIZE)
        self.strays = [f"secretdir/stray_name_k{i}.bin" for i in range(4)]
        for i, rel in enumerate(self.strays):
            self.put(rel, "x" * (self.STRAY_SIZE + i))
        for d, _, names in os.walk(secret):
            for n in [d] + [os.path.join(d, n) for n in names]:
                os.chown(n, SECRET_OWNER, SECRET_OWNER)
        os.chmod(secret, 0o700)
        self.stream = "secretstream_x9"
        self.missing = "secretdir/missing_name_z2.bin"

    def secrets(self, plan_bytes):
        """Every string a view for others must not hold: names below secretdir, the stream's
        name, the sizes of the secret files and the plan's total."""
        names = ["secretdir", "secret_name_q7", "stray_name_k", "missing_name_z2", self.stream]
        sizes = [self.SECRET_SIZE, plan_bytes] + [self.STRAY_SIZE + i for i in range(4)]
        return names + [str(s) for s in sizes]

    def assert_none_of(self, secrets, texts):
        """No secret in any of texts ({what: text}); says which, where, without the text."""
        found = [(s, what) for what, text in texts.items() for s in secrets if s in text]
        self.assertEqual(found, [], "secrets in the views of another user")

    def prepare(self):
        """The owner (root) registers a plan whose first file is secret, reads stray files of
        secretdir (the not_in_plan warning quotes them), and has a manifest naming a missing
        secret path refused (errors quotes it). Returns the full plan."""
        self.start(control={"group": self.group.gr_name}, warn={"check_reads": 4})
        order = [self.secret_rel] + [f"open/{i}.bin" for i in range(4)]
        self.write_manifest(self.mnt, f"#stream {self.stream}\n" + "\n".join(order) + "\n")
        plan = self.plan(self.mnt)
        self.assertEqual(plan["files"], 5)
        # The tiers hold the secret file: its size is in the full stats.
        harness.wait_for(lambda: self.stats(self.mnt)["ram_bytes"] >= plan["bytes"], 30,
                         "the plan to be prefetched")
        for rel in self.strays:
            with open(self.at(rel), "rb") as f:
                f.read()
        harness.wait_for(lambda: any(w["kind"] == "not_in_plan"
                                     for w in self.stats(self.mnt)["warnings"]), 20,
                         "the not_in_plan warning")
        with self.assertRaises(OSError) as cm:
            self.write_manifest(self.mnt, self.missing + "\n")
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        return plan

    def assert_full(self, views, plan):
        stats = json.loads(views["stats"])
        self.assertNotIn("view", stats)
        warning = [w for w in stats["warnings"] if w["kind"] == "not_in_plan"][0]
        self.assertIn("stray_name_k", warning["message"])
        self.assertIn(self.secret_rel, warning["message"])
        self.assertEqual([s["name"] for s in stats["prefetch"]["streams"]], [self.stream])
        self.assertGreaterEqual(stats["ram_bytes"], self.SECRET_SIZE)
        full_plan = json.loads(views["plan"])
        self.assertEqual(full_plan["bytes"], plan["bytes"])
        self.assertEqual(full_plan["streams"][0]["name"], self.stream)
        self.assertIn(self.missing, views["errors"])
        self.assertIn(f'clairfs_stream_positions{{stream="{self.stream}"}}', views["metrics"])
        self.assertIn("clairfs_tier_used_bytes{", views["metrics"])

    def test_others_see_counts_only(self):
        plan = self.prepare()
        views = read_control_as(NOBODY, self.mnt)
        rc, status = ctl_status_as(NOBODY, self.mnt)
        self.assertEqual(rc, 0, status)
        self.assert_none_of(self.secrets(plan["bytes"]), dict(views, status=status))
        # What others do see: counts, readiness, warnings by kind, that a manifest failed.
        stats = json.loads(views["stats"])
        self.assertEqual(stats["view"], "counts")
        self.assertEqual(stats["prefetch"]["planned_files"], 5)
        self.assertEqual(len(stats["prefetch"]["streams"]), 1)
        self.assertEqual(stats["errors"]["manifest_rejected"], 1)
        self.assertIn("not_in_plan", [w["kind"] for w in stats["warnings"]])
        for key in ("ram_bytes", "bytes_read", "backing_bytes"):
            self.assertNotIn(key, stats)
        self.assertIn("ready", stats["readiness"])
        counts_plan = json.loads(views["plan"])
        self.assertEqual((counts_plan["view"], counts_plan["files"], counts_plan["entries"]),
                         ("counts", 5, 5))
        self.assertNotIn("bytes", counts_plan)
        self.assertIn("rejected", views["errors"])
        self.assertIn("clairfs_file_reads_total ", views["metrics"])
        self.assertIn("clairfs_plan_files 5\n", views["metrics"])
        for family in ("clairfs_tier_used_bytes", "clairfs_read_bytes_total",
                       "clairfs_stream_position", "clairfs_staging_used_bytes"):
            self.assertNotIn(family, views["metrics"])
        self.assertIn("details hidden: not the mount's owner or control.group", status)
        self.assertIn("plan: 5 files, 5 reads in 1 stream(s)", status)
        self.assertIn("WARNING (not_in_plan): ", status)
        # wait and status --json work from the counts view (entries and readiness are there).
        rc, out = ctl_as(NOBODY, "wait", self.mnt, "--timeout", "20")
        self.assertEqual(rc, 0, out)
        rc, out = ctl_as(NOBODY, "status", self.mnt, "--json")
        self.assertEqual((rc, json.loads(out)["readiness"]["ready"]), (0, 1.0), out)
        # And the full view is still there for the owner (root) and a control.group member.
        self.assert_full(read_control_as(0, self.mnt), plan)
        self.assert_full(read_control_as(MEMBER, self.mnt, groups=[self.group.gr_gid]), plan)
        rc, status = ctl_status_as(MEMBER, self.mnt, groups=[self.group.gr_gid])
        self.assertEqual(rc, 0, status)
        self.assertIn(f"stream {self.stream}: ", status)
        self.assertNotIn("details hidden", status)
        # The owner of secretdir is no control.group member: counts only, as for anyone.
        self.assertEqual(json.loads(read_control_as(SECRET_OWNER, self.mnt)["stats"])["view"],
                         "counts")

    def test_without_control_group_only_the_owner_sees_details(self):
        self.start()
        self.write_manifest(self.mnt, f"#stream {self.stream}\n{self.secret_rel}\n")
        views = read_control_as(MEMBER, self.mnt, groups=[self.group.gr_gid])
        self.assert_none_of([self.stream, "secretdir", str(self.SECRET_SIZE)], views)
        self.assertEqual(json.loads(views["plan"])["files"], 1)
        self.assertEqual(views["errors"], "")
        self.assertEqual(json.loads(self.control_read(self.mnt, "plan"))["bytes"],
                         self.SECRET_SIZE)


if __name__ == "__main__":
    unittest.main()
