#!/usr/bin/env python3
"""The Slurm integration against a real Slurm on this machine (slurm/, docs/slurm.md).

Starts munged, slurmctld and slurmd (one node, localhost) with the clairfs SPANK plugin in
plugstack.conf, submits real jobs with sbatch as the unprivileged user nobody, and checks:
a job reads every byte of a dataset through the mount; two jobs share one mount and one
daemon, which outlive the job that made them, and after the last one the mount and the daemon
are gone; a cancelled job releases its mount; a failing mount fails the job with a clear
message in its output and leaves the node in service; a job that vanished without its epilog
does not keep a mount.

Environment: CLAIRFS_BIN, CLAIRFS_SLURM_HELPER, CLAIRFS_SPANK_PLUGIN (meson test sets them);
CLAIRFS_TEST_KEEP=1 keeps the temporary directory (job outputs, Slurm's and clairfs's logs).
Exit status: 0 passed, 1 failed, 77 skipped (no /dev/fuse, not root, or Slurm/munge missing).
"""
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from slurm_cluster import SlurmCluster, missing_binaries, run_case, wait_for, write_job_inputs  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "fs"))
import harness  # noqa: E402  (mounts and daemons as /proc shows them)
from harness import fuse_mounts  # noqa: E402

NOBODY = (65534, 65534)  # the jobs' user and group (Debian's nobody:nogroup)
CLAIRFS = os.environ.get("CLAIRFS_BIN", "")
HELPER = os.environ.get("CLAIRFS_SLURM_HELPER", "")
PLUGIN = os.environ.get("CLAIRFS_SPANK_PLUGIN", "")
VERIFY = os.path.join(HERE, "verify_dataset.py")
PKG = os.path.realpath(os.path.join(HERE, "..", "..", "python"))  # clairfs-ctl's package


def skip_reason():
    if not PLUGIN:
        return "no SPANK plugin in this build (slurm/spank.h missing: libslurm-dev; or a sanitizer build)"
    if os.geteuid() != 0:
        return "needs root (Slurm's daemons, mounts as root)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    missing = missing_binaries()
    if missing:
        return "not installed: " + " ".join(missing) + " (apt-get install slurmctld slurmd slurm-client munge)"
    return None


def make_dataset(root, seed=7):
    """Files of several sizes in nested directories (one larger than a 4 MiB chunk); returns
    {relative path: sha256}."""
    rng = random.Random(seed)
    digests = {}
    sizes = [0, 1, 4095, 4096, 70_000, 300_000] + [rng.randrange(1, 200_000) for _ in range(30)] + [5 << 20]
    for i, size in enumerate(sizes):
        rel = os.path.join(f"class{i % 4}", f"sample{i:03d}.bin")
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        data = rng.randbytes(size)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
        digests[rel] = hashlib.sha256(data).hexdigest()
    return digests


def clairfs_mounts():
    """Mount points of fuse.clairfs mounts on the machine."""
    return [m for m, fstype, _ in fuse_mounts() if fstype == "fuse.clairfs"]


def daemons_of(mountpoint):
    """Pids of clairfs processes serving mountpoint (by their command line)."""
    return list(harness.daemons_of(mountpoint))


