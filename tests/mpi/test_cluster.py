"""The peer tier under mpiexec: 2 and 4 daemons on one machine, each with its own mountpoint
and cache directory ("{rank}" in both), reading a seeded global shuffle split across ranks
like PyTorch's DistributedSampler."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import harness

REPO = harness.REPO
TOOLS = os.path.join(REPO, "tools")


def run_tool(*args):
    return subprocess.run([sys.executable, *args], check=True, capture_output=True,
                          text=True).stdout


class Cluster:
    """mpiexec running N clairfs daemons; mounts at <root>/mnt<r>, SSD caches at <root>/ssd<r>."""

    def __init__(self, case, root, dataset, ranks, ram, ssd, staging="1MiB"):
        self.case, self.root, self.dataset, self.ranks = case, root, dataset, ranks
        self.mounts = [os.path.join(root, f"mnt{r}") for r in range(ranks)]
        for m in self.mounts:
            os.makedirs(m, exist_ok=True)
        cfg = harness.config(ram=ram, staging=staging)
        cfg["cache"]["tiers"].append(
            {"kind": "ssd", "capacity": ssd, "threads": 2, "dir": f"{root}/ssd{{rank}}"})
        cfg["cluster"] = {"plan_timeout": 30, "peer_timeout": 2, "down_for": 60}
        self.cfg_path = harness.write_config(os.path.join(root, "cluster.yaml"), cfg)
        self.log_path = os.path.join(root, "mpiexec.log")
        self.proc = None

    def start(self, timeout=30):
        argv = ["mpiexec", "-disable-auto-cleanup", "-n", str(self.ranks), harness.BIN,
                "-c", self.cfg_path, self.dataset, os.path.join(self.root, "mnt{rank}")]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        harness.register_proc(self.proc)
        for m in self.mounts:
            harness.register_mount(m)
        self.case.addCleanup(self.stop)
        deadline = time.monotonic() + timeout
        while not all(harness.is_fuse_mounted(m) for m in self.mounts):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.case.fail(f"cluster did not mount: {harness.read_tail(self.log_path)}")
            time.sleep(0.05)
        return self

    def stop(self):
        for m in self.mounts:
            harness.release_mount(m)
        # A rank whose peer died waits for MPI_Finalize at most 10 s, then exits.
        harness.release_proc(self.proc, grace=25.0)
        harness.LOGS.setdefault(self.case.id(), []).append(
            (f"mpiexec (exit {self.proc.returncode})", harness.read_tail(self.log_path)))

    def daemon_pid(self, rank):
        """The pid of rank's serving daemon: the clairfs whose parent is its supervisor."""
        pid = harness.mpi_rank_daemon_pid(rank)
        if pid is None:
            self.case.fail(f"no daemon for rank {rank}")
        return pid


