"""The cluster's key under mpiexec: a daemon started in cluster mode without a usable key, or
with another key than the other ranks, refuses to start, says why, and mounts nothing
(cluster/cluster_key.h, cluster/sealed_transport.h; docs/permissions.md, "The cluster's
messages"). Messages refused by the seal are counted in .clairfs/stats (peer_refused): the
unit tests (tests/unit/cluster_seal_test.cc) forge, replay and cross them; here a running
cluster refuses none of its own."""
import os
import subprocess

import harness


class ClusterKeyTest(harness.ClairfsCase):
    def setUp(self):
        super().setUp()
        self.root = self.tmpdir("mpi-key")
        self.ds = os.path.join(self.root, "data")
        os.makedirs(os.path.join(self.ds, "a"))
        with open(os.path.join(self.ds, "a", "f"), "wb") as f:
            f.write(b"x" * 100)
        self.mounts = [os.path.join(self.root, f"mnt{r}") for r in range(2)]
        for m in self.mounts:
            os.mkdir(m)
            harness.register_mount(m)
            self.addCleanup(harness.release_mount, m)

    def launch(self, *ranks_args):
        """mpiexec with one rank per argument list (MPMD), each given its own -o options; the
        completed process (a refusal must end it without a mount)."""
        argv = ["mpiexec", "-disable-auto-cleanup"]
        for r, extra in enumerate(ranks_args):
            if r:
                argv.append(":")
            argv += ["-n", "1", harness.BIN, "--cluster", "-c", "/dev/null",
                     "-o", "cluster.plan_timeout=10", *extra, self.ds,
                     os.path.join(self.root, "mnt{rank}")]
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120, start_new_session=True)
        for m in self.mounts:
            self.assertFalse(harness.is_fuse_mounted(m), f"{m} mounted: {r.stdout}{r.stderr}")
        return r

    def key(self, name, mode=0o600):
        p = harness.write_cluster_key(os.path.join(self.root, name))
        os.chmod(p, mode)
        return p

    def test_cluster_mode_without_a_key_is_refused_with_how_to_make_one(self):
        r = self.launch([], [])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cluster mode needs cluster.key_file", r.stderr)
        self.assertIn("head -c 32 /dev/urandom", r.stderr)

    def test_a_key_others_may_read_is_refused(self):
        k = self.key("open.key", 0o644)
        r = self.launch(["-o", f"cluster.key_file={k}"], ["-o", f"cluster.key_file={k}"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(f"cluster key '{k}': group or others have permissions on it", r.stderr)

    def test_ranks_given_different_keys_refuse_to_start_and_say_which(self):
        a, b = self.key("a.key"), self.key("b.key")
        r = self.launch(["-o", f"cluster.key_file={a}"], ["-o", f"cluster.key_file={b}"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("rank 1 was given another cluster key", r.stderr)
        self.assertIn("rank 0 was given another cluster key", r.stderr)
