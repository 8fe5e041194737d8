"""The peer tier across an emulated network: 3 nodes as network namespaces on one bridge, each
node's link capped at 100 Mbit/s each way (tc tbf), one clairfs daemon per node under hydra's
mpiexec, MPI on TCP between the nodes (tools/bench/netns_lib.sh, docs/emulated_cluster.md).

The cluster comes from tools/bench/netns_cluster.sh (up/down, owner id: this process's pid) and
mpiexec starts each node's proxy through tools/bench/netns_launch.sh, which enters the node's
network namespace only: the daemons' FUSE mounts are this machine's, and the readers read
through them from this process (which node a reader runs in makes no difference to a FUSE
read). The dataset is a plain directory on the test's temp file system, shared by the nodes
like a PFS.

What it checks, per node, on 300 files of about 16 KiB:
  (a) every file read through every node's mount has the original bytes (sha256);
  (b) the cluster read the backing store about once: the nodes' backing_bytes sum to at most
      1.02 x the dataset;
  (c) a node whose daemon is killed mid-epoch leaves the others serving right bytes;
  (d) the peer bytes went over the veths: each node's link carried at least the peer bytes
      its daemon counted since it started (received; and sent, once every byte sent has
      arrived), and together at least a tenth of the dataset (with shared memory the peer
      bytes would not touch the links at all).
Skips (exit 77 when alone) without root, ip, tc, nsenter, mpiexec, /dev/fuse, or veth, bridge
and tbf support. Whatever it sets up goes on every exit path: the harness's cleanups and its
INT/TERM handler take the mounts, mpiexec, then the cluster (netns_cluster.sh down kills what is
left inside the nodes); a later run sweeps the cluster of a run that was SIGKILLed.
"""
import os
import signal
import subprocess
import sys
import threading
import time

import harness
import test_cluster

REPO = harness.REPO
NETNS = os.path.join(REPO, "tools", "bench", "netns_cluster.sh")
NODES = 3
LINK_MBIT = 100


