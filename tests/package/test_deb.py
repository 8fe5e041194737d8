#!/usr/bin/env python3
"""The Debian package end to end, on this machine (root): tools/build_deb.sh builds it, dpkg
installs it, and then

  - it holds the daemon and its tools in /usr/bin, the manual pages, the default configuration
    /etc/clairfs/clairfs.yaml as a conffile, the systemd unit template, the Python package in
    /usr/lib/python3/dist-packages, and every file `meson install` installs (so a program or
    script added to the meson build, e.g. the Slurm integration, is in the package or this
    test fails);
  - /usr/bin/python3 imports that Python package, and the installed clairfs-ctl runs from it;
  - the installed /usr/bin/clairfs mounts a dataset, its bytes read back equal, a manifest
    registered with the installed clairfs-ctl is planned, and it unmounts;
  - an fstab line of type fuse.clairfs mounts through mount(8) and mount.fuse3, which run the
    installed /usr/bin/clairfs (tools/setup.sh's /usr/local/bin/clairfs comes first on the
    usual PATH, so the test gives mount(8) a PATH without /usr/local);
  - `dpkg -r` removes all but the conffile and `dpkg -P` removes everything the package
    brought, compiled Python files included.

Whatever happens, nothing is left behind: the mounts and daemons go, the package is purged,
and an /etc/clairfs/clairfs.yaml that was there before (tools/setup.sh installs one, owned by
no package) is put back as it was. Runs of this test on one machine take turns (a lock file):
each installs and purges the same package.

Usage: test_deb.py [BUILD_DIR]   (BUILD_DIR: where tools/build_deb.sh builds; default a temp
dir). Exit status 77 (skipped) without /dev/fuse.
"""
import fcntl
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "fs"))
from harness import daemons_of, wait_for  # noqa: E402  (wait_for: AssertionError on a timeout)
from harness import fuse_mounts as harness_fuse_mounts  # noqa: E402
PACKAGE = "clairfs"
CONFFILE = "/etc/clairfs/clairfs.yaml"
UNIT = "/lib/systemd/system/clairfs@.service"
PY_DIR = "/usr/lib/python3/dist-packages"
LOCK = "/run/lock/clairfs-package-test.lock"
# What mount(8) runs the fstab line's helper with: Debian's directories, not /usr/local.
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
DPKG_ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")


