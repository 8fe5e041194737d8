#!/usr/bin/env python3
"""clairfs's cluster cache under a real multi-node Slurm on this machine (docs/slurm.md, "One
cache for a multi-node job" and "A cluster cache from a batch script").

tests/slurm/multinode_slurm.py starts munged and slurmctld, and 4 nodes, each a network and a
mount namespace of its own with its own slurmd: a FUSE mount made on a node is seen by that
node alone, at the same path as on every other node (inside the node-local directory), as on
a real cluster; each node's /dev/fuse is open to users (Debian's udev rule). Jobs run as
nobody on 3 of the nodes:
- the batch script of docs/slurm.md (one daemon per node, srun --mpi=pmi2), each node's rank
  registering its order and reading every byte through its node's mount: the store is read
  once between the nodes, the rest comes from the peers, no message is refused, nothing is left;
  then the same with the last node's daemon SIGKILLed after the tiers filled: the other nodes
  read every byte right, reads on the killed node fail, the job ends normally;
- the SPANK plugin's cluster (multinode=cluster): sbatch -N 3 --clairfs, the same checks, and
  the job's directory and key gone from every node afterwards; --clairfs-cache=node (one mount
  per node); a cluster that cannot start (bad cluster_config) or be prepared (an open
  cluster_secret) fails the job with the reason and drains no node; an interactive srun job
  (no batch step) gets one cache the same way; a requeue onto a partly
  different node set (n0-n2, then n1-n3) reads about a third of the dataset from the store, the
  staying nodes' disk tiers (cluster_ssd) serving the rest.

Environment: CLAIRFS_BIN (meson test sets it and the slurm test's others); CLAIRFS_TEST_KEEP=1
keeps the temporary directory (job outputs, Slurm's and clairfs's logs, per node).
Exit status: 0 passed, 1 failed, 77 skipped (not root, no /dev/fuse, Slurm/munge missing, or
network namespaces unusable: tools/bench/netns_cluster.sh usable).
"""
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from slurm_cluster import _which, missing_binaries, run_case, wait_for, write_job_inputs  # noqa: E402
from multinode_slurm import MultiNodeSlurm, netns_unusable  # noqa: E402
import harness  # noqa: E402  (multinode_slurm put tests/fs on the path)

