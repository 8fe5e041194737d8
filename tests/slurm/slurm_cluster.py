"""A real one-node Slurm cluster on localhost for the tests: munged, slurmctld and slurmd
started as child processes with every path in a temporary directory (Debian 12's Slurm 22.05).

Every wait polls its condition with a deadline; stop() kills every daemon the cluster started
(SIGTERM, then SIGKILL) and waits for each with a deadline.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import unittest

SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol", "squeue")


def missing_binaries():
    """The Slurm and munge programs that are not installed (the test skips without them)."""
    return [b for b in SLURM_BINARIES if shutil.which(b, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None]


def run_case(name, case):
    """Runs a unittest.TestCase's tests, prints how long they took and the summary line
    tools/test.sh counts (`slurm: N passed, N failed, N skipped`); returns the exit status."""
    started = time.monotonic()
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    skipped = len(result.skipped)
    print(f"{name}: took {time.monotonic() - started:.1f} s")
    print(f"slurm: {result.testsRun - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return 0 if result.wasSuccessful() else 1


def write_job_inputs(tmp, digests):
    """Beside a dataset ({relative path: sha256}) in tmp: expected.json (what verify_dataset.py
    checks), manifest.txt (one epoch of every file) and out/ (jobs' outputs, writable by every
    user). Returns (expected, manifest, out)."""
    expected = os.path.join(tmp, "expected.json")
    with open(expected, "w") as f:
        json.dump(digests, f)
    manifest = os.path.join(tmp, "manifest.txt")
    with open(manifest, "w") as f:
        f.write("#epoch\n" + "".join(p + "\n" for p in sorted(digests)))
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    os.chmod(out, 0o1777)
    return expected, manifest, out


def _which(name):
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, condition, timeout, interval=0.1):
    """Polls condition() until it returns something true, or raises TimeoutError at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class SlurmCluster:
    """One node ("localhost") and one partition ("test"), configured in `root`.

    plugstack: the lines of plugstack.conf. The node's CPUs and memory are the machine's.
    """

    def __init__(self, root, plugstack_lines):
        self.root = root
        self.procs = {}
        self.env = dict(os.environ, SLURM_CONF=os.path.join(root, "slurm.conf"))
        self.env["PATH"] = self.env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
        self.plugstack_lines = plugstack_lines

    # --- set-up -------------------------------------------------------------------------
    def _write_munge(self):
        d = os.path.join(self.root, "munge")
        os.makedirs(os.path.join(d, "etc"), mode=0o700)
        os.chmod(d, 0o755)  # munged wants its socket's directory searchable by every user
        key = os.path.join(d, "etc", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        self.munge_socket = os.path.join(d, "munge.socket")
        return [_which("munged"), "-F", "--force", f"--socket={self.munge_socket}",
                f"--key-file={key}", f"--pid-file={os.path.join(d, 'munged.pid')}",
                f"--seed-file={os.path.join(d, 'etc', 'munged.seed')}"]

    # The parts of slurm.conf a subclass changes (multinode_slurm.MultiNodeSlurm: K nodes).
    def _conf_controller(self):
        """SlurmctldHost's value."""
        return "localhost"

    def _conf_slurmd_paths(self):
        """slurmd's spool directory, pid and log files (Slurm expands %n to the node's name)."""
        r = self.root
        return {"SlurmdSpoolDir": f"{r}/spool", "SlurmdPidFile": f"{r}/slurmd.pid",
                "SlurmdLogFile": f"{r}/slurmd.log"}

    def _conf_nodes(self, cpus, memory_mib):
        """The NodeName and PartitionName lines."""
        return (f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mib} State=UNKNOWN\n"
                "PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n")

    def _write_conf(self):
        cpus = os.cpu_count() or 1
        with open("/proc/meminfo") as f:
            total_kib = int(f.readline().split()[1])
        memory_mib = max(256, total_kib // 1024 // 2)
        r = self.root
        os.makedirs(os.path.join(r, "ctld"), mode=0o755)
        paths = self._conf_slurmd_paths()
        if "%" not in paths["SlurmdSpoolDir"]:  # with %n, each slurmd makes its own
            os.makedirs(paths["SlurmdSpoolDir"], mode=0o755)
        plugstack = os.path.join(r, "plugstack.conf")
        with open(plugstack, "w") as f:
            f.write("\n".join(self.plugstack_lines) + "\n")
        conf = f"""
ClusterName=clairfstest
SlurmctldHost={self._conf_controller()}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={r}/ctld
SlurmdSpoolDir={paths["SlurmdSpoolDir"]}
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={paths["SlurmdPidFile"]}
SlurmctldLogFile={r}/slurmctld.log
SlurmdLogFile={paths["SlurmdLogFile"]}
SlurmdDebug=debug
PlugStackConfig={plugstack}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
""" + self._conf_nodes(cpus, memory_mib)
        with open(self.env["SLURM_CONF"], "w") as f:
            f.write(conf.lstrip())

    def _start(self, name, argv):
        log = open(os.path.join(self.root, f"{name}.out"), "wb")
        self.procs[name] = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def start(self, timeout=40):
        """Starts munged, slurmctld and slurmd, and waits until the node is idle."""
        self._start("munged", self._write_munge())
        wait_for("munged's socket", lambda: os.path.exists(self.munge_socket) or self._died("munged"), 10)
        self._check_alive("munged")
        self._write_conf()
        self._start("slurmctld", [_which("slurmctld"), "-D", "-i"])
        self._start("slurmd", [_which("slurmd"), "-D", "-N", "localhost"])
        wait_for("the node to be idle", lambda: self.node_state() == "idle" or self._died_any(), timeout, 0.2)
        for name in self.procs:
            self._check_alive(name)

    def _died(self, name):
        return self.procs[name].poll() is not None

    def _died_any(self):
        return any(p.poll() is not None for p in self.procs.values())

    def _check_alive(self, name):
        if self._died(name):
            raise RuntimeError(f"{name} exited with status {self.procs[name].returncode}:\n" + self.log(name))

    def log(self, name):
        """What a daemon printed (its -D output) and its log file, for failure reports."""
        text = ""
        for path in (os.path.join(self.root, f"{name}.out"), os.path.join(self.root, f"{name}.log")):
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    text += f"--- {path}\n" + f.read()[-20000:]
        return text

    # --- use ----------------------------------------------------------------------------
    def run(self, argv, timeout=20, **kw):
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, **kw)

    def node_state(self, node="localhost"):
        """sinfo's state of the node (idle, mixed, allocated, drained, ...), "" when unknown."""
        try:
            r = self.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], timeout=10)
        except subprocess.TimeoutExpired:
            return ""
        return r.stdout.strip() if r.returncode == 0 else ""

    def sbatch(self, args, script, user=None, cwd=None, env=None):
        """Submits script (text) with sbatch args from cwd; returns the job id. user: (uid,
        gid) to submit as (the job then runs as that user). env: variables added to sbatch's
        environment, which the job inherits."""
        pre = []
        if user is not None:
            pre = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups"]
        env = dict(self.env, **(env or {}))
        if cwd:
            env["PWD"] = cwd
        r = subprocess.run(pre + ["sbatch", "--parsable"] + list(args), input=script, env=env, cwd=cwd,
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"sbatch {args} failed: {r.stderr}")
        return int(r.stdout.strip().split(";")[0])

    def job(self, job_id):
        """scontrol's fields of a job as a dict (JobState, ExitCode, ...)."""
        r = self.run(["scontrol", "-o", "show", "job", str(job_id)])
        fields = {}
        for word in r.stdout.split():
            key, _, value = word.partition("=")
            fields.setdefault(key, value)
        return fields

    def wait_job(self, job_id, timeout=60):
        """Waits until the job reached a final state with its epilog done; returns its fields."""
        final = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL")

        def done():
            f = self.job(job_id)
            return f if f.get("JobState") in final and "COMPLETING" not in f.get("JobState", "") else None
        return wait_for(f"job {job_id} to finish", done, timeout, 0.2)

    # --- teardown -----------------------------------------------------------------------
    def leftovers(self):
        """Pids of processes of this cluster other than its running daemons and their own
        children (slurmctld's slurmscriptd): slurmstepd (forked twice, so no child of slurmd)
        and the jobs' processes, which carry this cluster's SLURM_CONF in their environment."""
        mark = b"SLURM_CONF=" + self.env["SLURM_CONF"].encode() + b"\0"
        daemons = {p.pid for p in self.procs.values() if p.poll() is None}
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid() or int(entry) in daemons:
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark not in f.read():
                        continue
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) in daemons:
                        continue
                pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
        return pids

    def _stop_daemons(self, names, timeout=10):
        """SIGTERM to the process groups of the named daemons at once, SIGKILL to those still
        there after timeout s; waits for each (another timeout s after the SIGKILL)."""
        procs = [self.procs[n] for n in names if self.procs.get(n) is not None and self.procs[n].poll() is None]
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=timeout)

    def _kill_leftovers(self, timeout=10):
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_for("this cluster's processes to exit", lambda: not self.leftovers(), timeout)

    def stop(self):
        """SIGTERM to every daemon (slurmd first), SIGKILL after 10 s; waits for each. Then
        SIGKILL to any slurmstepd or job process of this cluster still there (jobs are
        normally over by then: the caller cancels them first)."""
        for name in ("slurmd", "slurmctld", "munged"):
            self._stop_daemons([name])
        self._kill_leftovers()