class ClusterTest(harness.ClairfsCase):
    FILES = 500

    @classmethod
    def setUpClass(cls):
        cls.root = cls.class_tmpdir("mpi-data")
        cls.dataset = os.path.join(cls.root, "data")
        run_tool(os.path.join(TOOLS, "make_dataset.py"), "--files", str(cls.FILES),
                 "--mean-kb", "16", "--seed", "11", cls.dataset)
        cls.digest = {}
        cls.bytes = 0
        for d, _, files in os.walk(cls.dataset):
            for f in files:
                p = os.path.join(d, f)
                with open(p, "rb") as fh:
                    data = fh.read()
                cls.digest[os.path.relpath(p, cls.dataset)] = hashlib.sha256(data).digest()
                cls.bytes += len(data)

    def manifests(self, ranks, epochs=3, seed=7):
        return [run_tool(os.path.join(TOOLS, "make_manifest.py"), "--epochs", str(epochs),
                         "--seed", str(seed), "--rank", str(r), "--world", str(ranks),
                         self.dataset) for r in range(ranks)]

    @staticmethod
    def entries(manifest):
        return [l for l in manifest.splitlines() if l and not l.startswith("#")]

    def cluster(self, ranks):
        """Each rank holds 1.25 / ranks of the dataset (RAM + SSD): alone none holds it,
        together all, with room to spare for files that fit neither tier whole."""
        per_rank = int(self.bytes * 1.25 / ranks)
        c = Cluster(self, self.tmpdir("mpi"), self.dataset, ranks,
                    ram=f"{per_rank // 2}", ssd=f"{per_rank - per_rank // 2}")
        return c.start()

    def register(self, c, manifests):
        for m, text in zip(c.mounts, manifests):
            self.write_manifest(m, text)
        deadline = time.monotonic() + 30
        while True:
            states = [self.plan(m)["cluster"]["state"] for m in c.mounts]
            if all(s == "placed" for s in states):
                break
            self.assertLess(time.monotonic(), deadline, f"plans not placed: {states}")
            time.sleep(0.05)

    def wait_filled(self, c, timeout=60):
        """Until every rank's tiers hold what the placement gave them (a job's warm-up)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = True
            for m in c.mounts:
                owned = self.plan(m)["cluster"]["owned"]["bytes"]
                held = sum(t["bytes"] for t in self.stats(m)["tiers"])
                done &= held >= owned
            if done:
                return
            time.sleep(0.1)
        self.fail("the owners did not fill their tiers")

    def read_all(self, mount, entries, errors):
        """Reads entries in order as a loader worker would, recording wrong or failed reads."""
        for rel in entries:
            try:
                with open(os.path.join(mount, rel), "rb") as f:
                    data = f.read()
            except OSError as e:
                errors.append(f"{mount}/{rel}: {e}")
                continue
            if hashlib.sha256(data).digest() != self.digest[rel]:
                errors.append(f"{mount}/{rel}: wrong bytes")

    def run_epochs(self, ranks):
        c = self.cluster(ranks)
        manifests = self.manifests(ranks)
        self.register(c, manifests)
        self.wait_filled(c)
        errors = []
        threads = [threading.Thread(target=self.read_all, args=(m, self.entries(t), errors))
                   for m, t in zip(c.mounts, manifests)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        stats = [self.stats(m) for m in c.mounts]
        backing = sum(s["backing_bytes"] for s in stats)
        peer_in = sum(s["peer_bytes_in"] for s in stats)
        peer_out = sum(s["peer_bytes_out"] for s in stats)
        print(f"\n    {ranks} ranks, 3 epochs: backing bytes / dataset = "
              f"{backing / self.bytes:.3f}, peer bytes = {peer_in}", file=sys.stderr)
        self.assertLessEqual(backing, 1.05 * self.bytes)
        self.assertGreater(peer_in, 0)
        self.assertEqual(peer_in, peer_out)  # every byte received was sent by a rank
        self.assertEqual(sum(s["peer_errors"] for s in stats), 0)
        # The plan reports what comes from peers and the cluster's predicted backing traffic.
        plan = self.plan(c.mounts[0])["cluster"]
        self.assertEqual(plan["registered"], list(range(ranks)))
        self.assertGreater(plan["from_peers"]["objects"], 0)
        self.assertEqual(plan["predicted_cluster_backing_bytes"], self.bytes)

    def test_two_ranks_read_the_backing_store_once(self):
        self.run_epochs(2)

    def test_four_ranks_read_the_backing_store_once(self):
        self.run_epochs(4)

    def test_a_rank_killed_mid_epoch_leaves_the_others_serving(self):
        ranks = 4
        c = self.cluster(ranks)
        manifests = self.manifests(ranks, epochs=2)
        self.register(c, manifests)
        self.wait_filled(c)
        victim = ranks - 1
        errors = []
        lists = [self.entries(t) for t in manifests]
        half = len(lists[0]) // 4  # a half epoch: each manifest holds 2 epochs
        for r in range(ranks):
            self.read_all(c.mounts[r], lists[r][:half], errors)
        os.kill(c.daemon_pid(victim), signal.SIGKILL)
        threads = [threading.Thread(target=self.read_all, args=(c.mounts[r], lists[r][half:],
                                                                 errors))
                   for r in range(ranks) if r != victim]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        # Each survivor waited for the dead peer once (peer_timeout), then skipped it.
        self.assertLess(time.monotonic() - start, 30)
        survivors = [m for r, m in enumerate(c.mounts) if r != victim]
        for m in survivors:
            self.assertIn(victim, self.plan(m)["cluster"]["unreachable"])
        self.assertGreater(sum(self.stats(m)["peer_errors"] for m in survivors), 0)
        self.assertIsNone(c.proc.poll(), "mpiexec ended with a rank: the others were killed")
