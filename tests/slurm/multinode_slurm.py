"""A real K-node Slurm on this one machine for the tests: each node is a network namespace and
a mount namespace of its own, with its own slurmd (Debian 12's Slurm 22.05).

The network is tools/bench/netns_cluster.sh's (`up --nodes K --link-mbit 0`): a bridge in the
root namespace with SUBNET.1, node i the namespace cfs<ID>n<i> at SUBNET.(10+i), its interface
named like the bridge (DEV). munged and slurmctld run in the root namespace (SlurmctldHost
localhost(SUBNET.1): every node reaches the controller at the bridge's address). Node i's
slurmd runs in the network namespace cfs<ID>n<i> and in a mount namespace of its own (a slave
of the machine's: mounts made on the machine show in every node, a node's show nowhere else),
with a sysfs of the node's own on /sys as `ip netns exec` would mount it (UCX lists the node's
interfaces there) but with the machine's cgroup hierarchies kept (BOOT below). Before exec'ing
`slurmd -D -N n<i>` the node binds its private directories over shared paths:

  ROOT/nodes/n<i>                  over ROOT/node-local (`node_local`): the node-local scratch
                                   (mountpoints, state), the same path on every node
  ROOT/nodes/n<i>/private/run-clairfs  over /run/clairfs (`private_paths`): where a clairfs run
                                   by root puts its control mount, under a name made from the
                                   mountpoint's path; a daemon that stops removes that directory,
                                   which would detach the control mount of every other node
                                   with the same mountpoint if /run/clairfs were shared

Node i's processes (slurmd, slurmstepd, the jobs' tasks) share the machine's pid namespace,
file systems outside those paths, /dev/shm and host name; MPI between nodes needs `mpi_env`
(TCP on DEV, no shared memory) in the job's environment.

Every wait polls a condition with a deadline. stop() (also registered with the fs harness's
teardowns, so an exit or SIGTERM without it still runs it) cancels the jobs, stops the daemons
(SIGTERM, then SIGKILL), SIGKILLs every process of the cluster left (slurmstepd, the jobs'),
and takes the network down, which kills whatever is still inside a node; a node's mounts go
with its last process. If the test process is SIGKILLed, a watcher process does the same
(watch() below); and the next `up` sweeps the namespaces of an owner that is gone.
"""
import os
import re
import signal
import stat
import subprocess
import sys

from slurm_cluster import SlurmCluster, _which, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.realpath(os.path.join(HERE, "..", ".."))
NETNS = os.path.join(REPO, "tools", "bench", "netns_cluster.sh")
sys.path.insert(0, os.path.join(REPO, "tests", "fs"))
import harness  # noqa: E402  (teardowns that run at exit and on SIGTERM/SIGINT)

# Node i's slurmd is started as
#   nsenter --net=/run/netns/NODE -- unshare --mount --propagation slave -- /bin/sh -c BOOT
#     node-boot MACHINE_MNT_NS KEEP SRC DST [SRC DST]... -- slurmd -D -N n<i>
# (each program execs the next: the Popen's pid ends up slurmd's). In its new mount namespace
# BOOT first refuses to go on if that is still the machine's (MACHINE_MNT_NS, /proc/self/ns/mnt
# of the test), then does what `ip netns exec` does, a sysfs of the node's own on /sys (UCX
# lists the node's interfaces there), but keeps the machine's cgroup hierarchies under it
# (slurmd does not start without /sys/fs/cgroup; `ip netns exec` loses them with the old /sys):
# they are moved to the empty directory KEEP and back. Then it binds each SRC over DST and
# becomes slurmd (with the FUSE control file system mounted again, as on the machine). Paths
# come as arguments, never as shell text.
BOOT = """set -eu
[ "$(readlink /proc/self/ns/mnt)" != "$1" ] || { echo "node-boot: not in a mount namespace of its own"; exit 1; }
keep=$2
shift 2
mount --rbind /sys/fs/cgroup "$keep"
umount -l /sys
mount -t sysfs sysfs /sys
mount --move "$keep" /sys/fs/cgroup
mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null || true
while [ "$1" != -- ]; do
  mount --bind "$1" "$2"
  shift 2
done
shift
exec "$@"
"""


def netns_unusable():
    """Why this machine cannot host the namespaces (netns_cluster.sh usable), or None."""
    r = subprocess.run([NETNS, "usable"], capture_output=True, text=True, timeout=60)
    if r.returncode == 0:
        return None
    return (r.stdout + r.stderr).strip() or f"netns_cluster.sh usable: exit {r.returncode}"