class Failed(AssertionError):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def run(cmd, timeout=120, env=None, ok=True):
    """Runs cmd (a list; no shell), returns the CompletedProcess; with ok, a non-zero exit
    fails the test with its output."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                       stdin=subprocess.DEVNULL)
    if ok and r.returncode != 0:
        raise Failed(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r


def package_status():
    """dpkg's status of the package ("install ok installed", "deinstall ok config-files"),
    or "" when dpkg knows nothing of it."""
    r = run(["dpkg-query", "-W", "-f=${Status}", PACKAGE], ok=False)
    return r.stdout.strip() if r.returncode == 0 else ""


def fuse_mounts():
    """[(mount point, fstype, source)] of every FUSE mount."""
    return harness_fuse_mounts(with_source=True)


def mounted(path):
    return any(m == path for m, _, _ in fuse_mounts())


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Cleanup:
    """Undo steps, run last first, each on its own: one that fails does not stop the rest."""

    def __init__(self):
        self.steps = []

    def add(self, what, fn):
        self.steps.append((what, fn))

    def run(self):
        ok = True
        while self.steps:
            what, fn = self.steps.pop()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - every step must get its turn
                print(f"cleanup: {what}: {e}", file=sys.stderr)
                ok = False
        return ok


def release_mount(mnt):
    """Unmounts mnt and the control mount of a daemon on it, and ends its daemons: fusermount3
    -u, then a lazy unmount, then SIGKILL, each with a deadline."""
    for flag in ("-u", "-u", "-uz"):
        if not mounted(mnt):
            break
        try:
            subprocess.run(["fusermount3", flag, mnt], capture_output=True, timeout=20)
        except subprocess.TimeoutExpired:
            pass
        try:
            wait_for(lambda: not mounted(mnt), 5, f"{mnt} to unmount")
        except AssertionError:
            pass
    for pid in daemons_of(mnt):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        try:
            wait_for(lambda: not alive(pid), 10, f"clairfs {pid} to stop")
        except AssertionError:
            os.kill(pid, signal.SIGKILL)
    for point, fstype, source in fuse_mounts():
        if fstype == "fuse.clairfs-control" and source.partition(":")[2] == mnt:
            subprocess.run(["fusermount3", "-uz", point], capture_output=True, timeout=20)
    check(not mounted(mnt), f"{mnt} is still mounted")


def purge():
    if package_status():
        run(["dpkg", "--purge", PACKAGE], timeout=300, env=DPKG_ENV)


class ConfigKeeper:
    """Keeps an /etc/clairfs/clairfs.yaml that was there before the install (tools/setup.sh
    installs it, owned by no package; a purge deletes the conffile) and puts it back."""

    def __init__(self, tmp):
        self.saved = None
        if os.path.lexists(CONFFILE):
            self.saved = os.path.join(tmp, "clairfs.yaml.before")
            shutil.copy2(CONFFILE, self.saved)
            self.dir_mode = os.stat(os.path.dirname(CONFFILE)).st_mode & 0o7777

    def restore(self):
        if self.saved is None:
            return
        os.makedirs(os.path.dirname(CONFFILE), mode=self.dir_mode, exist_ok=True)
        with open(self.saved, "rb") as f:
            before = f.read()
        if os.path.exists(CONFFILE):
            with open(CONFFILE, "rb") as f:
                if f.read() == before:
                    return
        tmp = CONFFILE + ".clairfs-test"
        shutil.copy2(self.saved, tmp)
        os.replace(tmp, CONFFILE)


def take_turn(timeout=900):
    """The machine-wide lock of this test (another checkout's run may be installing)."""
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    def locked():
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
    if not locked():
        print("waiting for another run of the package test", flush=True)
        wait_for(locked, timeout, "the package test's lock", interval=1)
    return fd


def make_dataset(root):
    """Files of random bytes in three directories, one larger than a cache chunk (4 MiB)."""
    rng = random.Random(30)
    files = {}
    for i in range(24):
        rel = f"class{i % 3}/img{i:03d}.bin"
        files[rel] = rng.randbytes(rng.randrange(1, 200_000))
    files["shards/big.bin"] = rng.randbytes(6 << 20)
    for rel, data in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    return files


def read_back(mnt, files):
    for rel, data in files.items():
        with open(os.path.join(mnt, rel), "rb") as f:
            check(f.read() == data, f"{rel} read through {mnt} differs from the dataset")


def write_config(path, log):
    # A RAM tier only: no SSD cache directory left in /var/tmp.
    with open(path, "w") as f:
        f.write("fuse:\n  threads: 4\n"
                "cache:\n  tiers:\n    - kind: ram\n      capacity: 64MiB\n"
                "  staging:\n    capacity: 16MiB\n"
                f"log:\n  level: info\n  file: {log}\n")


def stats(mnt):
    with open(os.path.join(mnt, ".clairfs", "stats")) as f:
        return json.load(f)


def installed_by_meson(build_dir):
    """The paths `meson install` installs in the package build (meson introspect)."""
    objs = [d for d in os.listdir(os.path.join(build_dir, "clairfs")) if d.startswith("obj-")]
    check(len(objs) == 1, f"one meson build directory in {build_dir}/clairfs: {objs}")
    r = run(["meson", "introspect", "--installed",
             os.path.join(build_dir, "clairfs", objs[0])])
    return sorted(set(json.loads(r.stdout).values()))


def unit_command(unit, env):
    """The argv of the unit's ExecStart= as systemd expands it: its Environment= defaults,
    then env (what an EnvironmentFile= would set); "${X}" is one word, "$X" its value split
    at spaces (no word when empty)."""
    values = {}
    line = None
    for raw in unit.splitlines():
        key, _, value = raw.partition("=")
        if key == "Environment":
            name, _, v = value.partition("=")
            values[name] = v
        elif key == "ExecStart":
            line = value
    check(line is not None, "the unit has no ExecStart=")
    values.update(env)
    argv = []
    for word in line.split():
        if word.startswith("${") and word.endswith("}"):
            argv.append(values.get(word[2:-1], ""))
        elif word.startswith("$"):
            argv.extend(values.get(word[1:], "").split())
        else:
            argv.append(word)
    return argv


def deb_paths(deb):
    """Every path the .deb installs (dpkg-deb -c), directories ending in '/'."""
    listing = run(["dpkg-deb", "-c", deb]).stdout.splitlines()
    paths = []
    for line in listing:
        name = line.split(None, 5)[5].split(" -> ")[0]
        paths.append(name[1:] if name.startswith("./") else name)
    return [p for p in paths if p not in ("/", "")]


def main():
    if not os.path.exists("/dev/fuse"):
        print("skipped: no /dev/fuse")
        return 77
    if os.geteuid() != 0:
        print("FAIL: the package test installs a package: run it as root", file=sys.stderr)
        return 1
    # meson test's timeout and Ctrl-C end the test through the cleanup below.
    def stop(signum, _frame):
        raise SystemExit(f"stopped by signal {signum}")
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    tmp = tempfile.mkdtemp(prefix="clairfs-deb-")
    build_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tmp, "build")
    cleanup = Cleanup()
    cleanup.add("remove " + tmp, lambda: shutil.rmtree(tmp, ignore_errors=True))
    times = {}
    started = time.monotonic()
    try:
        # noopt (-O0): the package's install, unit, mounts and purge are what this test checks,
        # not its speed, and an unoptimized build compiles in about half the time (cold, on a
        # fresh machine, the build is most of this test's time). The optimized binary is what
        # every other test runs.
        env = dict(os.environ)
        env["DEB_BUILD_OPTIONS"] = (env.get("DEB_BUILD_OPTIONS", "") + " noopt").strip()
        r = run([os.path.join(REPO, "tools", "build_deb.sh"), "--out", build_dir], timeout=1800,
                env=env)
        deb = r.stdout.strip().splitlines()[-1]
        check(deb.endswith(".deb") and os.path.isfile(deb), f"build_deb.sh printed {deb!r}")
        times["build"] = time.monotonic() - started

        # The package's metadata: dependencies and the conffile.
        fields = run(["dpkg-deb", "-f", deb, "Package", "Depends"]).stdout
        depends = fields.partition("Depends:")[2]
        names = {d.split()[0].split(":")[0] for alt in depends.split(",")
                 for d in alt.split("|") if d.strip()}
        # The libraries by prefix (their package names carry the soname's version).
        for need in ("fuse3", "python3", "libfuse3-", "librocksdb", "libmpich"):
            check(any(n == need or need.startswith("lib") and n.startswith(need) for n in names),
                  f"Depends lacks {need}: {depends.strip()}")
        conffiles = run(["dpkg-deb", "-I", deb, "conffiles"]).stdout.split()
        check(conffiles == [CONFFILE], f"conffiles: {conffiles}")
        paths = deb_paths(deb)
        files = [p for p in paths if not p.endswith("/")]
        for need in ("/usr/bin/clairfs", "/usr/bin/clairfs-ctl", "/usr/bin/clairfs-cache",
                     "/usr/bin/clairfs-bench", "/usr/share/man/man1/clairfs.1.gz",
                     "/usr/share/man/man5/clairfs.yaml.5.gz", CONFFILE, UNIT,
                     PY_DIR + "/clairfs/__init__.py", PY_DIR + "/clairfs/ctl/__init__.py",
                     "/usr/share/doc/clairfs/copyright",
                     "/usr/share/doc/clairfs/examples/imagenet.env"):
            check(need in files, f"the package lacks {need}")
        # Everything meson installs (man pages compressed by the packaging).
        for p in installed_by_meson(build_dir):
            check(p in files or p + ".gz" in files, f"meson installs {p}; the package lacks it")

        lock = take_turn()
        cleanup.add("unlock", lambda: os.close(lock))
        check(package_status() == "",
              f"the package is on this machine already ({package_status()}); the test installs "
              "and purges it: remove it first (dpkg -P clairfs)")
        clobbered = [p for p in files if p != CONFFILE and os.path.lexists(p)]
        check(not clobbered, f"files the package would replace exist already: {clobbered[:5]}")
        keeper = ConfigKeeper(tmp)
        cleanup.add("put back " + CONFFILE, keeper.restore)
        dirs_before = {p.rstrip("/") for p in paths if p.endswith("/") and os.path.isdir(p)}
        cleanup.add("purge the package", purge)
        t = time.monotonic()
        run(["dpkg", "-i", "--force-confold", deb], timeout=300, env=DPKG_ENV)
        times["install"] = time.monotonic() - t
        check(package_status() == "install ok installed", f"status: {package_status()}")
        listed = run(["dpkg", "-L", PACKAGE]).stdout.splitlines()
        for p in files:
            check(p in listed and os.path.lexists(p), f"{p} not installed")
        check(os.access("/usr/bin/clairfs", os.X_OK), "/usr/bin/clairfs is not executable")
        with open(CONFFILE, "rb") as f, open(os.path.join(REPO, "conf", "clairfs.yaml"), "rb") as g:
            if keeper.saved is None:
                check(f.read() == g.read(), f"{CONFFILE} is not conf/clairfs.yaml")
        for page, title in (("/usr/share/man/man1/clairfs.1.gz", ".TH CLAIRFS 1"),
                            ("/usr/share/man/man5/clairfs.yaml.5.gz", ".TH CLAIRFS.YAML 5")):
            with gzip.open(page, "rt") as f:
                check(title in f.read(), f"{page} is not the page {title}")
        version = run(["dpkg-query", "-W", "-f=${Version}", PACKAGE]).stdout
        said = run(["/usr/bin/clairfs", "--version"]).stdout
        check(version in said, f"/usr/bin/clairfs --version says {said!r}, the package {version}")

        # The Python package, as Debian's python3 imports it without /usr/local.
        probe = ("import sys; sys.path = [p for p in sys.path if not p.startswith('/usr/local')];"
                 "import clairfs, clairfs.ctl; print(clairfs.__file__, clairfs.__version__)")
        out = run(["/usr/bin/python3", "-c", probe], env=dict(os.environ, PYTHONPATH="")).stdout
        check(out.startswith(PY_DIR + "/clairfs/__init__.py"), f"python3 imports {out!r}")
        pyenv = dict(os.environ, PYTHONPATH=PY_DIR)  # the package's, before /usr/local's
        run(["/usr/bin/clairfs-ctl", "--help"], env=pyenv)

        # The unit template: systemd's own check of an instance (needs no running systemd).
        if shutil.which("systemd-analyze"):
            instance = os.path.join(tmp, "clairfs@pkgtest.service")
            shutil.copy(UNIT, instance)
            r = run(["systemd-analyze", "verify", instance], ok=False)
            check(r.returncode == 0 and not (r.stdout + r.stderr).strip(),
                  f"systemd-analyze verify clairfs@pkgtest.service:\n{r.stdout}{r.stderr}")
        else:
            print("note: no systemd-analyze, the unit is not verified")
        with open(UNIT) as f:
            unit = f.read()

        # The installed daemon, started directly.
        ds = os.path.join(tmp, "dataset")
        data = make_dataset(ds)
        cfg = os.path.join(tmp, "clairfs.yaml")
        write_config(cfg, os.path.join(tmp, "daemon.log"))
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        cleanup.add("unmount " + mnt, lambda: release_mount(mnt))
        t = time.monotonic()
        run(["/usr/bin/clairfs", "-c", cfg, ds, mnt], timeout=60)
        check(mounted(mnt), f"{mnt} is not mounted after /usr/bin/clairfs returned")
        pids = daemons_of(mnt)
        check(list(pids.values()) == ["/usr/bin/clairfs"], f"the daemons on {mnt}: {pids}")
        read_back(mnt, data)
        order = os.path.join(tmp, "order.txt")
        with open(order, "w") as f:
            f.write("".join(f"{rel}\n" for rel in sorted(data)))
        run(["/usr/bin/clairfs-ctl", "register", mnt, order], env=pyenv)
        wait_for(lambda: stats(mnt)["prefetch"]["planned_files"] == len(data), 20,
                 "the registered manifest to be planned")
        read_back(mnt, data)
        run(["fusermount3", "-u", mnt], timeout=30)
        wait_for(lambda: not any(alive(p) for p in pids), 20, "the daemon to exit")
        check(not mounted(mnt), f"{mnt} still mounted")
        times["direct mount"] = time.monotonic() - t

        # The unit's command line, as systemd expands it for an instance described like the
        # example (/usr/share/doc/clairfs/examples/imagenet.env): the daemon in the foreground
        # mounts, and the stop signal unmounts it with exit status 0.
        env_file = {"DATASET": ds, "MOUNTPOINT": mnt, "CONFIG": cfg}
        argv = unit_command(unit, env_file)
        check(argv[0] == "/usr/bin/clairfs", f"the unit runs {argv}")
        t = time.monotonic()
        unit_log = os.path.join(tmp, "unit.stderr")  # -f: the daemon logs to stderr
        with open(unit_log, "wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        cleanup.add("stop the unit's daemon", lambda: proc.poll() is None and proc.kill())
        wait_for(lambda: mounted(mnt) or proc.poll() is not None, 30, "the unit's daemon to mount")
        if proc.poll() is not None:
            with open(unit_log, errors="replace") as f:
                raise Failed(f"the unit's daemon exited {proc.returncode}: {f.read()}")
        read_back(mnt, data)
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise Failed("the unit's daemon did not stop within 30 s of SIGTERM")
        check(code == 0, f"the unit's daemon exited {code} after SIGTERM")
        check(not mounted(mnt), "the unit's daemon left its mount")
        times["unit's command"] = time.monotonic() - t

        # An fstab line: mount(8) runs mount.fuse3, whose shell runs the clairfs it finds.
        # mount(8) drops the caller's PATH, and the shell's own lists /usr/local/bin first: with
        # tools/setup.sh's clairfs there, that one mounts. So mount(8) is checked with the
        # clairfs it runs, and the installed one through mount.fuse3 called as mount(8) calls
        # it, with Debian's directories on PATH.
        local = shutil.which("clairfs", path="/usr/local/sbin:/usr/local/bin")
        fstab = os.path.join(tmp, "fstab")
        options = f"ro,config={cfg},allow_other"
        with open(fstab, "w") as f:
            f.write(f"{ds} {mnt} fuse.clairfs {options},noauto,nofail 0 0\n")
        t = time.monotonic()
        for how, cmd, env, want in (
                ("mount(8)", ["mount", "--fstab", fstab, mnt], None, local or "/usr/bin/clairfs"),
                ("mount.fuse3", ["/sbin/mount.fuse3", ds, mnt, "-t", "clairfs", "-o", options],
                 dict(os.environ, PATH=SYSTEM_PATH), "/usr/bin/clairfs")):
            run(cmd, timeout=60, env=env)
            check(mounted(mnt), f"{how} did not mount {mnt}")
            pids = daemons_of(mnt)
            check(list(pids.values()) == [want], f"{how}: the daemons on {mnt}: {pids}")
            check(any(m == mnt and kind == "fuse.clairfs" for m, kind, _ in fuse_mounts()),
                  f"{how}: the mount's type is not fuse.clairfs")
            read_back(mnt, data)
            run(["umount", mnt], timeout=30)
            wait_for(lambda: not any(alive(p) for p in pids), 20, f"{how}: the daemon to exit")
        times["fstab mounts"] = time.monotonic() - t

        # Remove: everything but the conffile goes; purge: the conffile and directories too.
        t = time.monotonic()
        run(["dpkg", "-r", PACKAGE], timeout=300, env=DPKG_ENV)
        check(package_status() == "deinstall ok config-files", f"after -r: {package_status()}")
        left = [p for p in files if p != CONFFILE and os.path.lexists(p)]
        check(not left, f"left after dpkg -r: {left[:5]}")
        check(os.path.exists(CONFFILE), "dpkg -r removed the conffile")
        run(["dpkg", "-P", PACKAGE], timeout=300, env=DPKG_ENV)
        times["remove and purge"] = time.monotonic() - t
        check(package_status() == "", f"after -P: {package_status()}")
        check(run(["dpkg", "-L", PACKAGE], ok=False).returncode != 0, "dpkg -L still lists it")
        left = [p for p in paths if os.path.lexists(p.rstrip("/"))
                and p.rstrip("/") not in dirs_before]
        check(not left, f"left after dpkg -P: {left[:5]}")
        check(not os.path.lexists(CONFFILE), "dpkg -P left the conffile")
        check(not os.path.lexists(PY_DIR + "/clairfs"), f"{PY_DIR}/clairfs left behind")
        status = 0
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        status = 1
    finally:
        # Also on an unexpected exception or a signal (which then goes on up).
        if not cleanup.run():
            print("FAIL: the cleanup did not finish", file=sys.stderr)
            status = 1
    if package_status() != "":
        print("FAIL: the package is still installed after the cleanup", file=sys.stderr)
        status = 1
    for what, seconds in times.items():
        print(f"{what}: {seconds:.1f} s")
    print(f"package: {'passed' if status == 0 else 'FAILED'} in "
          f"{time.monotonic() - started:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