class SlurmIntegration(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="clairfs-slurm-")
        os.chmod(cls.tmp, 0o755)  # the jobs' user reaches the dataset, scripts and outputs
        cls.data = os.path.join(cls.tmp, "data")
        cls.dataset = os.path.join(cls.data, "ds1")
        cls.digests = make_dataset(cls.dataset)
        cls.expected, cls.manifest, cls.out = write_job_inputs(cls.tmp, cls.digests)
        cls.mount_root = os.path.join(cls.tmp, "mnt")
        cls.state_dir = os.path.join(cls.tmp, "state")
        config = os.path.join(cls.tmp, "clairfs.yaml")
        with open(config, "w") as f:
            f.write("cache:\n  tiers:\n    - kind: ram\n      capacity: 64MiB\n"
                    "control:\n  group: nogroup\n"
                    f"log:\n  file: {cls.tmp}/clairfs.log\n")
        # The daemon stays in the test's cgroups (cgroup=none): this machine's jobs run in none
        # (proctrack/linuxproc, task/none), and moving a test's process into the machine's
        # root cgroups would take it out of the limits the test runs under.
        cls.settings = [f"helper={HELPER}", f"clairfs={CLAIRFS}", f"mount_root={cls.mount_root}",
                        f"state_dir={cls.state_dir}", f"allow={cls.data}", f"config={config}",
                        "cgroup=none", "timeout=60"]
        cls.cluster = SlurmCluster(os.path.join(cls.tmp, "slurm"), ["required " + PLUGIN + " " + " ".join(cls.settings)])
        os.makedirs(cls.cluster.root)
        try:
            cls.cluster.start()
        except BaseException:
            print(cls.cluster.log("slurmctld"), cls.cluster.log("slurmd"), file=sys.stderr)
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.cluster.procs.get("slurmctld") and cls.cluster.procs["slurmctld"].poll() is None:
                cls.cluster.run(["scancel", "--user=nobody"])
                cls.cluster.run(["scancel", "--user=root"])
                wait_for("the jobs to leave the queue",
                         lambda: cls.cluster.run(["squeue", "-h"]).stdout.strip() == "", 30, 0.2)
        finally:
            cls.cluster.stop()
            for point in clairfs_mounts():
                if point.startswith(cls.tmp + "/"):
                    subprocess.run(["umount", "-l", point], timeout=20)
            for point in [p for p in clairfs_mounts() if p.startswith(cls.tmp + "/")] + [cls.mount_root]:
                for pid in daemons_of(point):
                    os.kill(pid, 9)
            if os.environ.get("CLAIRFS_TEST_KEEP"):
                print(f"slurm: kept {cls.tmp}", file=sys.stderr)
            elif not any(p.startswith(cls.tmp + "/") for p in clairfs_mounts()):
                shutil.rmtree(cls.tmp, ignore_errors=True)

    # --- helpers --------------------------------------------------------------------------
    def submit(self, script, *args, cwd=None):
        return self.cluster.sbatch([f"--output={self.out}/job-%j.out", "--ntasks=1", "--cpus-per-task=1"] + list(args),
                                   "#!/bin/bash\n" + script, user=NOBODY, cwd=cwd)

    def output(self, job):
        with open(f"{self.out}/job-{job}.out", errors="replace") as f:
            return f.read()

    def finished(self, job, timeout=60):
        fields = self.cluster.wait_job(job, timeout)
        return fields["JobState"], fields.get("ExitCode", "")

    def mountpoint_of(self, job):
        for line in self.output(job).splitlines():
            if line.startswith("mount="):
                return line[len("mount="):]
        self.fail(f"job {job} printed no mount=: {self.output(job)}")

    def assert_released(self, mountpoint):
        wait_for(f"{mountpoint} to be unmounted", lambda: mountpoint not in clairfs_mounts(), 20)
        wait_for(f"the daemon of {mountpoint} to exit", lambda: not daemons_of(mountpoint), 20)
        self.assertFalse(os.path.exists(mountpoint), "the mountpoint directory stays behind")
        self.assertEqual([f for f in os.listdir(self.state_dir) if f.endswith(".jobs")], [],
                         "a job list stays behind")

    def assert_node_in_service(self):
        state = wait_for("the node to be idle", lambda: self.cluster.node_state() == "idle" and "idle", 20)
        self.assertEqual(state, "idle")

    # --- tests ----------------------------------------------------------------------------
    def test_1_job_reads_every_byte(self):
        """A job with --clairfs and --clairfs-manifest (a relative path) reads every byte
        through the mount; its manifest is its stream slurm-<job> in the plan."""
        job = self.submit(f'echo "mount=$CLAIRFS_MOUNT"\nset -e\n'
                          f'python3 {VERIFY} "$CLAIRFS_MOUNT" {self.expected}\n'
                          f'grep -q "slurm-$SLURM_JOB_ID" "$CLAIRFS_MOUNT/.clairfs/plan" && echo "stream registered"\n'
                          f'findmnt -n -o FSTYPE "$CLAIRFS_MOUNT"\n'
                          # a step of the job (srun) reads through the same mount
                          f'srun --ntasks=1 python3 {VERIFY} "$CLAIRFS_MOUNT" {self.expected}\n',
                          # a relative manifest path: from the submission directory
                          f"--clairfs={self.dataset}", f"--clairfs-manifest={os.path.basename(self.manifest)}",
                          cwd=os.path.dirname(self.manifest))
        state, code = self.finished(job)
        out = self.output(job)
        self.assertEqual((state, code), ("COMPLETED", "0:0"), out)
        self.assertEqual(out.count(f"verified {len(self.digests)} files"), 2, out)
        self.assertIn("stream registered", out)
        self.assertIn("fuse.clairfs", out)
        mountpoint = self.mountpoint_of(job)
        self.assertTrue(mountpoint.startswith(self.mount_root + "/"), mountpoint)
        self.assert_released(mountpoint)

    def test_1b_srun_job(self):
        """An interactive job (srun --clairfs, no batch script) and an allocation (salloc
        --clairfs, then srun) read through their mount; the mount goes when each ends."""
        r = self.cluster.run(["setpriv", f"--reuid={NOBODY[0]}", f"--regid={NOBODY[1]}", "--clear-groups",
                              "srun", "--ntasks=1", f"--clairfs={self.dataset}", "bash", "-c",
                              f'echo "mount=$CLAIRFS_MOUNT"; python3 {VERIFY} "$CLAIRFS_MOUNT" {self.expected}'],
                             timeout=60, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"verified {len(self.digests)} files", r.stdout)
        mountpoint = r.stdout.split("mount=")[1].split()[0]
        self.assertTrue(mountpoint.startswith(self.mount_root + "/"), mountpoint)
        self.assert_released(mountpoint)
        # and an allocation (salloc --clairfs) whose step reads through the mount
        r = self.cluster.run(["setpriv", f"--reuid={NOBODY[0]}", f"--regid={NOBODY[1]}", "--clear-groups",
                              "salloc", "--ntasks=1", f"--clairfs={self.dataset}", "srun", "bash", "-c",
                              f'python3 {VERIFY} "$CLAIRFS_MOUNT" {self.expected}'],
                             timeout=60, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"verified {len(self.digests)} files", r.stdout)
        self.assert_released(mountpoint)

    def waiting_script(self):
        """A job script that records its mount in sync/started-<job>, waits for the test's
        go-ahead (sync/release-<job>, polled with a deadline of 60 s), then reads every byte."""
        sync = os.path.join(self.tmp, "sync")
        os.makedirs(sync, exist_ok=True)
        os.chmod(sync, 0o1777)
        script = (f'echo "mount=$CLAIRFS_MOUNT"\n'
                  f'echo "$CLAIRFS_MOUNT" > {sync}/started-$SLURM_JOB_ID\n'
                  f'for i in $(seq 600); do [ -e {sync}/release-$SLURM_JOB_ID ] && break; sleep 0.1; done\n'
                  f'[ -e {sync}/release-$SLURM_JOB_ID ] || {{ echo "no go-ahead"; exit 2; }}\n'
                  f'python3 {VERIFY} "$CLAIRFS_MOUNT" {self.expected}\n')
        return sync, script

    def wait_started(self, sync, job):
        path = os.path.join(sync, f"started-{job}")
        wait_for(f"job {job} to start", lambda: os.path.exists(path) and os.path.getsize(path), 60)
        with open(path) as f:
            return f.read().strip()

    def test_2_two_jobs_share_one_mount(self):
        """Two jobs on the node using one dataset share one mount and one daemon; the mount
        and the daemon outlive the job that made them while the other runs, and go with the
        last."""
        sync, script = self.waiting_script()
        # The first makes the mount and registers a manifest (its stream slurm-<job>).
        first = self.submit(script, f"--clairfs={self.dataset}", f"--clairfs-manifest={self.manifest}")
        mountpoint = self.wait_started(sync, first)
        daemons = daemons_of(mountpoint)
        self.assertEqual(len(daemons), 1, daemons)
        second = self.submit(script, f"--clairfs={self.dataset}")
        self.assertEqual(self.wait_started(sync, second), mountpoint)
        self.assertEqual(clairfs_mounts().count(mountpoint), 1)
        self.assertEqual(daemons_of(mountpoint), daemons)
        plan = os.path.join(mountpoint, ".clairfs", "plan")
        self.assertIn(f'"slurm-{first}"', open(plan).read())
        # The first job ends; the second still has the mount and the same daemon, and the
        # first one's stream left the plan.
        open(os.path.join(sync, f"release-{first}"), "w").close()
        self.assertEqual(self.finished(first), ("COMPLETED", "0:0"), self.output(first))
        self.assertIn(mountpoint, clairfs_mounts())
        self.assertEqual(daemons_of(mountpoint), daemons)
        self.assertNotIn(f'"slurm-{first}"', open(plan).read())
        # The second reads every byte through it after the first left, and is the last.
        open(os.path.join(sync, f"release-{second}"), "w").close()
        self.assertEqual(self.finished(second), ("COMPLETED", "0:0"), self.output(second))
        self.assertIn(f"verified {len(self.digests)} files", self.output(second))
        self.assert_released(mountpoint)

    def test_2b_cancelled_job_releases_the_mount(self):
        """A running job cancelled with scancel leaves its mount like one that ended."""
        sync, script = self.waiting_script()
        job = self.submit(script, f"--clairfs={self.dataset}")
        mountpoint = self.wait_started(sync, job)
        self.assertIn(mountpoint, clairfs_mounts())
        self.cluster.run(["scancel", str(job)])
        self.assertEqual(self.finished(job)[0], "CANCELLED")
        self.assert_released(mountpoint)
        self.assert_node_in_service()

    def test_3_failing_mount_fails_the_job(self):
        """A dataset that does not exist, one the job's user may not open and one outside the
        allowed prefixes: each job fails with the reason in its output, and the node stays in
        service."""
        private = os.path.join(self.data, "private")  # allowed, but the job's user may not open it
        os.makedirs(private, mode=0o700, exist_ok=True)
        cases = [(os.path.join(self.data, "missing"), "No such file or directory"),
                 (private, "Permission denied"),
                 ("/etc", "outside the prefixes this node allows")]
        for dataset, reason in cases:
            job = self.submit('echo "the job script ran"\n', f"--clairfs={dataset}")
            state, code = self.finished(job)
            out = self.output(job)
            self.assertEqual(state, "FAILED", out)
            self.assertEqual(code, "1:0", out)  # exit status 1, no signal
            self.assertIn(f"clairfs: the dataset {dataset} could not be mounted", out)
            self.assertIn(reason, out)
            self.assertNotIn("the job script ran", out)
            self.assert_node_in_service()
        self.assertEqual([p for p in clairfs_mounts() if p.startswith(self.tmp)], [])
        # and the node still runs jobs, with and without clairfs
        job = self.submit(f'echo "mount=$CLAIRFS_MOUNT"\npython3 {VERIFY} "$CLAIRFS_MOUNT" {self.expected}\n',
                          f"--clairfs={self.dataset}")
        self.assertEqual(self.finished(job), ("COMPLETED", "0:0"), self.output(job))
        self.assert_released(self.mountpoint_of(job))

    def test_4_rejected_manifest_fails_the_job(self):
        """A manifest clairfs rejects fails the job with clairfs's report; the mount goes."""
        bad = os.path.join(self.tmp, "bad-manifest.txt")
        with open(bad, "w") as f:
            f.write("class0/sample000.bin\nclass0/no-such-file.bin\n")
        job = self.submit('echo "mount=$CLAIRFS_MOUNT"\n', f"--clairfs={self.dataset}", f"--clairfs-manifest={bad}")
        state, _ = self.finished(job)
        out = self.output(job)
        self.assertEqual(state, "FAILED", out)
        self.assertIn(f"clairfs: the manifest {bad} could not be registered on", out)
        self.assertIn("clairfs rejected the manifest", out)
        # the report numbers the lines of the user's file (not counting the #stream line added)
        self.assertIn("line 2: 'class0/no-such-file.bin'", out)
        self.assert_node_in_service()
        wait_for("the mount to go", lambda: not [p for p in clairfs_mounts() if p.startswith(self.mount_root)], 20)

    def test_5_vanished_job_does_not_keep_the_mount(self):
        """A job listed on a mount with no process left on the node (killed without its
        epilog) is dropped by the next release, and the mount with it."""
        settings = self.settings
        r = subprocess.run([HELPER, "acquire", "4242", self.dataset] + settings,
                           capture_output=True, text=True, timeout=90)
        self.assertEqual(r.returncode, 0, r.stderr)
        mountpoint, joined = r.stdout.split()
        self.assertEqual(joined, "new")
        self.assertIn(mountpoint, clairfs_mounts())
        # the same job again (another of its steps): recorded already
        r = subprocess.run([HELPER, "acquire", "4242", self.dataset] + settings,
                           capture_output=True, text=True, timeout=90)
        self.assertEqual((r.returncode, r.stdout.split()), (0, [mountpoint, "known"]), r.stderr)
        # (with a prefix missing on this node among the settings: it allows nothing, and
        # must not stop the release)
        r = subprocess.run([HELPER, "release", "0"] + settings + ["allow=/no/such/prefix"],
                           capture_output=True, text=True, timeout=90)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_released(mountpoint)

    def test_6_manifest_forms(self):
        """clairfs-slurm register names the job's stream in a text with a #begin trailer and
        in a compact manifest, keeps a stream the file names, and reports a compact
        manifest's faults at the file's own byte offsets."""
        sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
        from clairfs import compact  # noqa: E402 (the package in this source tree)
        r = subprocess.run([HELPER, "acquire", "4343", self.dataset] + self.settings,
                           capture_output=True, text=True, timeout=90)
        self.assertEqual(r.returncode, 0, r.stderr)
        mountpoint = r.stdout.split()[0]
        files = sorted(self.digests)

        def register(name, data):
            path = os.path.join(self.tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            return subprocess.run([HELPER, "register", "4343", mountpoint, path],
                                  capture_output=True, text=True, timeout=60)

        def streams():
            with open(os.path.join(mountpoint, ".clairfs", "plan")) as f:
                return {s["name"]: s["entries"] for s in json.load(f)["streams"]}
        try:
            text = "".join(p + "\n" for p in files[:3])
            r = register("begin.txt", ("\ufeff#begin\n" + text + "#end 3\n").encode())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(streams().get("slurm-4343"), 3)
            r = register("named.txt", ("#stream mine\n" + text).encode())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(streams().get("mine"), 3)
            with open(os.path.join(self.tmp, "order.bin"), "wb") as f:
                compact.write_compact(f, files[:4], [[3, 2, 1, 0]])
            with open(os.path.join(self.tmp, "order.bin"), "rb") as f:
                data = f.read()
            r = register("compact.bin", data)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(streams().get("slurm-4343"), 4)
            # an epoch count of 0, at byte 50 + B of the file as written by the user
            items_bytes = struct.unpack_from("<Q", data, 24)[0]
            at = 50 + items_bytes
            r = register("bad.bin", data[:at] + struct.pack("<I", 0) + data[at + 4:])
            self.assertEqual(r.returncode, 1)
            self.assertIn(f"at byte {at}:", r.stderr)
        finally:
            r = subprocess.run([HELPER, "release", "4343"] + self.settings, capture_output=True, text=True, timeout=90)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_released(mountpoint)

    def test_7_daemon_moves_into_the_named_cgroup(self):
        """With cgroup=/NAME the daemon runs in that cgroup of every hierarchy mounted.
        Checked in a private mount namespace whose only cgroup hierarchy is a named v1
        hierarchy of the test's own (the machine's cgroups are unmounted there, so nothing
        is created or moved in them). The kernel keeps a named hierarchy after its last
        unmount, so its name is the same at every run (one hierarchy in all, not one per
        run) and the cgroup in it is this run's own."""
        if shutil.which("unshare") is None:
            self.skipTest("unshare (util-linux) is missing")
        cg = os.path.join(self.tmp, "cgroup-test")
        os.makedirs(cg, exist_ok=True)
        group = f"clairfs-{os.getpid()}"
        settings = [x for x in self.settings if not x.startswith("cgroup=")] + [f"cgroup=/{group}"]
        inner = os.path.join(self.tmp, "cgroup-test.sh")
        # $1 hierarchy mountpoint, $2 helper, $3 dataset, $4 the cgroup, then the settings.
        with open(inner, "w") as f:
            f.write("""set -eu
cg=$1 helper=$2 dataset=$3 group=$4
shift 4
findmnt -rn -t cgroup,cgroup2 -o TARGET | sort -r | while read -r m; do umount -l "$m"; done
mount -t cgroup -o none,name=clairfs-slurm-test cgroup "$cg" || { echo "no-named-hierarchy"; exit 0; }
status=0
mnt=$("$helper" acquire 4545 "$dataset" "$@" | head -1) || status=1
if [ $status -eq 0 ]; then
  echo "mount=$mnt"
  echo "procs=$(tr '\\n' ' ' < "$cg/$group/cgroup.procs")"
  echo "daemons=$(pgrep -d ' ' -f -- "$mnt" || true)"
fi
"$helper" release 4545 "$@" || status=1
rmdir "$cg/$group" 2>/dev/null || status=1
umount "$cg"
exit $status
""")
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", inner, cg, HELPER, self.dataset, group]
                           + settings, capture_output=True, text=True, timeout=120)
        if "no-named-hierarchy" in r.stdout:
            self.skipTest("this machine refuses a named cgroup v1 hierarchy")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        fields = {line.split("=", 1)[0]: line.split("=", 1)[1] for line in r.stdout.splitlines() if "=" in line}
        daemons = fields.get("daemons", "").split()
        self.assertTrue(daemons, r.stdout + r.stderr)
        # the daemon and its fusermount3 watcher (the control mount's auto_unmount) are there
        self.assertEqual(sorted(fields.get("procs", "").split()), sorted(daemons), r.stdout)
        self.assertFalse(daemons_of(fields["mount"]), "the daemon outlived its release")

    def test_8_cluster_cache_from_a_batch_script(self):
        """Without the plugin: the batch script of docs/slurm.md ("A cluster cache from a
        batch script") starts one daemon per task as a background step (srun --mpi=pmi2, a key
        the job makes), waits until every mount answers, registers each rank's order, reads
        every byte through each mount and unmounts. The ranks form one cluster: the store is
        read once between them and the rest comes from the peer. This machine is one node, so
        its two ranks mount at {rank}; on K nodes, one task per node and one path."""
        # The job's user mounts through fusermount3, which needs /dev/fuse open to it (mode
        # 0666, Debian's udev rule); where it is root's alone (a machine without udev), the job
        # runs as root, the same script.
        user = NOBODY if os.stat("/dev/fuse").st_mode & 0o006 == 0o006 else (0, 0)
        print(f"\n    the batch script runs as uid {user[0]}", file=sys.stderr)
        work = os.path.join(self.tmp, "batch-cluster")
        os.mkdir(work)
        os.chown(work, *user)
        total = sum(os.path.getsize(os.path.join(self.dataset, p)) for p in self.digests)
        cfg = os.path.join(work, "clairfs.yaml")
        with open(cfg, "w") as f:  # each rank holds 0.7 of the dataset: together all of it
            f.write(f"cache:\n  tiers:\n    - {{kind: ram, capacity: {int(total * 0.7)}}}\n"
                    f"  staging: {{capacity: 8MiB}}\n")
        script = f"""set -eu
export PYTHONPATH={PKG}
key={work}/job-$SLURM_JOB_ID.key
(umask 077 && head -c 32 /dev/urandom > "$key")
mnt={work}/mnt-$SLURM_JOB_ID
mkdir -p "$mnt-0" "$mnt-1"
srun --overlap --ntasks=2 --mpi=pmi2 {CLAIRFS} --cluster -f -c {cfg} -o cluster.key_file="$key" \\
  {self.dataset} "$mnt-{{rank}}" &
daemons=$!
srun --overlap --ntasks=2 bash -c 'python3 -m clairfs wait --mounted "$0-$SLURM_PROCID" --timeout 60' "$mnt"
srun --overlap --ntasks=2 bash -c 'm=$0-$SLURM_PROCID
  python3 -m clairfs register "$m" "$1" && python3 -m clairfs wait "$m" --timeout 60 &&
  python3 "$2" "$m" "$3" && cat "$m/.clairfs/stats" > "$m.stats"' "$mnt" {self.manifest} {VERIFY} {self.expected}
srun --overlap --ntasks=2 bash -c 'fusermount3 -u "$0-$SLURM_PROCID"' "$mnt"
wait "$daemons"
echo "cluster done"
"""
        job = self.cluster.sbatch([f"--output={self.out}/job-%j.out", "--ntasks=2", "--cpus-per-task=1"],
                                  "#!/bin/bash\n" + script, user=user)
        state, code = self.finished(job, timeout=180)
        out = self.output(job)
        self.assertEqual((state, code), ("COMPLETED", "0:0"), out)
        self.assertEqual(out.count(f"verified {len(self.digests)} files"), 2, out)
        self.assertIn("mounted: ", out)
        self.assertIn("cluster done", out)
        self.assertFalse([m for m in clairfs_mounts() if m.startswith(work)], "a mount stays behind")
        self.assertFalse(daemons_of(os.path.join(work, f"mnt-{job}-0")) + daemons_of(os.path.join(work, f"mnt-{job}-1")))
        stats = []
        for r in range(2):
            with open(os.path.join(work, f"mnt-{job}-{r}.stats")) as f:
                stats.append(json.load(f))
        backing = sum(s["backing_bytes"] for s in stats)
        print(f"\n    2 ranks under srun --mpi=pmi2: backing bytes / dataset = {backing / total:.3f}, "
              f"peer bytes in = {sum(s['peer_bytes_in'] for s in stats)}", file=sys.stderr)
        self.assertLessEqual(backing, 1.02 * total)
        self.assertGreater(sum(s["peer_bytes_in"] for s in stats), 0)
        for s in stats:
            self.assertEqual(set(s["peer_refused"].values()), {0}, s["peer_refused"])


def main():
    reason = skip_reason()
    if reason:
        print(f"slurm: skipped: {reason}")
        return 77
    for name, value in (("CLAIRFS_BIN", CLAIRFS), ("CLAIRFS_SLURM_HELPER", HELPER), ("CLAIRFS_SPANK_PLUGIN", PLUGIN)):
        if not value or not os.path.exists(value):
            print(f"slurm: {name} must name the built program ({value!r})")
            return 1
    return run_case("slurm", SlurmIntegration)


if __name__ == "__main__":
    sys.exit(main())