def network_left(net_id):
    """The namespaces and links of the network net_id that still exist (netns_cluster.sh's
    names: cfs<ID>n<i>, cfs<ID>h<i>, cfs<ID>br)."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, timeout=10).stdout
    names += [line.split(": ")[1].split("@")[0] for line in links.splitlines() if ": " in line]
    return sorted(n for n in names if re.fullmatch(f"cfs{net_id}(n[0-9]+|h[0-9]+|br)", n))


def network_down(net_id, attempts=3):
    """netns_cluster.sh down, again while anything of the network is left (a down racing the
    processes it kills may stop half-way). Returns what is left, [] when all went."""
    left = []
    for _ in range(attempts):
        r = subprocess.run([NETNS, "down", "--id", net_id], capture_output=True, text=True, timeout=120)
        left = network_left(net_id)
        if not left:
            return []
        print(f"WARNING: netns_cluster.sh down (exit {r.returncode}) left {left}: {r.stdout}{r.stderr}",
              file=sys.stderr)
    return left


def watch(net_id, conf):
    """The watcher (python3 multinode_slurm.py watch ID SLURM_CONF), started by start() in a
    session of its own: it blocks reading its standard input, a pipe only the test process
    holds. stop() writes "done" once it took everything down; an end of file without it means
    the test process died (SIGKILL) without stop(): then it SIGKILLs every process carrying the
    cluster's SLURM_CONF (its daemons, slurmstepd, the jobs) and takes the network down, which
    kills what is left in the nodes (a node's mounts go with its last process)."""
    if sys.stdin.buffer.read() == b"done":
        return 0
    print("the test process died without stop(): killing the cluster's processes", flush=True)
    mark = b"SLURM_CONF=" + conf.encode() + b"\0"
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark in f.read() and int(pid) != os.getpid():
                    os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    left = network_down(net_id)
    print(f"network {net_id} down" + (f", left: {left}" if left else ""), flush=True)
    return 1 if left else 0


class MultiNodeSlurm(SlurmCluster):
    """K nodes n0..n{K-1} and one partition ("test", all of them), configured in `root`.

    nodes: K. plugstack_lines: plugstack.conf's lines (none: no SPANK plugin). private_paths:
    absolute directories of the machine each node gets a private copy of (created on the
    machine when missing, 0755). node_local_mode: the mode of each node's node_local (0o1777
    for jobs of unprivileged users that make their mountpoints there). net_id: the network's
    id (netns_cluster.sh --id, digits), this process's pid by default: a later `up` sweeps the
    network of an id whose process is gone. users_open_fuse: each node's /dev/fuse is open to
    every user (mode 0666, as Debian's udev rule makes it), whatever the machine's is, so that
    jobs of unprivileged users mount through fusermount3. link_mbit: each node's link capped at
    that many Mbit/s each way (tc tbf; 0: uncapped). Each node has the machine's CPUs and
    half its memory.
    """

    def __init__(self, root, nodes=3, plugstack_lines=(), private_paths=("/run/clairfs",),
                 node_local_mode=0o755, net_id=None, users_open_fuse=False, link_mbit=0):
        super().__init__(root, list(plugstack_lines))
        self.nodes = nodes
        self.names = [f"n{i}" for i in range(nodes)]
        self.node_local = os.path.join(root, "node-local")
        self.private_paths = [os.path.abspath(p) for p in private_paths]
        self.node_local_mode = node_local_mode
        self.net_id = str(net_id if net_id is not None else os.getpid())
        self.net = {}  # netns_cluster.sh up's KEY=VALUE lines
        self._net_tried = False
        self._registered = False
        self._watcher = None
        self.users_open_fuse = users_open_fuse
        self.link_mbit = link_mbit

    # --- where things are ----------------------------------------------------------------
    def node_dir(self, i):
        """Node i's node_local as the machine (and the test) sees it."""
        return os.path.join(self.root, "nodes", self.names[i])

    def _user_fuse(self):
        """A /dev/fuse of mode 0666 (Debian's udev rule) for the nodes: a device node of the
        same numbers as the machine's, made once in root, bound over /dev/fuse in each node."""
        path = os.path.join(self.root, "boot", "fuse")
        if not os.path.exists(path):
            st = os.stat("/dev/fuse")
            os.mknod(path, 0o666 | stat.S_IFCHR, st.st_rdev)
            os.chmod(path, 0o666)
        return path

    def _private_dir(self, i, path):
        return os.path.join(self.node_dir(i), "private", path.strip("/").replace("/", "-"))

    @property
    def bridge_ip(self):
        return self.net["subnet"] + ".1"

    def ip(self, i):
        return self.net[f"ip_{i}"]

    def netns(self, i):
        """Node i's network namespace's name (ip netns)."""
        return self.net[f"host_{i}"]

    @property
    def mpi_env(self):
        """What a job's environment needs for one MPI world over TCP between the nodes
        (netns_mpi_env in tools/bench/netns_lib.sh): UCX's TCP transport alone on the nodes'
        interface, and MPICH told that no two ranks share a node."""
        return {"UCX_TLS": "tcp", "UCX_NET_DEVICES": self.net["dev"], "MPIR_CVAR_NOLOCAL": "1"}

    # --- slurm.conf ----------------------------------------------------------------------
    def _conf_controller(self):
        return f"localhost({self.bridge_ip})"

    def _conf_slurmd_paths(self):
        r = self.root
        return {"SlurmdSpoolDir": f"{r}/spool/%n", "SlurmdPidFile": f"{r}/slurmd-%n.pid",
                "SlurmdLogFile": f"{r}/slurmd-%n.log"}

    def _conf_nodes(self, cpus, memory_mib):
        lines = [f"NodeName={n} NodeAddr={self.ip(i)} CPUs={cpus} RealMemory={memory_mib} State=UNKNOWN"
                 for i, n in enumerate(self.names)]
        lines.append(f"PartitionName=test Nodes={','.join(self.names)} Default=YES MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"

    # --- set-up --------------------------------------------------------------------------
    def _start_watcher(self):
        env = {k: v for k, v in self.env.items() if k != "SLURM_CONF"}
        log = open(os.path.join(self.root, "watcher.out"), "wb")
        argv = [sys.executable, "-B", os.path.abspath(__file__), "watch", self.net_id, self.env["SLURM_CONF"]]
        self._watcher = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        log.close()

    def _stop_watcher(self):
        if self._watcher is None:
            return
        try:
            self._watcher.stdin.write(b"done")
            self._watcher.stdin.close()
        except OSError:
            pass
        try:
            self._watcher.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._watcher.kill()
            self._watcher.wait(timeout=10)
        self._watcher = None

    def _network_up(self):
        self._net_tried = True
        r = subprocess.run([NETNS, "up", "--nodes", str(self.nodes), "--link-mbit", str(self.link_mbit), "--id", self.net_id,
                            "--map", os.path.join(self.root, "hosts.map")],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"netns_cluster.sh up failed ({r.returncode}): {r.stdout}{r.stderr}")
        self.net = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)

    def _network_down(self):
        left = network_down(self.net_id)
        if left:
            print(f"WARNING: the network {self.net_id} did not go: {left}", file=sys.stderr)

    def start(self, timeout=60):
        """Brings up the network, munged, slurmctld and one slurmd per node, and waits until
        every node is idle. On a failure it raises with the daemons' logs; stop() undoes what
        was made (it is registered as a teardown before anything is)."""
        harness.register_teardown(self._teardown)
        self._registered = True
        for name in self.names:
            os.makedirs(os.path.join(self.root, "spool", name), mode=0o755)
            os.makedirs(os.path.join(self.root, "boot", name), mode=0o755)
        os.makedirs(self.node_local, mode=0o755)
        for path in self.private_paths:
            os.makedirs(path, mode=0o755, exist_ok=True)
        for i in range(self.nodes):
            os.makedirs(self.node_dir(i))
            os.chmod(self.node_dir(i), self.node_local_mode)
            for path in self.private_paths:
                os.makedirs(self._private_dir(i, path), mode=0o755)
                os.chmod(self._private_dir(i, path), 0o755)
        self._start_watcher()
        self._network_up()
        self._start("munged", self._write_munge())
        wait_for("munged's socket", lambda: os.path.exists(self.munge_socket) or self._died("munged"), 10)
        self._check_alive("munged")
        self._write_conf()
        self._start("slurmctld", [_which("slurmctld"), "-D", "-i"])
        machine_ns = os.readlink("/proc/self/ns/mnt")
        for i, name in enumerate(self.names):
            binds = [self.node_dir(i), self.node_local]
            for path in self.private_paths:
                binds += [self._private_dir(i, path), path]
            if self.users_open_fuse:
                binds += [self._user_fuse(), "/dev/fuse"]
            self._start(f"slurmd-{name}",
                        [_which("nsenter"), f"--net=/run/netns/{self.netns(i)}", "--", _which("unshare"), "--mount",
                         "--propagation", "slave", "--", "/bin/sh", "-c", BOOT, "node-boot", machine_ns,
                         os.path.join(self.root, "boot", name)] + binds + ["--", _which("slurmd"), "-D", "-N", name])
        try:
            wait_for("every node to be idle",
                     lambda: self._died_any() or set(self.node_states().values()) == {"idle"}, timeout, 0.2)
            for name in self.procs:
                self._check_alive(name)
        except (TimeoutError, RuntimeError) as e:
            raise RuntimeError(f"{e}; states {self.node_states()}\n" +
                               "".join(self.log(n) for n in ["slurmctld"] + [f"slurmd-{m}" for m in self.names]))
        return self

    # --- use -----------------------------------------------------------------------------
    def node_pid(self, i):
        """The pid of node i's slurmd (in the node's namespaces once start() returned)."""
        return self.procs[f"slurmd-{self.names[i]}"].pid

    def node_state(self, node=0):
        """sinfo's state of a node (index or name), "" when unknown."""
        return super().node_state(self.names[node] if isinstance(node, int) else node)

    def node_states(self):
        """{node name: sinfo's state} of every node sinfo answers for."""
        try:
            r = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=10)
        except subprocess.TimeoutExpired:
            return {}
        if r.returncode != 0:
            return {}
        return dict(line.split(None, 1) for line in r.stdout.splitlines() if " " in line)

    def wait_idle(self, timeout=30):
        """Waits until every node is idle again (after a job, its epilog)."""
        wait_for("every node to be idle", lambda: set(self.node_states().values()) == {"idle"}, timeout, 0.2)

    def node_mounts(self, i):
        """[(mount point, fstype, source)] of the FUSE mounts in node i's mount namespace (read
        from /proc/<its slurmd>/mountinfo). Mounts made on the machine show there too (the
        node's namespace is their slave): filter by a node-local path (a clairfs control
        mount's source is "clairfs-control:<its clairfs mount>")."""
        result = []
        with open(f"/proc/{self.node_pid(i)}/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                tail = right.split()
                if tail and tail[0].startswith("fuse"):
                    source = harness.unescape_mountinfo(tail[1]) if len(tail) > 1 else ""
                    result.append((harness.unescape_mountinfo(left.split()[4]), tail[0], source))
        return result

    def run_on(self, i, argv, timeout=60, **kw):
        """Runs argv in node i's mount and network namespaces (nsenter into its slurmd's), with
        this cluster's environment; a CompletedProcess with text output. The working directory
        is the namespace's root unless --wd is wanted: pass cwd= to run it there."""
        cwd = kw.pop("cwd", None)
        pre = ["nsenter", f"--target={self.node_pid(i)}", "--mount", "--net"]
        if cwd:
            pre.append(f"--wd={cwd}")
        return self.run(pre + ["--"] + list(argv), timeout=timeout, **kw)

    def node_processes(self, i):
        """Pids of every process in node i's network namespace other than its slurmd."""
        ns = os.stat(f"/run/netns/{self.netns(i)}")
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == self.node_pid(i):
                continue
            try:
                st = os.stat(f"/proc/{entry}/ns/net")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (ns.st_dev, ns.st_ino):
                pids.append(int(entry))
        return pids

    # --- teardown ------------------------------------------------------------------------
    def _cancel_jobs(self, timeout=30):
        if not self.procs.get("slurmctld") or self.procs["slurmctld"].poll() is not None:
            return
        try:
            ids = self.run(["squeue", "-h", "-o", "%i"], timeout=10).stdout.split()
            if ids:
                self.run(["scancel"] + ids, timeout=10)
            wait_for("the jobs to leave the queue",
                     lambda: not self.run(["squeue", "-h"], timeout=10).stdout.strip(), timeout, 0.2)
        except (TimeoutError, subprocess.TimeoutExpired) as e:
            print(f"WARNING: cancelling the jobs: {e}", file=sys.stderr)

    def _teardown(self):
        try:
            self._cancel_jobs()
            self._stop_daemons([f"slurmd-{n}" for n in self.names])
            self._stop_daemons(["slurmctld"])
            self._stop_daemons(["munged"])
            try:
                self._kill_leftovers()
            except TimeoutError as e:
                print(f"WARNING: {e}: {self.leftovers()}", file=sys.stderr)
        finally:
            if self._net_tried:
                self._network_down()  # kills whatever is left in the nodes
            self._stop_watcher()

    def stop(self):
        """Cancels the jobs, stops every daemon and job process (each with a deadline), takes
        the network down. Once: a second call (or the harness's at exit) does nothing."""
        if self._registered:
            harness.release_teardown(self._teardown)


if __name__ == "__main__" and sys.argv[1:2] == ["watch"]:
    sys.exit(watch(*sys.argv[2:4]))
