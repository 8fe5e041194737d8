"""clairfs-ctl (python3 -m clairfs) on a real mount: register with its exit status and the
reason, status (once and --watch), wait, plan, errors."""
import json
import os
import subprocess
import sys

import harness

import clairfs

REPO = harness.REPO
PKG = os.path.join(REPO, "python")


def ctl(*args, stdin=None, launcher=False):
    """Runs the tool; returns (exit status, stdout, stderr)."""
    argv = ([sys.executable, os.path.join(REPO, "python", "clairfs-ctl")] if launcher
            else [sys.executable, "-m", "clairfs"])
    env = dict(os.environ, PYTHONPATH=PKG)
    r = subprocess.run(argv + list(args), input=stdin, capture_output=True, env=env,
                       timeout=120)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


class CtlTest(harness.ClairfsCase):
    def setUp(self):
        super().setUp()
        base = self.tmpdir("ctl")
        self.data = os.path.join(base, "data")
        self.files = [f"c{i % 3}/{i:03d}.bin" for i in range(30)]
        for i, rel in enumerate(self.files):
            os.makedirs(os.path.dirname(os.path.join(self.data, rel)), exist_ok=True)
            with open(os.path.join(self.data, rel), "wb") as f:
                f.write(bytes([i]) * (1000 + 97 * i))
        self.manifest = os.path.join(base, "order.txt")
        with open(self.manifest, "w") as f:
            f.write("#epoch\n" + "\n".join(self.files) + "\n#epoch\n" +
                    "\n".join(reversed(self.files)) + "\n")
        self.mnt = os.path.join(base, "mnt")
        os.mkdir(self.mnt)
        self.mount(self.data, self.mnt, workdir=base)

    def test_register_and_its_exit_status(self):
        rc, out, err = ctl("register", self.mnt, self.manifest)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(clairfs.plan(self.mnt)["entries"], 60)
        # Rejected: exit 1, the daemon's reason on stderr, the plan unchanged.
        rc, out, err = ctl("register", self.mnt, "-", stdin=b"c0/000.bin\nno/such.bin\n")
        self.assertEqual(rc, 1, err)
        self.assertIn("rejected the manifest", err)
        self.assertIn("no/such.bin", err)
        self.assertEqual(clairfs.plan(self.mnt)["entries"], 60)
        # From standard input, appended.
        rc, out, err = ctl("register", "--append", self.mnt, "-", stdin=b"#epoch\nc1/001.bin\n")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(clairfs.plan(self.mnt)["entries"], 61)
        # The launcher installed as clairfs-ctl is the same tool.
        rc, out, err = ctl("register", self.mnt, self.manifest, launcher=True)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(clairfs.plan(self.mnt)["entries"], 60)
        # Not a clairfs mount, a missing file: exit 1 with the reason.
        rc, _, err = ctl("register", self.data + "-nope", self.manifest)
        self.assertEqual(rc, 1)
        self.assertIn("not a clairfs mount", err)
        rc, _, err = ctl("register", self.mnt, self.manifest + "-nope")
        self.assertEqual(rc, 1)
        self.assertIn("No such file", err)

    def test_status_plan_errors(self):
        rc, out, _ = ctl("status", self.mnt)
        self.assertEqual(rc, 0)
        self.assertIn("plan: none registered", out)
        self.assertEqual(ctl("register", self.mnt, self.manifest)[0], 0)
        # Read the first epoch, so that something was served.
        for rel in self.files:
            with open(os.path.join(self.mnt, rel), "rb") as f:
                f.read()
        harness.wait_for(lambda: clairfs.stats(self.mnt)["prefetch"]["position"] >= 30, 30,
                         "the first epoch to be consumed")
        rc, out, _ = ctl("status", self.mnt)
        self.assertEqual(rc, 0)
        self.assertIn("plan: 30 files", out)
        self.assertIn("stream default: epoch 2/2", out)
        self.assertIn("hit rate", out)
        self.assertIn("tier ram:", out)
        # --watch with one refresh (not a terminal: views separated by a blank line).
        rc, out, _ = ctl("status", self.mnt, "--watch", "0.1", "--count", "2")
        self.assertEqual(rc, 0)
        self.assertEqual(out.count("clairfs at "), 2)
        rc, out, _ = ctl("status", self.mnt, "--json")
        view = json.loads(out)
        self.assertEqual(set(view), {"readiness", "hit_rates"})
        self.assertNotIn("cluster", clairfs.stats(self.mnt))  # a single daemon: no section
        self.assertAlmostEqual(sum(view["hit_rates"].values()), 1.0, places=6)
        # The view shows the daemon's own hit rates and readiness (stats keys), per tier too.
        # Once the tiers are full and nothing reads, they hold still between the two reads.
        harness.wait_for(lambda: clairfs.stats(self.mnt)["readiness"]["ready"] >= 1.0, 30,
                         "the tiers to fill")
        st = clairfs.stats(self.mnt)
        rc, out, _ = ctl("status", self.mnt, "--json")
        view = json.loads(out)
        self.assertEqual(view["readiness"], st["readiness"])
        self.assertEqual(view["hit_rates"], st["hit_rates"])
        rc, out, _ = ctl("status", self.mnt)
        ram = st["hit_rates"]["ram"]
        self.assertIn("tier ram: ", out)
        self.assertIn(f"served ({ram * 100:.1f}% of reads)", out)
        self.assertIn(f"(hit rate {st['hit_rate'] * 100:.1f}%)", out)
        self.assertIn("ready: tiers [" + "#" * 24 + "] 100.0%", out)
        self.assertIn(f"stall: {st['stall_seconds']:.2f} s", out)
        self.assertIn(f"backing: {st['backing_reads']} reads", out)
        rc, out, _ = ctl("plan", self.mnt)
        self.assertEqual(json.loads(out)["entries"], 60)
        self.assertEqual(ctl("errors", self.mnt)[1], "")
        ctl("register", self.mnt, "-", stdin=b"nope.bin\n")
        self.assertIn("nope.bin", ctl("errors", self.mnt)[1])

    def test_wait(self):
        # No plan: nothing to be ready for; the deadline holds.
        rc, _, err = ctl("wait", self.mnt, "--timeout", "0.2")
        self.assertEqual(rc, 1)
        self.assertIn("no plan registered", err)
        self.assertEqual(ctl("register", self.mnt, self.manifest)[0], 0)
        rc, out, err = ctl("wait", self.mnt, "--ready", "0.95", "--timeout", "60")
        self.assertEqual(rc, 0, err)
        self.assertIn("ready: tiers", out)
        view = json.loads(ctl("status", self.mnt, "--json")[1])
        self.assertGreaterEqual(view["readiness"]["ready"], 0.95)
        rc, _, err = ctl("wait", self.mnt, "--ready", "1.5")
        self.assertEqual(rc, 2, err)

    def test_wait_mounted(self):
        """--mounted: at once for a clairfs mount; a plain directory (the dataset itself, and
        the mount's own path once unmounted) waits out the deadline and says why."""
        rc, out, err = ctl("wait", self.mnt, "--mounted", "--timeout", "30")
        self.assertEqual((rc, out), (0, f"mounted: {self.mnt}\n"), err)
        rc, _, err = ctl("wait", self.data, "--mounted", "--timeout", "0.3")
        self.assertEqual(rc, 1)
        self.assertIn(f"{self.data}: not a clairfs mount", err)
        # A path with a space, as /proc/self/mounts escapes it.
        spaced = os.path.join(self.tmpdir("ctl space"), "m n")
        os.mkdir(spaced)
        self.mount(self.data, spaced, workdir=os.path.dirname(spaced))
        self.assertEqual(ctl("wait", spaced, "--mounted", "--timeout", "30")[0], 0)