NODES = 3  # the nodes of a job; the cluster has one more, n3, for a requeue onto other nodes
FIRST = ",".join(f"n{i}" for i in range(NODES))  # the jobs' nodes
NOBODY = (65534, 65534)
CLAIRFS = os.environ.get("CLAIRFS_BIN", "")
HELPER = os.environ.get("CLAIRFS_SLURM_HELPER", "")
PLUGIN = os.environ.get("CLAIRFS_SPANK_PLUGIN", "")
VERIFY = os.path.join(HERE, "verify_dataset.py")
PKG = os.path.realpath(os.path.join(HERE, "..", "..", "python"))  # clairfs-ctl's package


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (Slurm's daemons, network and mount namespaces)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    missing = missing_binaries() + [b for b in ("srun", "scancel", "nsenter", "unshare") if _which(b) is None]
    if missing:
        return "not installed: " + " ".join(missing) + " (apt-get install slurmctld slurmd slurm-client munge)"
    return netns_unusable()


def make_dataset(root, files=60, seed=11):
    """`files` files of 0 bytes to 150 kB in 4 directories (about 4.3 MB); returns {relative
    path: sha256}."""
    rng = random.Random(seed)
    sizes = [0, 1, 4095, 4096] + [rng.randrange(1, 150_000) for _ in range(files - 4)]
    digests = {}
    for i, size in enumerate(sizes):
        rel = os.path.join(f"class{i % 4}", f"sample{i:03d}.bin")
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        data = rng.randbytes(size)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
        digests[rel] = hashlib.sha256(data).hexdigest()
    return digests


class MultiNodeClusterCache(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="clairfs-slurm-multi-")
        os.chmod(cls.tmp, 0o755)  # the jobs' user reaches the dataset, scripts and outputs
        # Removed after the cluster's own teardown, also on a SIGTERM or an exit without
        # tearDownClass (the harness runs its teardowns last registered first).
        harness.register_teardown(cls.remove_tmp)
        # The jobs run as nobody, whose daemons mount through fusermount3: each node's /dev/fuse
        # is open to every user (users_open_fuse), as Debian's udev rule makes it.
        cls.user = NOBODY
        cls.dataset = os.path.join(cls.tmp, "data", "ds1")
        cls.digests = make_dataset(cls.dataset)
        cls.total = sum(os.path.getsize(os.path.join(cls.dataset, p)) for p in cls.digests)
        cls.expected, cls.manifest, cls.out = write_job_inputs(cls.tmp, cls.digests)
        root = os.path.join(cls.tmp, "slurm")
        net_id = str(os.getpid())
        # Unprivileged jobs make their mountpoints in the node-local directory, as in /tmp.
        cls.cluster = MultiNodeSlurm(root, NODES + 1, cls.plugstack(os.path.join(root, "node-local"), net_id),
                                     node_local_mode=0o1777, net_id=net_id, users_open_fuse=True)
        os.makedirs(cls.cluster.root)
        try:
            cls.cluster.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def plugstack(cls, node_local, net_id):
        """The plugin's line (none when it was not built): multi-node jobs get one cluster cache
        by default; mounts and state in the node-local directory; the daemons' MPI on TCP
        between the nodes (their interface is named like the bridge: multinode_slurm.py)."""
        if not PLUGIN:
            return []
        cls.secret = os.path.join(cls.tmp, "cluster.secret")
        with open(cls.secret, "wb") as f:
            f.write(os.urandom(64))
        os.chmod(cls.secret, 0o600)
        cls.cluster_config = os.path.join(cls.tmp, "cluster.yaml")
        with open(cls.cluster_config, "w") as f:  # each node holds 0.4 of the dataset, on disk
            f.write(f"cache:\n  tiers:\n    - {{kind: ssd, capacity: {int(cls.total * 0.4)}, dir: /nonexistent}}\n"
                    f"  staging: {{capacity: 1MiB}}\n")
        node_config = os.path.join(cls.tmp, "node.yaml")
        with open(node_config, "w") as f:
            f.write("cache:\n  tiers:\n    - {kind: ram, capacity: 64MiB}\ncontrol:\n  group: nogroup\n"
                    f"log:\n  file: {node_local}/node-clairfs.log\n")
        settings = [f"helper={HELPER}", f"clairfs={CLAIRFS}", f"mount_root={node_local}/mnt",
                    f"state_dir={node_local}/state", f"allow={os.path.dirname(cls.dataset)}",
                    f"config={node_config}", "cgroup=none", "timeout=60", "multinode=cluster",
                    f"cluster_secret={cls.secret}", f"cluster_config={cls.cluster_config}",
                    f"cluster_ssd={node_local}/ssd", "cluster_ssd_tier=0",
                    "cluster_env=UCX_TLS=tcp", f"cluster_env=UCX_NET_DEVICES=cfs{net_id}br",
                    "cluster_env=MPIR_CVAR_NOLOCAL=1"]
        return ["required " + PLUGIN + " " + " ".join(settings)]

    @classmethod
    def tearDownClass(cls):
        try:
            cls.cluster.stop()
        finally:
            harness.release_teardown(cls.remove_tmp)

    @classmethod
    def remove_tmp(cls):
        if os.environ.get("CLAIRFS_TEST_KEEP"):
            print(f"slurm_multinode: kept {cls.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    # --- helpers --------------------------------------------------------------------------
    def job_dir(self, tag):
        work = os.path.join(self.tmp, tag)
        os.mkdir(work)
        os.chown(work, *self.user)
        cfg = os.path.join(work, "clairfs.yaml")
        with open(cfg, "w") as f:  # each node holds 0.4 of the dataset: together all of it
            f.write(f"cache:\n  tiers:\n    - {{kind: ram, capacity: {int(self.total * 0.4)}}}\n"
                    f"  staging: {{capacity: 1MiB}}\n"
                    f"log: {{file: {self.cluster.node_local}/clairfs-{tag}.log}}\n")
        return work, cfg

    def script(self, work, cfg, kill_last=False):
        """docs/slurm.md's batch script on this cluster's node-local path, with
        verify_dataset.py as the training; kill_last: the last node's serving daemon is
        SIGKILLed once every node's tiers are filled, the other nodes then read, and the job
        unmounts the dead mount lazily."""
        start = f"""set -eu
export PYTHONPATH={PKG}
key={work}/job-$SLURM_JOB_ID.key
(umask 077 && head -c 32 /dev/urandom > "$key")
mnt={self.cluster.node_local}/clairfs-$SLURM_JOB_ID   # node-local: the same path on every node
srun --ntasks-per-node=1 mkdir -p "$mnt"
# The daemons; each records its pid (clairfs's supervisor: bash execs it) beside its mountpoint.
# XDG_RUNTIME_DIR: an unprivileged daemon's control mount goes there, node-local too.
srun --overlap --ntasks-per-node=1 --mpi=pmi2 bash -c \\
  'export XDG_RUNTIME_DIR=$0.run && mkdir -m 700 "$XDG_RUNTIME_DIR" && echo $$ > "$0.pid" && exec "$@"' "$mnt" \\
  {CLAIRFS} --cluster -f -c {cfg} -o cluster.key_file="$key" {self.dataset} "$mnt" &
daemons=$!
srun --overlap --ntasks-per-node=1 python3 -m clairfs wait --mounted "$mnt" --timeout 60
# each node sees its own mount alone at the path (in its own mount namespace)
srun --overlap --ntasks-per-node=1 bash -c \\
  'echo "$SLURMD_NODENAME sees: $(findmnt -n -o FSTYPE --mountpoint "$0" | tr "\\n" " ")"' "$mnt"
echo "t=$EPOCHREALTIME mounted on every node"
srun --overlap --ntasks-per-node=1 bash -c \\
  'python3 -m clairfs register "$0" "$1" && python3 -m clairfs wait "$0" --timeout 60' "$mnt" {self.manifest}
echo "t=$EPOCHREALTIME filled on every node"
read_all='python3 "$1" "$0" "$2" && cat "$0/.clairfs/stats" > "$0.stats"'
"""
        if not kill_last:
            middle = f"""srun --overlap --ntasks-per-node=1 bash -c "$read_all" "$mnt" {VERIFY} {self.expected}
echo "t=$EPOCHREALTIME read on every node"
srun --overlap --ntasks-per-node=1 fusermount3 -u "$mnt"
wait "$daemons"
"""
        else:
            middle = f"""nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
victim=${{nodes[-1]}} others=$((${{#nodes[@]}} - 1))
echo "victim=$victim"
# The serving daemon is the supervisor's child; once it is gone, reads there must fail.
srun --overlap -N 1 -n 1 -w "$victim" bash -c '
  daemon=$(pgrep -P "$(cat "$0.pid")" -x clairfs)
  [ -n "$daemon" ] || {{ echo "no serving daemon under the supervisor $(cat "$0.pid")"; exit 1; }}
  kill -KILL $daemon
  for i in $(seq 100); do [ -e /proc/$daemon ] || break; sleep 0.1; done
  [ ! -e /proc/$daemon ] || {{ echo "the daemon $daemon is still there"; exit 1; }}
  if python3 "$1" "$0" "$2" > /dev/null 2>&1; then echo "the killed node still reads"; exit 1; fi
  echo "killed the daemon $daemon: reads on $SLURMD_NODENAME fail"' "$mnt" {VERIFY} {self.expected}
echo "t=$EPOCHREALTIME killed"
srun --overlap -N "$others" -n "$others" -x "$victim" bash -c "$read_all" "$mnt" {VERIFY} {self.expected}
echo "t=$EPOCHREALTIME read on the other nodes"
srun --overlap -N "$others" -n "$others" -x "$victim" fusermount3 -u "$mnt"
# The dead mount, lazily; and the killed daemon's control mount, which an unprivileged daemon
# leaves behind (root's goes with the daemon).
srun --overlap -N 1 -n 1 -w "$victim" bash -c 'fusermount3 -u -z "$0"
  findmnt -rn -t fuse.clairfs-control -o SOURCE,TARGET | while read -r source target; do
    if [ "$source" = "clairfs-control:$0" ]; then fusermount3 -u -z "$target"; echo "unmounted $target"; fi
  done' "$mnt"
status=0
wait "$daemons" || status=$?
echo "the daemons' step ended with status $status"
"""
        end = 'echo "t=$EPOCHREALTIME daemons ended"\nrm -f "$key"\necho "cluster done"\n'
        return "#!/bin/bash\n" + start + middle + end

    def run_job(self, work, cfg, kill_last=False):
        job = self.cluster.sbatch([f"--output={self.out}/job-%j.out", "-N", str(NODES), "--ntasks-per-node=1",
                                   "-w", FIRST],
                                  self.script(work, cfg, kill_last), user=self.user, env=self.cluster.mpi_env)
        started = time.monotonic()
        fields = self.cluster.wait_job(job, timeout=120)
        print(f"\n    job {job}: {fields['JobState']} {fields.get('ExitCode')} after "
              f"{time.monotonic() - started:.1f} s", file=sys.stderr)
        return job, fields

    def output(self, job):
        with open(f"{self.out}/job-{job}.out", errors="replace") as f:
            return f.read()

    def report(self, job, tag):
        """The job's output and the tail of each node's clairfs log, for a failure message."""
        text = self.output(job)
        for i in range(NODES):
            path = os.path.join(self.cluster.node_dir(i), f"clairfs-{tag}.log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    text += f"\n--- clairfs log of n{i}\n" + f.read()[-4000:]
        return text

    def stats(self, job, i):
        with open(os.path.join(self.cluster.node_dir(i), f"clairfs-{job}.stats")) as f:
            return json.load(f)

    def assert_nothing_left(self, job):
        """No FUSE mount in a node-local path or of clairfs on any node, no clairfs process,
        no job process, every node idle."""
        mnt = os.path.join(self.cluster.node_local, f"clairfs-{job}")

        def node_local(path):
            return path.startswith(self.cluster.node_local + "/")

        def mounts():  # this job's mounts and their control mounts (not the machine's, seen in every node)
            return {i: [m for m in self.cluster.node_mounts(i)
                        if node_local(m[0]) or node_local(m[2].partition("clairfs-control:")[2])]
                    for i in range(NODES)}
        for what, left in (("mounts on the nodes", lambda: {i: m for i, m in mounts().items() if m}),
                           ("clairfs processes", lambda: harness.daemons_of(mnt)),
                           ("job processes", lambda: self.cluster.leftovers())):
            try:
                wait_for(f"no {what} left", lambda: not left(), 20)
            except TimeoutError:
                self.fail(f"{what} left after job {job}: {left()}")
        self.cluster.wait_idle()

    def plugin_job(self, tag, *args, nodes=FIRST, then=""):
        """A job on nodes (NODES of them) with --clairfs (and args): each node waits for its
        plan, reads every byte through $CLAIRFS_MOUNT and saves its stats, then the batch
        script runs `then` (lines of bash, on the first node); returns (job, fields, output)."""
        if not PLUGIN:
            self.skipTest("no SPANK plugin in this build (slurm/spank.h missing: libslurm-dev)")
        script = f"""#!/bin/bash
set -eu
export PYTHONPATH={PKG}
echo "mount=$CLAIRFS_MOUNT"
srun --ntasks-per-node=1 bash -c 'python3 -m clairfs wait "$CLAIRFS_MOUNT" --timeout 60 &&
  python3 "$0" "$CLAIRFS_MOUNT" "$1" && cat "$CLAIRFS_MOUNT/.clairfs/stats" > "$2/$SLURM_JOB_ID-$SLURMD_NODENAME.stats"' \
  {VERIFY} {self.expected} {self.out}
{then}
echo "{tag} done"
"""
        job = self.cluster.sbatch([f"--output={self.out}/job-%j.out", "-N", str(NODES), "--ntasks-per-node=1",
                                   "-w", nodes, f"--clairfs={self.dataset}", f"--clairfs-manifest={self.manifest}"] + list(args),
                                  script, user=self.user)
        started = time.monotonic()
        fields = self.cluster.wait_job(job, timeout=150)
        print(f"\n    job {job} ({tag}): {fields['JobState']} {fields.get('ExitCode')} after "
              f"{time.monotonic() - started:.1f} s", file=sys.stderr)
        return job, fields, self.output(job)

    def assert_read_once(self, stats, how, out):
        """The nodes' stats together: the store read at most 1.02 x the dataset, the peers
        carried the rest, no message refused."""
        backing = sum(s["backing_bytes"] for s in stats)
        peer_in = sum(s["peer_bytes_in"] for s in stats)
        print(f"    {len(stats)} nodes {how}: backing bytes / dataset = {backing / self.total:.3f}, "
              f"peer bytes in = {peer_in}, per node {[s['backing_bytes'] for s in stats]}", file=sys.stderr)
        self.assertLessEqual(backing, 1.02 * self.total, out)
        self.assertGreater(peer_in, 0, out)
        for s in stats:
            self.assertEqual(set(s["peer_refused"].values()), {0}, s["peer_refused"])

    def assert_plugin_released(self, job, out):
        """Nothing of the job on any node: no mount under the node-local directory, no clairfs
        process for the job's mountpoint, the job's directory (key included) gone, no job
        process, every node idle."""
        mountpoint = next(line[len("mount="):] for line in out.splitlines() if line.startswith("mount="))
        jobs = os.path.join("mnt", "jobs")

        def left():
            what = {}
            for i in range(NODES):
                mounts = [m for m in self.cluster.node_mounts(i)
                          if m[0].startswith(self.cluster.node_local + "/")
                          or m[2].partition("clairfs-control:")[2].startswith(self.cluster.node_local + "/")]
                dirs = os.listdir(os.path.join(self.cluster.node_dir(i), jobs)) \
                    if os.path.isdir(os.path.join(self.cluster.node_dir(i), jobs)) else []
                if mounts or dirs:
                    what[f"n{i}"] = (mounts, dirs)
            daemons = harness.daemons_of(mountpoint)
            if daemons:
                what["daemons"] = daemons
            if self.cluster.leftovers():
                what["job processes"] = self.cluster.leftovers()
            return what
        try:
            wait_for("nothing of the job left", lambda: not left(), 30)
        except TimeoutError:
            self.fail(f"left after job {job}: {left()}")
        self.cluster.wait_idle()

    # --- tests ----------------------------------------------------------------------------
    def test_1_cluster_cache_on_three_nodes(self):
        """docs/slurm.md's batch script on 3 nodes, one daemon each at one path: every byte
        right through every node's mount, the store read once between them, peers serve the
        rest, no message refused, nothing left after the job."""
        work, cfg = self.job_dir("cluster")
        job, fields = self.run_job(work, cfg)
        out = self.report(job, "cluster")
        self.assertEqual((fields["JobState"], fields.get("ExitCode")), ("COMPLETED", "0:0"), out)
        self.assertEqual(out.count(f"verified {len(self.digests)} files"), NODES, out)
        self.assertEqual(out.count("mounted: "), NODES, out)
        for i in range(NODES):
            self.assertIn(f"n{i} sees: fuse.clairfs \n", out)
        self.assertIn("cluster done", out)
        self.assert_nothing_left(job)
        self.assert_read_once([self.stats(job, i) for i in range(NODES)], "under srun --mpi=pmi2", out)

    def test_2_a_killed_node_leaves_the_others_reading(self):
        """The last node's daemon SIGKILLed after the tiers filled and before the reads: the
        other nodes read every byte right, the killed node's reads fail, the job unmounts the
        dead mount, completes, and nothing is left on any node."""
        work, cfg = self.job_dir("killed")
        job, fields = self.run_job(work, cfg, kill_last=True)
        out = self.report(job, "killed")
        self.assertEqual((fields["JobState"], fields.get("ExitCode")), ("COMPLETED", "0:0"), out)
        self.assertIn(f"victim=n{NODES - 1}", out)
        self.assertIn(f"reads on n{NODES - 1} fail", out)
        self.assertEqual(out.count(f"verified {len(self.digests)} files"), NODES - 1, out)
        self.assertIn("cluster done", out)
        self.assert_nothing_left(job)
        for i in range(NODES - 1):
            self.assertEqual(set(self.stats(job, i)["peer_refused"].values()), {0})


    def test_3_the_plugin_gives_a_multi_node_job_one_cache(self):
        """`sbatch -N 3 --clairfs=DS --clairfs-manifest=FILE` as nobody, the administrator's
        default being one cache per multi-node job: the plugin starts the job's daemons (one
        per node, srun --mpi=pmi2, as the job's user, a key derived for the job), the script
        starts once every node's mount answers, every node reads every byte right, the store is
        read once for the job and the peers carry the rest, no message is refused; after the
        job nothing is mounted, running or kept on any node (the key neither)."""
        job, fields, out = self.plugin_job("cluster", then=self.cluster_status_script())
        self.assertEqual((fields["JobState"], fields.get("ExitCode")), ("COMPLETED", "0:0"), out)
        self.assertEqual(out.count(f"verified {len(self.digests)} files"), NODES, out)
        self.assertIn(os.path.join(self.cluster.node_local, "mnt", "jobs", str(job)) + "/", out)
        stats = []
        for i in range(NODES):
            with open(os.path.join(self.out, f"{job}-n{i}.stats")) as f:
                stats.append(json.load(f))
        self.assert_read_once(stats, "from the plugin", out)
        self.assert_cluster_status(job, stats, out)
        self.assert_plugin_released(job, out)

    def cluster_status_script(self):
        """Lines of the batch script, after the reads: `clairfs-ctl status --json` on the first
        node, as the job's user, until its cluster section lists every node alive with the
        backing bytes the nodes' own stats saved (60 s at most: the reports trail by a
        period), saved for assert_cluster_status."""
        return f"""python3 - "$CLAIRFS_MOUNT" "$SLURM_JOB_ID" {self.out} <<'PY'
import json, subprocess, sys, time
mount, job, out = sys.argv[1:]
own = sorted(json.load(open(f"{{out}}/{{job}}-n{{i}}.stats"))["backing_bytes"] for i in range({NODES}))
deadline = time.monotonic() + 60
while True:
    view = subprocess.run([sys.executable, "-m", "clairfs", "status", "--json", mount],
                          capture_output=True, text=True, check=True).stdout
    nodes = json.loads(view).get("cluster", {{}}).get("nodes", [])
    if (len(nodes) == {NODES} and all(n["alive"] for n in nodes)
            and sorted(n.get("backing_bytes") for n in nodes) == own) or time.monotonic() > deadline:
        break
    time.sleep(0.2)
with open(f"{{out}}/{{job}}.status.json", "w") as f:
    f.write(view)
PY
"""

    def assert_cluster_status(self, job, stats, out):
        """`clairfs-ctl status --json` on one node lists the job's nodes: every rank alive, one
        of them this node, each with the backing bytes some node's own stats show, the totals
        their sum."""
        with open(os.path.join(self.out, f"{job}.status.json")) as f:
            cluster = json.load(f).get("cluster")
        self.assertIsNotNone(cluster, out)
        nodes = cluster["nodes"]
        print(f"    clairfs-ctl status --json on the first node: {len(nodes)} nodes "
              f"{[(n['rank'], n['host'], n['state'], n.get('backing_bytes')) for n in nodes]}",
              file=sys.stderr)
        self.assertEqual([n["rank"] for n in nodes], list(range(NODES)), cluster)
        self.assertTrue(all(n["alive"] and n["host"] for n in nodes), cluster)
        self.assertEqual(sum(n["state"] == "self" for n in nodes), 1, cluster)
        self.assertEqual(sorted(n["backing_bytes"] for n in nodes),
                         sorted(s["backing_bytes"] for s in stats), cluster)
        self.assertEqual(cluster["totals"]["backing_bytes"],
                         sum(s["backing_bytes"] for s in stats), cluster)
        self.assertEqual(cluster["reports"]["refused"], 0, cluster)

    def test_4_a_job_may_ask_for_one_cache_per_node(self):
        """--clairfs-cache=node on 3 nodes: each node mounts the dataset for itself (the node's
        shared mount, not the job's), reads every byte, and the store is read once per node."""
        job, fields, out = self.plugin_job("per-node", "--clairfs-cache=node")
        self.assertEqual((fields["JobState"], fields.get("ExitCode")), ("COMPLETED", "0:0"), out)
        self.assertEqual(out.count(f"verified {len(self.digests)} files"), NODES, out)
        self.assertNotIn(os.path.join("mnt", "jobs"), out)
        backing = 0
        for i in range(NODES):
            with open(os.path.join(self.out, f"{job}-n{i}.stats")) as f:
                s = json.load(f)
            backing += s["backing_bytes"]
            self.assertEqual(s["peer_bytes_in"], 0)
        self.assertGreaterEqual(backing, NODES * self.total * 0.98)
        self.assert_plugin_released(job, out)

    def test_5_a_cluster_that_cannot_start_fails_the_job_and_drains_no_node(self):
        """A cluster whose daemons cannot start (here the administrator's cluster_config is not
        valid), and one that cannot be prepared (a cluster_secret others may read): the job fails
        before its script runs, its output says why (the daemons' own message in the first
        case), every node stays in service and nothing is left."""
        with open(self.cluster_config) as f:
            good = f.read()
        try:
            with open(self.cluster_config, "w") as f:
                f.write("cache:\n  tiers: [{kind: ram, capacity: lots}]\n")
            job, fields, out = self.plugin_job("bad config")
        finally:
            with open(self.cluster_config, "w") as f:
                f.write(good)
        self.assertEqual((fields["JobState"], fields.get("ExitCode")), ("FAILED", "1:0"), out)
        self.assertIn("could not be cached for this job's 3 nodes", out)
        self.assertIn("the job's cluster cache did not start", out)
        self.assertIn("lots", out)  # the daemons' own report of the bad value
        self.assertNotIn("bad config done", out)
        self.assert_plugin_released(job, out + "mount=/nonexistent\n")
        try:
            os.chmod(self.secret, 0o640)
            job, fields, out = self.plugin_job("open secret")
        finally:
            os.chmod(self.secret, 0o600)
        self.assertEqual((fields["JobState"], fields.get("ExitCode")), ("FAILED", "1:0"), out)
        self.assertIn("no group or other permission", out)
        self.assertNotIn("open secret done", out)
        self.assert_plugin_released(job, out + "mount=/nonexistent\n")


    def test_6_a_requeue_onto_other_nodes_restarts_warm(self):
        """A job on n0-n2, then the same job on n1-n3 (one node swapped, as a requeue onto
        another node set): the staying nodes' disk tiers (kept per user and dataset) serve what
        they hold, the placement keeps it where it is, and the store is read for about what only
        the node that left held: at most 1/3 of the dataset, plus 2 % (the figure is printed).
        Every byte right on every node."""
        job, fields, out = self.plugin_job("first")
        self.assertEqual((fields["JobState"], fields.get("ExitCode")), ("COMPLETED", "0:0"), out)
        self.assert_plugin_released(job, out)
        nodes = [f"n{i}" for i in range(1, NODES + 1)]
        job, fields, out = self.plugin_job("requeued", nodes=",".join(nodes))
        self.assertEqual((fields["JobState"], fields.get("ExitCode")), ("COMPLETED", "0:0"), out)
        self.assertEqual(out.count(f"verified {len(self.digests)} files"), NODES, out)
        backing = []
        for n in nodes:
            with open(os.path.join(self.out, f"{job}-{n}.stats")) as f:
                s = json.load(f)
            backing.append(s["backing_bytes"])
            self.assertEqual(set(s["peer_refused"].values()), {0}, s["peer_refused"])
        print(f"    requeued onto {','.join(nodes)}: backing bytes / dataset = {sum(backing) / self.total:.3f} "
              f"(per node {backing}; goal 1/{NODES} + 0.02 = {1 / NODES + 0.02:.3f})", file=sys.stderr)
        self.assertLessEqual(sum(backing), (1 / NODES + 0.02) * self.total, out)
        self.assert_plugin_released(job, out)


    def test_7_an_interactive_srun_job_gets_one_cache_too(self):
        """`srun -N 3 --clairfs=DS --clairfs-manifest=FILE CMD` without a batch script: the
        job's first step (on all its nodes) starts the daemons from its first node, each of its
        tasks reads every byte right through its node's mount, the store is read once, nothing
        is left after."""
        if not PLUGIN:
            self.skipTest("no SPANK plugin in this build (slurm/spank.h missing: libslurm-dev)")
        command = (f'python3 -m clairfs wait "$CLAIRFS_MOUNT" --timeout 60 > /dev/null && '
                   f'echo "mount=$CLAIRFS_MOUNT" && python3 {VERIFY} "$CLAIRFS_MOUNT" {self.expected} && '
                   f'cat "$CLAIRFS_MOUNT/.clairfs/stats" > {self.out}/srun-$SLURM_JOB_ID-$SLURMD_NODENAME.stats && '
                   f'echo "job=$SLURM_JOB_ID"')
        r = self.cluster.run(["setpriv", f"--reuid={self.user[0]}", f"--regid={self.user[1]}", "--clear-groups",
                              "env", f"PYTHONPATH={PKG}", "srun", "-N", str(NODES), "-w", FIRST,
                              "--ntasks-per-node=1", f"--clairfs={self.dataset}",
                              f"--clairfs-manifest={self.manifest}", "bash", "-c", command], timeout=150)
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 0, out)
        self.assertEqual(out.count(f"verified {len(self.digests)} files"), NODES, out)
        self.assertIn(os.path.join(self.cluster.node_local, "mnt", "jobs") + "/", out)
        job = int(next(line[4:] for line in out.splitlines() if line.startswith("job=")))
        stats = []
        for i in range(NODES):
            with open(os.path.join(self.out, f"srun-{job}-n{i}.stats")) as f:
                stats.append(json.load(f))
        self.assert_read_once(stats, "from an interactive srun", out)
        self.cluster.wait_job(job, timeout=60)
        self.assert_plugin_released(job, out)


def main():
    reason = skip_reason()
    if reason:
        print(f"slurm_multinode: skipped: {reason}")
        return 77
    if not CLAIRFS or not os.path.exists(CLAIRFS):
        print(f"slurm_multinode: CLAIRFS_BIN must name the built program ({CLAIRFS!r})")
        return 1
    harness.install_handlers()  # a SIGTERM (meson's timeout) or an exit still stops the cluster
    return run_case("slurm_multinode", MultiNodeClusterCache)


if __name__ == "__main__":
    sys.exit(main())
