"""The peer tier under mpiexec: 2 and 4 daemons on one machine, each with its own mountpoint
and cache directory ("{rank}" in both), reading a seeded global shuffle split across ranks
like PyTorch's DistributedSampler."""
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import harness

sys.path.insert(0, os.path.join(harness.REPO, "python"))
import clairfs  # noqa: E402

REPO = harness.REPO
TOOLS = os.path.join(REPO, "tools")
SCALE_BIN = os.environ.get("CLUSTER_SCALE_BIN") or os.path.join(
    os.path.dirname(harness.BIN), "bench", "clairfs-cluster-scale")


def run_tool(*args):
    return subprocess.run([sys.executable, *args], check=True, capture_output=True,
                          text=True).stdout


def check_simulated(case, c, manifests, per_rank, staging):
    """tools/bench/cluster_scale on the manifests c's ranks registered (placed), with their
    capacities (RAM half of per_rank, SSD the rest) and staging window: rank 0's placement and
    the cluster's predicted backing bytes as the daemons computed them, and rank 0's plan
    bytes between what one decision sends and three times that."""
    names = []
    for r, text in enumerate(manifests):
        names.append(os.path.join(c.root, f"manifest{r}"))
        with open(names[-1], "w") as f:
            f.write(text)
    out = subprocess.run(
        [SCALE_BIN, "--manifests", ",".join(names), "--dataset", c.dataset,
         "--capacity", f"{per_rank // 2},{per_rank - per_rank // 2}", "--staging", str(staging)],
        capture_output=True, text=True, check=True, timeout=120).stdout
    sim = json.loads(out.strip().splitlines()[-1])
    real = case.plan(c.mounts[0])["cluster"]
    print(f"\n    rank 0: simulated {sim['node_objects']}, plan bytes sent "
          f"{sim['plan_bytes_sent']}; measured {real['owned']['objects']} held, "
          f"{real['from_peers']['objects']} from peers, plan bytes sent "
          f"{real['plan_bytes_sent']}", end="", file=sys.stderr)
    case.assertTrue(sim["exact"])
    case.assertEqual(sim["node_objects"], {"held": real["owned"]["objects"],
                                           "from_peers": real["from_peers"]["objects"],
                                           "unheld": real["unowned"]["objects"]}, (sim, real))
    case.assertEqual(sim["predicted_backing_bytes"], real["predicted_cluster_backing_bytes"])
    case.assertLessEqual(sim["plan_bytes_sent"], real["plan_bytes_sent"])
    case.assertLessEqual(real["plan_bytes_sent"], 3 * sim["plan_bytes_sent"])