class RenderCountsViewTest(harness.ClairfsCase):
    """status from the counts view (what a user outside control.group reads): no crash on the
    keys it lacks, no stream lines, no sizes, and the note saying details are hidden. (On a
    real mount, read as another user: tests/fs/test_control_views.py.)"""

    def test_counts_view_renders_without_details(self):
        from clairfs.ctl import status
        stats = {"view": "counts", "hidden": "...", "file_reads": 3,
                 "readiness": {"tiers": 1.0, "window": 0.5, "ready": 0.5},
                 "prefetch": {"planned_files": 2, "streams": [{}, {}]},
                 "tiers": [{"name": "ram", "capacity": 1 << 30, "served": 3, "state": "on"}],
                 "hit_rates": {"ram": 1.0}, "hit_rate": 1.0, "backing_reads": 0,
                 "warnings": [{"kind": "not_in_plan", "message": "most reads ...", "seconds": 1}],
                 "errors": {"manifest_rejected": 1}}
        plan = {"view": "counts", "entries": 4, "files": 2, "positions": 4, "streams": [{}, {}]}
        out = status.render_status("/mnt", stats, plan)
        self.assertIn(status.HIDDEN_NOTE, out)
        self.assertIn("plan: 2 files, 4 reads in 2 stream(s)\n", out)
        self.assertNotIn("stream None", out)
        self.assertIn("tier ram: capacity 1024.0 MiB, 3 served", out)
        self.assertIn("backing: 0 reads\n", out)
        self.assertIn("WARNING (not_in_plan): most reads", out)
        self.assertIn("errors: manifest_rejected 1", out)
        self.assertNotIn("refused", out)
        # A cluster's refused messages (docs/permissions.md), the reasons that occurred.
        stats["peer_refused"] = {"unsealed": 2, "other_cluster": 0, "other_session": 0,
                                 "forged": 1, "replayed": 0}
        self.assertIn("peer messages refused: forged 1, unsealed 2\n",
                      status.render_status("/mnt", stats, plan))
        # Nothing at all (an empty object each) renders too.
        self.assertIn("plan: none registered", status.render_status("/mnt", {}, {}))
        self.assertNotIn(status.HIDDEN_NOTE, status.render_status("/mnt", {}, {}))