class EmulatedNetwork:
    """netns_cluster.sh up/down around one test: NODES namespaces, their veths, the bridge, the
    launcher's map."""

    def __init__(self, case, root):
        self.case, self.root = case, root
        self.map = os.path.join(root, "hosts.map")
        self.id = str(os.getpid())
        harness.register_teardown(self.down)
        case.addCleanup(harness.release_teardown, self.down)
        r = subprocess.run([NETNS, "up", "--nodes", str(NODES), "--link-mbit", str(LINK_MBIT),
                            "--id", self.id, "--map", self.map],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            case.fail(f"netns_cluster.sh up failed ({r.returncode}): {r.stderr}")
        self.info = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
        self.ips = [self.info[f"ip_{i}"] for i in range(NODES)]
        self.veths = [self.info[f"veth_{i}"] for i in range(NODES)]

    def down(self):
        r = subprocess.run([NETNS, "down", "--id", self.id],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print(f"WARNING: netns_cluster.sh down: {r.stderr}", file=sys.stderr)

    def link_bytes(self, node):
        """(received, sent) by the node's interface: the host end of its veth counts them the
        other way round."""
        d = f"/sys/class/net/{self.veths[node]}/statistics"
        with open(f"{d}/tx_bytes") as rx, open(f"{d}/rx_bytes") as tx:
            return int(rx.read()), int(tx.read())

    def mpiexec_args(self):
        return ["-launcher", "ssh", "-launcher-exec", self.info["launcher"],
                "-iface", self.info["bridge"], "-hosts", ",".join(self.ips)]

    def mpi_env(self):
        """MPI on TCP over the node's veth (netns_mpi_env in netns_lib.sh)."""
        return dict(os.environ, UCX_TLS="tcp", UCX_NET_DEVICES=self.info["dev"],
                    MPIR_CVAR_NOLOCAL="1", NETNS_MAP=self.map)


class NetnsCluster(test_cluster.Cluster):
    """test_cluster.Cluster with one daemon per emulated node: mpiexec starts each rank's proxy
    in its node through the launcher, with MPI on TCP."""

    def __init__(self, case, net, dataset, ram, ssd):
        self.net = net
        # A staging window of 16 files or so: what a node gets from its peers (about 1 MB
        # here) must not all be fetched ahead before the reads start, or killing a node would
        # not be felt and the links would carry nothing while the readers run.
        super().__init__(case, net.root, dataset, NODES, ram=ram, ssd=ssd, staging="256KiB")

    def start(self, timeout=60):
        return super().start(timeout, self.net.mpiexec_args(), self.net.mpi_env())

    def stop(self):
        """As test_cluster's, with less grace: over TCP a daemon's MPI_Finalize usually hangs
        until its 10 s deadline (docs/emulated_cluster.md); whatever is left when mpiexec is
        gone, netns_cluster.sh down kills in the nodes."""
        for m in self.mounts:
            harness.release_mount(m)
        harness.release_proc(self.proc, grace=12.0)
        harness.LOGS.setdefault(self.case.id(), []).append(
            (f"mpiexec (exit {self.proc.returncode})", harness.read_tail(self.log_path)))

    def daemon_pid(self, rank):
        """The pid of rank's serving daemon, found in the rank's node: another MPI suite on the
        machine has ranks of the same numbers."""
        pid = harness.mpi_rank_daemon_pid(
            rank, netns=f"/run/netns/{self.net.info[f'host_{rank}']}")
        if pid is not None:
            return pid
        self.case.fail(f"no daemon for rank {rank} in its node")


class NetnsClusterTest(harness.ClairfsCase):
    FILES = 300
    # test_cluster.ClusterTest's dataset, manifests and readers (its tests stay in test_cluster).
    make_dataset = classmethod(test_cluster.ClusterTest.setUpClass.__func__)
    manifests = test_cluster.ClusterTest.manifests
    entries = staticmethod(test_cluster.ClusterTest.entries)
    register = test_cluster.ClusterTest.register
    read_all = test_cluster.ClusterTest.read_all

    @classmethod
    def setUpClass(cls):
        r = subprocess.run([NETNS, "usable"], capture_output=True, text=True, timeout=60)
        cls.unusable = None
        if r.returncode == 77:  # each test skips with the reason (and counts as skipped)
            cls.unusable = f"no emulated cluster here: {r.stdout.strip()}"
            return
        if r.returncode != 0:
            raise AssertionError(f"netns_cluster.sh usable: {r.stdout}{r.stderr}")
        cls.make_dataset()

    def setUp(self):
        if self.unusable:
            self.skipTest(self.unusable)
        super().setUp()

    def cluster(self, ranks=NODES):
        """The network and the daemons. Each node holds 1.25 / NODES of the dataset."""
        net = EmulatedNetwork(self, self.tmpdir("netns"))
        per_rank = int(self.bytes * 1.25 / NODES)
        c = NetnsCluster(self, net, self.dataset, ram=f"{per_rank // 2}",
                         ssd=f"{per_rank - per_rank // 2}")
        return c.start()

    def peer_bytes(self, c, nodes=range(NODES)):
        """{node: (peer bytes in, peer bytes out)} from the nodes' daemons."""
        return {r: (s["peer_bytes_in"], s["peer_bytes_out"])
                for r, s in ((r, self.stats(c.mounts[r])) for r in nodes)}

    def assert_over_the_links(self, c, nodes, sent=True):
        """(d): each node's link carried at least the peer bytes its daemon received (and with
        sent, sent) since it started; the veths are as old as the daemons' counters, and carry
        MPI's control traffic besides. The counters are read in that order: a daemon counts a
        byte in once it crossed the link. It counts a byte out as it hands it to MPI: check
        `sent` only once every byte sent was received. With shared memory the peer bytes would
        be megabytes and the links' a few kilobytes."""
        peers = self.peer_bytes(c, nodes)
        for r in nodes:
            rx, tx = c.net.link_bytes(r)
            p_in, p_out = peers[r]
            print(f"\n    node {r}: link rx {rx / 1e6:.2f} MB >= peer in {p_in / 1e6:.2f} MB, "
                  f"tx {tx / 1e6:.2f} MB >= peer out {p_out / 1e6:.2f} MB", end="",
                  file=sys.stderr)
            self.assertGreaterEqual(rx, p_in, f"node {r}: link rx vs peer bytes in")
            if sent:
                self.assertGreaterEqual(tx, p_out, f"node {r}: link tx vs peer bytes out")
        # Enough crossed to tell TCP from shared memory: a tenth of the dataset at least.
        self.assertGreater(sum(p[0] for p in peers.values()), 0.1 * self.bytes)

    def read_nodes(self, c, lists, nodes):
        errors = []
        threads = [threading.Thread(target=self.read_all, args=(c.mounts[r], lists[r], errors))
                   for r in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return errors

    def test_every_node_reads_right_bytes_and_the_backing_store_once(self):
        """(a), (b), (d) over 2 epochs, and the simulator's prediction of the placement."""
        c = self.cluster()
        manifests = self.manifests(NODES, epochs=2)
        self.register(c, manifests)
        # The simulator's prediction of this cluster's placement (tools/bench/cluster_scale.cc).
        harness.wait_for(lambda: all(self.plan(m)["cluster"]["unanswered"] == []
                                     for m in c.mounts), 30, "every coordinator to answer")
        test_cluster.check_simulated(self, c, manifests, int(self.bytes * 1.25 / NODES),
                                     256 << 10)
        c.wait_filled()
        errors = self.read_nodes(c, [self.entries(t) for t in manifests], range(NODES))
        self.assertEqual(errors, [])
        stats = [self.stats(m) for m in c.mounts]
        backing = sum(s["backing_bytes"] for s in stats)
        print(f"\n    {NODES} nodes, 2 epochs: backing bytes / dataset = "
              f"{backing / self.bytes:.3f}", end="", file=sys.stderr)
        # Over TCP a big message can finish arriving after a later small one of its sender
        # and tag; the transport keeps their order, so the seal refuses none as a replay.
        for s in stats:
            self.assertEqual(set(s["peer_refused"].values()), {0}, s["peer_refused"])
        self.assertLessEqual(backing, 1.02 * self.bytes)
        self.assertEqual(sum(s["peer_errors"] for s in stats), 0)
        harness.wait_for(lambda: len({sum(x) for x in zip(*self.peer_bytes(c).values())}) == 1,
                         10, "peer bytes in to match peer bytes out")
        self.assert_over_the_links(c, range(NODES))

    def test_a_node_killed_mid_epoch_leaves_the_others_serving(self):
        """(c): the last node's daemon SIGKILLed half-way through the first of 2 epochs."""
        c = self.cluster()
        manifests = self.manifests(NODES, epochs=2)
        self.register(c, manifests)
        c.wait_filled()
        victim = NODES - 1
        lists = [self.entries(t) for t in manifests]
        half = len(lists[0]) // 4  # a half epoch: each manifest holds 2 epochs
        errors = self.read_nodes(c, [lst[:half] for lst in lists], range(NODES))
        self.assertEqual(errors, [])
        os.kill(c.daemon_pid(victim), signal.SIGKILL)
        survivors = [r for r in range(NODES) if r != victim]
        start = time.monotonic()
        errors = self.read_nodes(c, [lst[half:] for lst in lists], survivors)
        self.assertEqual(errors, [])
        self.assertLess(time.monotonic() - start, 30)
        for r in survivors:
            unreachable = self.plan(c.mounts[r])["cluster"]["unreachable"]
            # Only the killed node: a survivor whose MPI progress thread blocked receiving from
            # the dead node stopped answering the others too, before receives had deadlines.
            self.assertEqual(unreachable, [victim])
        self.assertGreater(sum(self.stats(c.mounts[r])["peer_errors"] for r in survivors), 0)
        self.assertIsNone(c.proc.poll(), "mpiexec ended with a node: the others were killed")
        # What was sent to the dead node may be counted out and never cross: in only.
        self.assert_over_the_links(c, survivors, sent=False)