class Cluster:
    """mpiexec running N clairfs daemons; mounts at <root>/mnt<r>, SSD caches at <root>/ssd<r>."""

    def __init__(self, case, root, dataset, ranks, ram, ssd, staging="1MiB", chunk_size=None,
                 plan_timeout=30):
        self.case, self.root, self.dataset, self.ranks = case, root, dataset, ranks
        self.mounts = [os.path.join(root, f"mnt{r}") for r in range(ranks)]
        for m in self.mounts:
            os.makedirs(m, exist_ok=True)
        cfg = harness.config(ram=ram, staging=staging)
        if chunk_size is not None:
            cfg["cache"]["chunk_size"] = chunk_size
            cfg["cache"]["record_chunk_size"] = chunk_size
        cfg["cache"]["tiers"].append(
            {"kind": "ssd", "capacity": ssd, "threads": 2, "dir": f"{root}/ssd{{rank}}"})
        cfg["cluster"] = {"plan_timeout": plan_timeout, "peer_timeout": 2, "down_for": 60,
                          "key_file": harness.write_cluster_key(os.path.join(root, "cluster.key"))}
        self.daemon_log = os.path.join(root, "clairfs.log")  # every rank's lines
        cfg["log"]["file"] = self.daemon_log
        self.cfg_path = harness.write_config(os.path.join(root, "cluster.yaml"), cfg)
        self.log_path = os.path.join(root, "mpiexec.log")
        self.proc = None

    def start(self, timeout=30, launcher=(), env=None):
        """launcher: mpiexec options placing the ranks (an emulated cluster's), env: theirs."""
        argv = ["mpiexec", "-disable-auto-cleanup", *launcher, "-n", str(self.ranks), harness.BIN,
                "--cluster", "-c", self.cfg_path, self.dataset, os.path.join(self.root, "mnt{rank}")]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         env=env)
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

    def wait_placed(self, timeout=30):
        """Until every rank's plan is placed (all ranks' manifests arrived)."""
        deadline = time.monotonic() + timeout
        while True:
            states = [self.case.plan(m)["cluster"]["state"] for m in self.mounts]
            if all(s == "placed" for s in states):
                break
            self.case.assertLess(time.monotonic(), deadline, f"plans not placed: {states}")
            time.sleep(0.05)

    def wait_filled(self, timeout=60):
        """Until every rank's tiers hold what the placement gave them (a job's warm-up)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = True
            for m in self.mounts:
                owned = self.case.plan(m)["cluster"]["owned"]["bytes"]
                held = sum(t["bytes"] for t in self.case.stats(m)["tiers"])
                done &= held >= owned
            if done:
                return
            time.sleep(0.1)
        self.case.fail("the owners did not fill their tiers")

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
        c.wait_placed()

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

    def read_everywhere(self, c, manifests):
        """Every rank reads its manifest's entries through its mount, all at once: the errors."""
        errors = []
        threads = [threading.Thread(target=self.read_all, args=(m, self.entries(t), errors))
                   for m, t in zip(c.mounts, manifests)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return errors

    def run_epochs(self, ranks):
        c = self.cluster(ranks)
        manifests = self.manifests(ranks)
        self.register(c, manifests)
        c.wait_filled()
        self.assertEqual(self.read_everywhere(c, manifests), [])
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
        for s in stats:  # every message sealed, none refused (tests/mpi/test_cluster_key.py)
            self.assertEqual(set(s["peer_refused"].values()), {0}, s["peer_refused"])
        # The plan reports what comes from peers and the cluster's predicted backing traffic.
        plan = self.plan(c.mounts[0])["cluster"]
        self.assertEqual(plan["registered"], list(range(ranks)))
        self.assertGreater(plan["from_peers"]["objects"], 0)
        self.assertEqual(plan["predicted_cluster_backing_bytes"], self.bytes)

    def test_a_rank_that_never_registers_is_named_while_the_others_wait(self):
        c = Cluster(self, self.tmpdir("mpi"), self.dataset, 2, ram="8MiB", ssd="8MiB",
                    plan_timeout=3).start()
        self.write_manifest(c.mounts[0], self.manifests(2)[0])

        def logged(text):
            with open(c.daemon_log, errors="replace") as f:
                return text in f.read()
        info = self.plan(c.mounts[0])["cluster"]
        if info["state"] == "waiting for plans":  # read before the 3 s passed
            self.assertEqual(info["unregistered"], [1])
            self.assertGreater(info["plan_timeout"], info["waiting_seconds"])
        harness.wait_for(lambda: logged("waiting up to 3 s for the plans of rank 1"), 10,
                         "rank 0 to log whom it waits for")
        harness.wait_for(lambda: self.plan(c.mounts[0])["cluster"]["state"] == "placed", 20,
                         "rank 0 to place without rank 1")
        self.assertTrue(logged("rank 1 did not register a plan within 3 s of rank 0's"))
        info = self.plan(c.mounts[0])["cluster"]
        self.assertEqual(info["unregistered"], [1])  # still named after the placement
        self.assertEqual(info["placed_with"], [0])
        # clairfs-ctl status names it too.
        out = subprocess.run([sys.executable, "-m", "clairfs", "status", c.mounts[0]],
                             capture_output=True, text=True, check=True,
                             env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))).stdout
        self.assertIn("no plan from rank 1", out)

    def test_two_ranks_read_the_backing_store_once(self):
        self.run_epochs(2)

    def wait_generations(self, c, want, timeout=30):
        """Until every rank holds every rank's part of generation want, placed."""
        deadline = time.monotonic() + timeout
        while True:
            plans = [self.plan(m)["cluster"] for m in c.mounts]
            if all(p["generations"] == [want] * c.ranks and p["state"] == "placed"
                   for p in plans):
                return plans
            self.assertLess(time.monotonic(), deadline,
                            f"parts of generation {want} not placed: {plans}")
            time.sleep(0.05)

    def test_a_plan_costs_each_rank_about_16_bytes_per_object_it_reads(self):
        """Issue 28: a rank sends each coordinator only the objects it coordinates (key hash,
        size, frequency, first read: about 16 bytes each) and gets one assignment back per
        coordinator; nothing scales with the number of ranks but an empty part. An epoch
        appended re-sends the parts; every part and assignment decodes on every rank."""
        ranks = 2
        c = self.cluster(ranks)
        manifests = self.manifests(ranks, epochs=2)
        self.register(c, manifests)
        first = self.wait_generations(c, 1)
        for p in first:
            objects = p["owned"]["objects"] + p["from_peers"]["objects"] + p["unowned"]["objects"]
            self.assertGreater(objects, 0)
            # Parts out (about 16 B per object read) and assignments out (at most 5 B per
            # entry of the parts it coordinates), headers of a few dozen bytes per rank.
            self.assertLessEqual(p["plan_bytes_sent"], 21 * objects + 64 * ranks, p)
            self.assertLessEqual(p["plan_bytes_received"], 21 * objects + 64 * ranks, p)
            self.assertEqual(p["cluster_objects"], self.FILES, p)
        extra = []
        for m, text in zip(c.mounts, manifests):
            epoch = list(reversed(self.entries(text.split("#epoch")[1])))
            extra.append(epoch)
            self.write_manifest(m, "#epoch\n" + "\n".join(epoch) + "\n", append=True)
        second = self.wait_generations(c, 2)
        for a, b in zip(first, second):
            self.assertEqual(b["parts_sent"], 2 * ranks, b)  # one per rank per registration
            # The parts again, and the assignments of a decision made as each part arrives.
            self.assertLessEqual(b["plan_bytes_sent"] - a["plan_bytes_sent"],
                                 2 * a["plan_bytes_sent"] + 64, (a, b))
        errors = []
        threads = [threading.Thread(target=self.read_all,
                                    args=(m, self.entries(t) + e, errors))
                   for m, t, e in zip(c.mounts, manifests, extra)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(sum(self.stats(m)["peer_protocol_errors"] for m in c.mounts), 0)

    def test_the_simulator_predicts_this_clusters_placement(self):
        """Issue 28: tools/bench/cluster_scale, given these ranks' manifests and capacities,
        runs the same planning code as the daemons and predicts rank 0's placement and the
        cluster's backing reads exactly, and its plan traffic within the re-sends of a live
        run (a decision made again as a late part arrives)."""
        ranks = 4
        c = self.cluster(ranks)
        manifests = self.manifests(ranks, epochs=3)
        self.register(c, manifests)
        self.wait_generations(c, 1)
        check_simulated(self, c, manifests, int(self.bytes * 1.25 / ranks), 1 << 20)

    def test_the_locality_sampler_keeps_reads_on_the_node(self):
        """Issue 29: four nodes reading clairfs.locality's split of 4 epochs (16 samples per
        node and batch): the simulator predicts the placement exactly, every byte is right, the
        backing store is read once, and a node reads from peers only what the sampler gave it
        of others' samples: about 1 / sqrt(2 pi 16), 10 %, where DistributedSampler's node
        reads 3/4 of its objects from peers."""
        try:
            import numpy  # noqa: F401
            import torch  # noqa: F401
        except ImportError as e:
            self.skipTest(f"torch or numpy not importable: {e}")
        ranks, epochs = 4, 4
        env = dict(os.environ, PYTHONPATH=os.path.join(harness.REPO, "python"))
        manifests = [subprocess.run(
            [sys.executable, os.path.join(TOOLS, "make_manifest.py"), "--epochs", str(epochs),
             "--seed", "7", "--rank", str(r), "--world", str(ranks), "--sampler", "locality",
             "--batch", "16", self.dataset], check=True, capture_output=True, text=True,
            env=env, timeout=120).stdout for r in range(ranks)]
        c = self.cluster(ranks)
        self.register(c, manifests)
        self.wait_generations(c, 1)
        check_simulated(self, c, manifests, int(self.bytes * 1.25 / ranks), 1 << 20)
        c.wait_filled()
        self.assertEqual(self.read_everywhere(c, manifests), [])
        stats = [self.stats(m) for m in c.mounts]
        self.assertLessEqual(sum(s["backing_bytes"] for s in stats), 1.02 * self.bytes)
        for r, m in enumerate(c.mounts):
            cluster = self.plan(m)["cluster"]
            held, peers = cluster["owned"]["objects"], cluster["from_peers"]["objects"]
            print(f"\n    node {r}: {held} objects held, {peers} from peers", end="",
                  file=sys.stderr)
            self.assertLess(peers, 0.6 * held)
        # The nodes read 4 x the dataset; about a tenth of that comes from peers (the page
        # cache serves repeated reads, so the daemons' bytes_read is no measure here).
        peer_in = sum(s["peer_bytes_in"] for s in stats)
        print(f"\n    peer bytes in: {peer_in / (epochs * self.bytes):.3f} of the bytes read",
              end="", file=sys.stderr)
        self.assertLess(peer_in, 0.2 * epochs * self.bytes)

    def test_four_ranks_read_the_backing_store_once(self):
        self.run_epochs(4)

    def test_stats_on_one_node_list_every_node_of_the_cluster(self):
        """Three ranks read their epochs; then `.clairfs/stats` on rank 0 (and on rank 2) has a
        `cluster` section listing the 3 nodes alive, each with the backing bytes that node's own
        stats report (the reports trail by at most a period), summing to the totals; and
        `clairfs-ctl status` shows the same, as JSON and as the Cluster table."""
        ranks = 3
        c = self.cluster(ranks)
        manifests = self.manifests(ranks, epochs=2)
        self.register(c, manifests)
        c.wait_filled()
        self.assertEqual(self.read_everywhere(c, manifests), [])

        def agrees(at):
            own = [self.stats(m)["backing_bytes"] for m in c.mounts]
            cluster = self.stats(c.mounts[at]).get("cluster", {})
            nodes = cluster.get("nodes", [])
            return (len(nodes) == ranks and all(n["alive"] for n in nodes)
                    and [n.get("backing_bytes") for n in nodes] == own
                    and cluster["totals"]["backing_bytes"] == sum(own)), own, cluster
        for at in (0, 2):
            try:
                harness.wait_for(lambda: agrees(at)[0], 30, f"rank {at}'s stats to list every node")
            except AssertionError as e:
                self.fail(f"{e}: own backing bytes and rank {at}'s cluster: {agrees(at)[1:]}")
        _, own, cluster = agrees(0)
        print(f"\n    backing bytes per node {own}, cluster total "
              f"{cluster['totals']['backing_bytes']}, report period "
              f"{cluster['report_period_seconds']} s, reports {cluster['reports']}",
              end="", file=sys.stderr)
        nodes = cluster["nodes"]
        self.assertEqual([n["rank"] for n in nodes], [0, 1, 2])
        self.assertEqual([n["state"] for n in nodes], ["self", "alive", "alive"])
        self.assertGreater(sum(own), 0)
        self.assertLessEqual(sum(own), 1.05 * self.bytes)
        for n in nodes:
            self.assertTrue(n["host"])
            self.assertEqual(n["plan"], "placed")
            self.assertGreater(n["plan_generation"], 0)
            self.assertGreater(n["ram_capacity"], 0)
            self.assertGreater(n["ssd_capacity"], 0)
        self.assertEqual(cluster["totals"]["dataset_bytes"], self.bytes)
        self.assertEqual(cluster["reports"]["refused"], 0)
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        view = json.loads(subprocess.run(
            [sys.executable, "-m", "clairfs", "status", "--json", c.mounts[1]],
            capture_output=True, text=True, check=True, env=env).stdout)
        self.assertEqual([n["rank"] for n in view["cluster"]["nodes"]], [0, 1, 2])
        self.assertEqual(view["cluster"]["nodes"][1]["state"], "self")
        text = subprocess.run([sys.executable, "-m", "clairfs", "status", c.mounts[1]],
                              capture_output=True, text=True, check=True, env=env).stdout
        self.assertIn("Cluster: 3 nodes, 3 alive", text)
        self.assertIn("RAM used/cap", text)

    def test_a_rank_killed_mid_epoch_leaves_the_others_serving(self):
        ranks = 4
        c = self.cluster(ranks)
        manifests = self.manifests(ranks, epochs=2)
        self.register(c, manifests)
        c.wait_filled()
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
        # A survivor that asked the dead rank for something marked it down; one that needed
        # nothing more of it (everything it expected from it was staged before the kill) had
        # no reason to find out: MPI reports no error for a dead rank.
        survivors = [m for r, m in enumerate(c.mounts) if r != victim]
        asked = [m for m in survivors if self.stats(m)["peer_errors"] > 0]
        self.assertGreater(len(asked), 0)
        for m in asked:
            self.assertIn(victim, self.plan(m)["cluster"]["unreachable"])
        self.assertIsNone(c.proc.poll(), "mpiexec ended with a rank: the others were killed")


BIG = os.environ.get("CLAIRFS_BIG") == "1"


class MountpointPerRankTest(harness.ClairfsCase):
    """Ranks sharing a machine without {rank} in the mountpoint would stack their mounts on
    one path: each refuses to start (exit 64) with the fix in the message."""

    def test_ranks_on_one_machine_need_rank_in_the_mountpoint(self):
        root = self.tmpdir("mpi-norank")
        ds = os.path.join(root, "data")
        os.makedirs(os.path.join(ds, "a"))
        with open(os.path.join(ds, "a", "f"), "wb") as f:
            f.write(b"x" * 100)
        mnt = os.path.join(root, "mnt")
        os.mkdir(mnt)
        harness.register_mount(mnt)
        self.addCleanup(harness.release_mount, mnt)
        r = subprocess.run(["mpiexec", "-disable-auto-cleanup", "-n", "2", harness.BIN,
                            "--cluster", "-c", "/dev/null", ds, mnt],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 64, r.stdout + r.stderr)
        self.assertIn("{rank}", r.stderr)
        self.assertIn("2 ranks of this launch run on this machine", r.stderr)
        self.assertFalse(harness.is_fuse_mounted(mnt))


class BigFileClusterTest(harness.ClairfsCase):
    """One big file cached in chunks across 2 nodes, read as shuffled records for 3 epochs.

    The dataset is a single file of seeded random bytes cut into records of 16..240 KiB:
    48 MiB in chunks of 1 MiB by default, 2 GiB in chunks of 4 MiB with CLAIRFS_BIG=1
    (opt-in: about 2 GiB of dataset plus 1.5 GiB of SSD cache in the test's temp dir, /dev/shm
    unless CLAIRFS_TEST_TMP says otherwise, and a few minutes; the watchdog is raised to
    match). Each node gets RAM 1/4 and SSD 3/8 of the file: one node alone holds 5/8 of it,
    the two together 5/4, so the file's chunks spread over both nodes and, on each, over both
    tiers. Each rank registers 3 epochs of every record in its own shuffled order and reads
    them through its mount, page cache dropped between epochs, every record's hash checked.
    """
    SIZE = (2 << 30) if BIG else (48 << 20)
    CHUNK = (4 << 20) if BIG else (1 << 20)
    RANKS = 2
    EPOCHS = 3
    NAME = "big.bin"

    @classmethod
    def setUpClass(cls):
        cls.root = cls.class_tmpdir("mpi-big")
        cls.dataset = os.path.join(cls.root, "data")
        os.makedirs(cls.dataset)
        rng = random.Random(13)
        cls.records = []  # (offset, length, sha256)
        offset = 0
        with open(os.path.join(cls.dataset, cls.NAME), "wb") as f:
            while offset < cls.SIZE:
                length = min(rng.randint(16 << 10, 240 << 10), cls.SIZE - offset)
                data = rng.randbytes(length)
                f.write(data)
                cls.records.append((offset, length, hashlib.sha256(data).digest()))
                offset += length

    def setUp(self):
        super().setUp()
        if BIG:  # the default watchdog (CLAIRFS_TEST_TIMEOUT, 150 s) is sized for 48 MiB
            self._watchdog.cancel()
            self._watchdog = threading.Timer(max(harness.TEST_TIMEOUT, 1800), self._on_timeout)
            self._watchdog.daemon = True
            self._watchdog.start()
            self.addCleanup(self._watchdog.cancel)

    def orders(self, rank):
        """Per epoch, the indexes of every record in this rank's own seeded shuffle."""
        out = []
        for epoch in range(self.EPOCHS):
            order = list(range(len(self.records)))
            random.Random(1000 * rank + epoch).shuffle(order)
            out.append(order)
        return out

    def read_epoch(self, mount, order, errors):
        path = os.path.join(mount, self.NAME)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            errors.append(f"{path}: {e}")
            return
        try:
            # Each epoch must reach the daemon, not the kernel's page cache of the last one.
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            for i in order:
                offset, length, digest = self.records[i]
                try:
                    data = os.pread(fd, length, offset)
                except OSError as e:
                    errors.append(f"{path} record {i} at {offset}+{length}: {e}")
                    continue
                if hashlib.sha256(data).digest() != digest:
                    errors.append(f"{path} record {i} at {offset}+{length}: wrong bytes "
                                  f"({len(data)} read)")
        finally:
            os.close(fd)

    def test_two_ranks_read_a_chunked_file_from_the_backing_store_once(self):
        per_rank_ram, per_rank_ssd = self.SIZE // 4, self.SIZE * 3 // 8
        c = Cluster(self, self.tmpdir("mpi-big"), self.dataset, self.RANKS,
                    ram=str(per_rank_ram), ssd=str(per_rank_ssd), staging=str(8 * self.CHUNK),
                    chunk_size=str(self.CHUNK)).start()
        orders = [self.orders(r) for r in range(self.RANKS)]
        for m, rank_orders in zip(c.mounts, orders):
            clairfs.register_records(m, [[(self.NAME, self.records[i][0], self.records[i][1])
                                          for i in order] for order in rank_orders])
        c.wait_placed()
        plans = [self.plan(m) for m in c.mounts]
        for r, p in enumerate(plans):
            self.assertEqual(p["chunk_size"], self.CHUNK)
            self.assertEqual(p["chunked_files"], 1)
            self.assertEqual(p["range_entries"], self.EPOCHS * len(self.records))
            self.assertEqual(p["chunks"], -(-self.SIZE // self.CHUNK))
            held = {t["name"]: t["bytes"] for t in p["tiers"]}
            # The file spans both tiers of both nodes.
            self.assertGreater(held.get("ram", 0), 0, f"rank {r}: {p['tiers']}")
            self.assertGreater(held.get("ssd", 0), 0, f"rank {r}: {p['tiers']}")
            self.assertGreater(p["cluster"]["owned"]["bytes"], 0)
            self.assertLess(p["cluster"]["owned"]["bytes"], self.SIZE)
        self.assertEqual(sum(p["cluster"]["owned"]["bytes"] for p in plans), self.SIZE)
        c.wait_filled(timeout=600 if BIG else 60)
        start = time.monotonic()
        backing_after = []
        for epoch in range(self.EPOCHS):
            errors = []
            threads = [threading.Thread(target=self.read_epoch,
                                        args=(m, orders[r][epoch], errors))
                       for r, m in enumerate(c.mounts)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(errors[:20], [], f"epoch {epoch}: {len(errors)} bad reads")
            backing_after.append(sum(self.stats(m)["backing_bytes"] for m in c.mounts))
        elapsed = time.monotonic() - start
        stats = [self.stats(m) for m in c.mounts]
        for s in stats:  # every epoch's bytes reached the daemon (page cache dropped)
            self.assertGreaterEqual(s["bytes_read"], self.EPOCHS * self.SIZE)
        backing = sum(s["backing_bytes"] for s in stats)
        peer_in = sum(s["peer_bytes_in"] for s in stats)
        peer_out = sum(s["peer_bytes_out"] for s in stats)
        print(f"\n    {self.SIZE >> 20} MiB file, chunks of {self.CHUNK >> 20} MiB, "
              f"{len(self.records)} records, 2 ranks x {self.EPOCHS} epochs in {elapsed:.1f}s: "
              f"backing bytes / file = {backing / self.SIZE:.3f} (after each epoch: "
              f"{', '.join(f'{b / self.SIZE:.3f}' for b in backing_after)}), "
              f"peer bytes in = {peer_in / self.SIZE:.3f} x file", file=sys.stderr)
        # Every chunk has one owner, which read it from the backing store once (before the
        # epochs, in wait_filled); the other rank gets it from that owner. Ideal and measured:
        # exactly 1.0. The 10% slack allows a few chunks read twice when a peer request
        # times out on a loaded 2-core machine (peer_timeout 2 s, then the backing store
        # serves the read), which is not a property of the placement; without the warm-up a
        # rank's demand reads also race the owner's prefetch (1.02..1.10 measured on 48 MiB).
        # No sharing would be 2.0, three epochs without a cache 6.0.
        self.assertLessEqual(backing, 1.1 * self.SIZE)
        self.assertGreater(peer_in, 0)
        # A push still on its way when the epochs end is counted out by its sender at once and
        # in by its receiver when it handles it (CI saw one 1 MiB chunk between the two): the
        # sums must come to agree.
        def agree():
            now = [self.stats(m) for m in c.mounts]
            return sum(s["peer_bytes_in"] for s in now) == sum(s["peer_bytes_out"] for s in now)
        harness.wait_for(agree, 10, "peer bytes in to match peer bytes out")
        self.assertEqual(sum(s["peer_errors"] for s in stats), 0)
        self.assertEqual(plans[0]["cluster"]["predicted_cluster_backing_bytes"], self.SIZE)
