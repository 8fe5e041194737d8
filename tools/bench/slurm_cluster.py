#!/usr/bin/env python3
"""One cache for a multi-node job under a real Slurm of K emulated nodes (tools/bench/
slurm_cluster.sh runs it; docs/benchmarks.md, "A multi-node job under Slurm").

The cluster is tests/slurm/multinode_slurm.py's: slurmctld, and K+1 nodes, each a network and
a mount namespace of its own with its own slurmd, links capped with tc tbf (--link-mbit), the
clairfs SPANK plugin with multinode=cluster. The dataset (tools/make_dataset.py) is a directory
every node reads, as a parallel file system would be; no throttle is put on it (the store's
reads are counted by the daemons: backing_bytes).

Each daemon has one tier of 1.25 x dataset / K (--tier): on node-local disk (the plugin's
cluster_ssd=, kept per user and dataset across jobs) or in RAM (gone with the job).

Job 1, `sbatch -N K --clairfs=DATA` on nodes n0..n{K-1}, as nobody: each rank registers its
order of E epochs (tools/make_manifest.py --sampler distributed|locality, rank r of K; with
locality each rank computes it in the job with --node-names job, LocalitySampler's default: the
holders keyed by the job's node names from SLURM_JOB_NODELIST and SLURMD_NODENAME, checked
against the lists computed beforehand with the names given), waits
until its node's tiers are filled, then reads epoch by epoch (clairfs-bench --verify: the XXH3
sum of what it read, compared with the store's), every rank's epoch started when all ended the
last (one `srun --overlap` step per epoch: without --overlap, Slurm 22.05 may hold a step for
seconds to minutes until the last one's resources are released). Job 2, the requeue, the same on
K2 nodes (--requeue-nodes, default K), each rank r of K2 reading rank r's order of a K2-rank
sampler: with K2 = K on n1..n{K}, one node swapped for a new one; with K2 > K on n0..n{K2-1},
every node of job 1 and K2 - K new ones (a grown job); with K2 < K on n{K-K2}..n{K-1}, nodes of
job 1 only, K - K2 of them gone (a shrunk job). Every node has the same tier. Prints per job
and epoch the seconds and each node's backing and peer bytes, and as its last line one JSON
object: nodes, requeue_nodes, dataset_bytes, backing_bytes (job 1, all epochs), peer_bytes (job 1, into the
nodes), epoch_seconds (job 1), wrong_bytes (bytes of the epochs whose sum differed, both jobs),
restart_backing_bytes (job 2, from its start to the end of its first epoch), restart_peer_bytes,
restart_epoch_seconds, and the run's parameters. With CLAIRFS_BENCH_KEEP=1 the kept directory's
out/ has per job the daemons' log (JOB.daemons.log), and per rank its plan file after the fill
(JOB.rR.plan) and its stats after each epoch (JOB.rR.eE.stats).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.realpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "slurm"))
from multinode_slurm import MultiNodeSlurm, netns_unusable  # noqa: E402
import harness  # noqa: E402  (multinode_slurm put tests/fs on the path: teardowns at exit)

NOBODY = (65534, 65534)
PYTHON = "/usr/bin/python3"


def log(msg):
    print(f"slurm_cluster: {msg}", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--sampler", choices=("distributed", "locality"), default="distributed")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--requeue-nodes", type=int, default=0,
                    help="the requeue's node count K2 (default K: one node swapped; K+1: grown by a new node; "
                    "K-1: shrunk by one)")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--mean-kb", type=int, default=32)
    ap.add_argument("--link-mbit", type=int, default=100)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tier", choices=("ssd", "ram"), default="ssd",
                    help="the daemons' tier: on node-local disk, kept per user and dataset (cluster_ssd=), or RAM")
    ap.add_argument("--clairfs-bin", default=os.path.join(REPO, "build", "daemon", "clairfs"))
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--tmp", default="/var/tmp")
    a = ap.parse_args()
    if a.nodes < 2:
        sys.exit("--nodes: at least 2")
    if a.requeue_nodes == 0:
        a.requeue_nodes = a.nodes
    if a.requeue_nodes < 1:
        sys.exit("--requeue-nodes: at least 1")
    helper = os.path.join(a.build, "slurm", "clairfs-slurm")
    plugin = os.path.join(a.build, "slurm", "clairfs_spank.so")
    bench = os.path.join(a.build, "tools", "bench", "clairfs-bench")
    for path in (a.clairfs_bin, helper, plugin, bench):
        if not os.path.exists(path):
            sys.exit(f"build first: {path} is missing")
    reason = netns_unusable()
    if reason:
        sys.exit(f"no emulated cluster on this machine: {reason}")
    harness.install_handlers()
    tmp = tempfile.mkdtemp(prefix="clairfs-slurm-bench-", dir=a.tmp)
    os.chmod(tmp, 0o755)
    try:
        return run(a, tmp, helper, plugin, bench)
    finally:
        if os.environ.get("CLAIRFS_BENCH_KEEP"):
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def run(a, tmp, helper, plugin, bench):
    k, k2 = a.nodes, a.requeue_nodes
    data = os.path.join(tmp, "data")
    subprocess.run([PYTHON, os.path.join(REPO, "tools", "make_dataset.py"), data, "--files", str(a.files),
                    "--classes", "100", "--mean-kb", str(a.mean_kb), "--sigma", "0.5", "--seed", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    dataset_bytes = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(data) for f in fs)
    if k2 == k:
        requeue_on = [f"n{i}" for i in range(1, k + 1)]  # one swapped
    elif k2 > k:
        requeue_on = [f"n{i}" for i in range(k2)]  # all of job 1's and k2 - k new
    else:
        requeue_on = [f"n{i}" for i in range(k - k2, k)]  # k - k2 gone
    jobs = {"run": [f"n{i}" for i in range(k)], "requeue": requeue_on}
    sums, lists = {}, {}
    for tag, names in jobs.items():
        lists[tag] = os.path.join(tmp, "lists", tag)
        os.makedirs(lists[tag])
        sums[tag] = manifests(a, data, lists[tag], bench, names)
    log(f"dataset: {a.files} files, {dataset_bytes} bytes; {k} ranks x {a.epochs} epochs ({a.sampler})")
    out_dir = os.path.join(tmp, "out")
    os.mkdir(out_dir)
    os.chmod(out_dir, 0o1777)
    secret = os.path.join(tmp, "cluster.secret")
    with open(secret, "wb") as f:
        f.write(os.urandom(64))
    os.chmod(secret, 0o600)
    tier_mib = max(8, int(dataset_bytes * 1.25 / k / 1048576) + 1)
    tier = (f"{{kind: ram, capacity: {tier_mib}MiB}}" if a.tier == "ram"
            else f"{{kind: ssd, capacity: {tier_mib}MiB, dir: /nonexistent}}")  # dir: cluster_ssd's
    cfg = os.path.join(tmp, "cluster.yaml")
    with open(cfg, "w") as f:
        f.write(f"fuse: {{keep_cache: false}}\ncache:\n  tiers:\n    - {tier}\n"
                "  staging: {capacity: 4MiB}\ncluster: {plan_timeout: 60, peer_timeout: 2, down_for: 60}\n")
    root = os.path.join(tmp, "slurm")
    net_id = str(os.getpid())
    node_local = os.path.join(root, "node-local")
    settings = [f"helper={helper}", f"clairfs={a.clairfs_bin}", f"mount_root={node_local}/mnt",
                f"state_dir={node_local}/state", f"allow={data}", "cgroup=none", "timeout=120",
                "multinode=cluster", f"cluster_secret={secret}", f"cluster_config={cfg}",
                "cluster_env=UCX_TLS=tcp", f"cluster_env=UCX_NET_DEVICES=cfs{net_id}br",
                "cluster_env=MPIR_CVAR_NOLOCAL=1"] + \
        ([f"cluster_ssd={node_local}/ssd", "cluster_ssd_tier=0"] if a.tier == "ssd" else [])
    machines = max(k + 1 if k2 == k else k, k2)
    cluster = MultiNodeSlurm(root, machines, ["required " + plugin + " " + " ".join(settings)],
                             node_local_mode=0o1777, net_id=net_id, users_open_fuse=True, link_mbit=a.link_mbit)
    os.makedirs(root)
    cluster.start(timeout=120)
    try:
        log(f"{machines} nodes up, links {a.link_mbit or 'uncapped'} Mbit/s")
        first = job(cluster, a, data, lists["run"], out_dir, bench, sums["run"], jobs["run"], "run")
        second = job(cluster, a, data, lists["requeue"], out_dir, bench, sums["requeue"], jobs["requeue"], "requeue")
    finally:
        cluster.stop()
    result = {
        "nodes": k, "requeue_nodes": k2, "sampler": a.sampler, "tier": a.tier, "epochs": a.epochs, "files": a.files, "mean_kb": a.mean_kb,
        "link_mbit": a.link_mbit, "dataset_bytes": dataset_bytes,
        "backing_bytes": first["backing"][-1], "peer_bytes": first["peer"][-1],
        "epoch_seconds": first["seconds"], "wrong_bytes": first["wrong"] + second["wrong"],
        "restart_backing_bytes": second["backing"][0], "restart_peer_bytes": second["peer"][0],
        "restart_epoch_seconds": second["seconds"],
        "backing_ratio": round(first["backing"][-1] / dataset_bytes, 4),
        "restart_backing_ratio": round(second["backing"][0] / dataset_bytes, 4),
    }
    print(json.dumps(result))
    return 0 if result["wrong_bytes"] == 0 else 1


def manifests(a, data, lists, bench, names):
    """Writes into `lists` each rank's manifest (r{r}.manifest) and its epochs' lists (r{r}.e{e}) for
    a job on the nodes `names` (rank r on names[r]; the locality sampler's holders keyed by them);
    returns per (rank, epoch) the XXH3 sum of the epoch's bytes and their count."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    sums = {}
    for r in range(len(names)):
        with open(os.path.join(lists, f"r{r}.manifest"), "w") as f:
            subprocess.run([PYTHON, os.path.join(REPO, "tools", "make_manifest.py"), data, "--epochs", str(a.epochs),
                            "--seed", "1", "--rank", str(r), "--world", str(len(names)), "--sampler", a.sampler,
                            "--batch", str(a.batch), "--node-names", ",".join(names)], check=True, stdout=f, env=env)
        epochs, cur = [], None
        with open(os.path.join(lists, f"r{r}.manifest")) as f:
            for line in f:
                if line.startswith("#epoch"):
                    cur = []
                    epochs.append(cur)
                elif cur is not None and line.strip():
                    cur.append(line)
        for e, entries in enumerate(epochs):
            path = os.path.join(lists, f"r{r}.e{e}")
            with open(path, "w") as f:
                f.writelines(entries)
            out = subprocess.run([bench, "--root", data, "--list", path, "--verify", "--json", "--no-stats"],
                                 check=True, capture_output=True, text=True).stdout
            sums[(r, e)] = (json.loads(out)["epochs"][0]["checksum"],
                            sum(os.path.getsize(os.path.join(data, p.strip())) for p in entries))
    return sums


def job(cluster, a, data, lists, out_dir, bench, sums, nodes, tag):
    """One job on `nodes`; returns per epoch the seconds and the cumulative backing and peer bytes
    summed over the nodes, and the bytes of epochs read wrong."""
    k = len(nodes)
    # The locality sampler's ranks compute their order in the job, with the sampler's default node
    # names (the job's), and find it equal to the one computed beforehand with the names given.
    order = ("" if a.sampler != "locality" else
             f"""{PYTHON} {REPO}/tools/make_manifest.py "$1" --epochs {a.epochs} --seed 1 --sampler locality \\
    --batch {a.batch} --node-names job > "$2/$SLURM_JOB_ID.r$SLURM_PROCID.manifest" &&
  cmp "$2/$SLURM_JOB_ID.r$SLURM_PROCID.manifest" "$0/r$SLURM_PROCID.manifest" && """)
    script = f"""#!/bin/bash
set -eu
export PYTHONPATH={REPO}/python
t0=$EPOCHREALTIME
srun --overlap --ntasks-per-node=1 bash -c '{order}cat "$0/r$SLURM_PROCID.manifest" > "$CLAIRFS_MOUNT/.clairfs/manifest" &&
  {PYTHON} -m clairfs wait "$CLAIRFS_MOUNT" --timeout 600 > /dev/null &&
  cat "$CLAIRFS_MOUNT/.clairfs/plan" > "$2/$SLURM_JOB_ID.r$SLURM_PROCID.plan"' {lists} {data} {out_dir}
echo "filled $(awk -v a=$EPOCHREALTIME -v b=$t0 'BEGIN {{printf "%.3f", a - b}}')"
for ((e = 0; e < {a.epochs}; e++)); do
  t=$EPOCHREALTIME
  srun --overlap --ntasks-per-node=1 bash -c '"$1" --root "$CLAIRFS_MOUNT" --list "$0/r$SLURM_PROCID.e$2" --verify --json \\
    --no-stats > "$3/$SLURM_JOB_ID.r$SLURM_PROCID.e$2.json" &&
    cat "$CLAIRFS_MOUNT/.clairfs/stats" > "$3/$SLURM_JOB_ID.r$SLURM_PROCID.e$2.stats"' {lists} {bench} $e {out_dir}
  echo "epoch $e $(awk -v a=$EPOCHREALTIME -v b=$t 'BEGIN {{printf "%.3f", a - b}}')"
done
cp "$(dirname "$CLAIRFS_MOUNT")/daemons.log" "{out_dir}/$SLURM_JOB_ID.daemons.log" || true
"""
    job_id = cluster.sbatch([f"--output={out_dir}/job-%j.out", "-N", str(k), "--ntasks-per-node=1",
                             "-w", ",".join(nodes), f"--clairfs={data}"], script, user=NOBODY)
    fields = cluster.wait_job(job_id, timeout=1800)
    with open(os.path.join(out_dir, f"job-{job_id}.out")) as f:
        output = f.read()
    if (fields["JobState"], fields.get("ExitCode")) != ("COMPLETED", "0:0"):
        raise RuntimeError(f"job {job_id} ({tag}): {fields['JobState']} {fields.get('ExitCode')}:\n{output}")
    seconds = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "epoch":
            seconds[int(words[1])] = float(words[2])
    result = {"seconds": [round(seconds[e], 3) for e in range(a.epochs)], "backing": [], "peer": [], "wrong": 0}
    for e in range(a.epochs):
        backing = peer = 0
        per_node = []
        for r in range(k):
            with open(os.path.join(out_dir, f"{job_id}.r{r}.e{e}.stats")) as f:
                s = json.load(f)
            backing += s["backing_bytes"]
            peer += s["peer_bytes_in"]
            per_node.append(s["backing_bytes"])
            with open(os.path.join(out_dir, f"{job_id}.r{r}.e{e}.json")) as f:
                checksum = json.load(f)["epochs"][0]["checksum"]
            if checksum != sums[(r, e)][0]:
                result["wrong"] += sums[(r, e)][1]
        result["backing"].append(backing)
        result["peer"].append(peer)
        log(f"{tag} (job {job_id} on {','.join(nodes)}) epoch {e}: {seconds[e]:.2f} s, backing {backing} B, "
            f"peer in {peer} B (cumulative; backing per node {per_node})")
    return result


if __name__ == "__main__":
    sys.exit(main())