class RenderClusterTest(harness.ClairfsCase):
    """The Cluster table under a node's own view (stats key `cluster`): a row per node, this one
    marked, a dead or silent node shown as such, the totals; none outside a cluster. (On real
    daemons: tests/mpi/test_cluster.py, tests/slurm/run_multinode_tests.py.)"""

    def test_cluster_table(self):
        from clairfs.ctl import status
        mib = 1 << 20
        node = {"alive": True, "ram_bytes": mib, "ram_capacity": 4 * mib, "ssd_bytes": 0,
                "ssd_capacity": 0, "backing_bytes": 3 * mib, "peer_bytes_in": mib,
                "peer_bytes_out": 2 * mib}
        cluster = {"nodes": [dict(node, rank=0, state="self", host="n0", age_seconds=0),
                             dict(node, rank=1, state="stale", alive=False, host="n1",
                                  age_seconds=31.25),
                             {"rank": 2, "state": "silent", "alive": False, "host": None,
                              "age_seconds": None}],
                   "totals": {"nodes": 3, "alive": 1, "backing_bytes": 6 * mib,
                              "ram_bytes": 2 * mib, "ram_capacity": 8 * mib,
                              "dataset_bytes": 10 * mib, "peer_bytes_in": 2 * mib,
                              "peer_bytes_out": 4 * mib},
                   "report_period_seconds": 2.0}
        out = status.render_status("/mnt", {"cluster": cluster}, {})
        lines = out.splitlines()
        head = lines.index("Cluster: 3 nodes, 1 alive; backing 6.0 MiB in total "
                           "(dataset 10.0 MiB); reports every 2 s")
        self.assertEqual(lines[head + 1].split(), ["node", "host", "state/age", "RAM", "used/cap",
                                                   "SSD", "used/cap", "backing", "peer", "in",
                                                   "peer", "out"])
        self.assertEqual(lines[head + 2].split(), ["0*", "n0", "self", "1.0/4.0", "MiB", "-",
                                                   "3.0", "MiB", "1.0", "MiB", "2.0", "MiB"])
        self.assertEqual(lines[head + 3].split()[:4], ["1", "n1", "stale", "31.2s"])
        self.assertEqual(lines[head + 4].split(), ["2", "-", "silent", "-", "-", "-", "-", "-"])
        self.assertEqual(lines[head + 5].split()[:4], ["all", "1/3", "alive", "2.0/8.0"])
        self.assertNotIn("Cluster:", status.render_status("/mnt", {}, {}))
