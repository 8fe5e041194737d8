"""clairfs-ctl cache list|verify|clean on a real SSD cache made by a mount: list shows the
dataset, the owner and the daemon holding it, then idle; verify refuses a cache in use, finds
a damaged object and repairs it; clean refuses a cache in use, a non-cache and a link, removes
nothing with --dry-run, and removes and reports otherwise; the selections (--dataset,
--unused-for) on hand-made caches."""
import fcntl
import json
import os
import pwd
import random
import re
import subprocess
import sys
import time

import harness

REPO = harness.REPO
PKG = os.path.join(REPO, "python")
CACHE_BIN = os.path.join(os.path.dirname(harness.BIN), "clairfs-cache")
NFILES = 40
FILE_SIZE = 1 << 20  # 40 MiB in all: more than a RocksDB memtable, so blob files are written


def ctl(*args, env=None):
    """Runs clairfs-ctl; returns (exit status, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=PKG, CLAIRFS_CACHE_BIN=CACHE_BIN) if env is None else env
    r = subprocess.run([sys.executable, "-m", "clairfs"] + list(args), capture_output=True,
                       env=env, timeout=120)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def ssd_config(cache_dir):
    cfg = harness.config(ram="2MiB")
    cfg["cache"]["tiers"].append({"kind": "ssd", "capacity": "128MiB", "threads": 2,
                                  "dir": cache_dir})
    return cfg


def fake_cache(path, dataset, last_used):
    """A cache directory as the daemon leaves one, without a database (enough for clean)."""
    os.makedirs(path, mode=0o700)
    with open(os.path.join(path, "clairfs.lock"), "w") as f:
        f.write("1\n")
    with open(os.path.join(path, "clairfs.json"), "w") as f:
        json.dump({"format": 1, "dataset": dataset, "version": "0.1.0",
                   "created": int(last_used), "last_used": int(last_used)}, f)
    with open(os.path.join(path, "000001.blob"), "wb") as f:
        f.write(b"x" * 10000)


class CacheOfAMountTest(harness.ClairfsCase):
    def setUp(self):
        super().setUp()
        if not os.access(CACHE_BIN, os.X_OK):
            self.skipTest(f"{CACHE_BIN} not built")
        self.base = self.tmpdir("cadm")
        self.ds = os.path.join(self.base, "ds")
        rng = random.Random(7)
        self.files = {}
        for i in range(NFILES):
            rel = f"c{i % 4}/f{i:03d}.bin"
            self.files[rel] = rng.randbytes(FILE_SIZE)
            os.makedirs(os.path.join(self.ds, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(self.ds, rel), "wb") as f:
                f.write(self.files[rel])
        self.mnt = os.path.join(self.base, "mnt")
        os.mkdir(self.mnt)
        self.root = os.path.join(self.base, "caches")
        self.cache = os.path.join(self.root, "c")

    def fill(self):
        """Mounts with the SSD tier in self.cache and waits until it holds 30 MiB."""
        d = self.mount(self.ds, self.mnt, cfg=ssd_config(self.cache), workdir=self.base)
        with open(os.path.join(self.mnt, ".clairfs", "manifest"), "w") as f:
            f.write("\n".join(sorted(self.files)) + "\n")

        def ssd_bytes():
            return next(t["bytes"] for t in self.stats(self.mnt)["tiers"] if t["name"] == "ssd")
        harness.wait_for(lambda: ssd_bytes() >= 30 * FILE_SIZE, 60, "the SSD tier to fill")
        return d

    def listed(self):
        rc, out, err = ctl("cache", "list", "--json", self.root)
        self.assertEqual(rc, 0, err)
        mine = [c for c in json.loads(out) if c["path"] == self.cache]
        self.assertEqual(len(mine), 1, out)
        return mine[0]

    def corrupt_one(self):
        """Flips a byte in the middle of a file's bytes inside a blob file; returns the file."""
        blobs = [os.path.join(self.cache, n) for n in os.listdir(self.cache)
                 if n.endswith(".blob")]
        self.assertTrue(blobs, os.listdir(self.cache))
        for blob in blobs:
            with open(blob, "r+b") as f:
                data = f.read()
                for rel, content in sorted(self.files.items()):
                    at = data.find(content[:64])
                    if at >= 0:
                        f.seek(at + FILE_SIZE // 2)
                        f.write(bytes([data[at + FILE_SIZE // 2] ^ 0x5A]))
                        return rel
        self.fail("no file's bytes found in the blob files")

    def test_list_verify_clean_of_a_real_cache(self):
        started = int(time.time())
        d = self.fill()
        pid = d.proc.pid
        # While mounted: listed with its dataset, owner and holder; verify and clean refuse.
        c = self.listed()
        self.assertEqual(c["dataset"], os.path.realpath(self.ds))
        self.assertEqual(c["owner"], pwd.getpwuid(os.geteuid()).pw_name)
        self.assertEqual((c["state"], c["pid"]), ("in use", pid))
        rc, out, err = ctl("cache", "list", self.root)
        self.assertIn(f"in use by pid {pid}", out)
        rc, out, err = ctl("cache", "verify", self.cache)
        self.assertEqual(rc, 75, out + err)
        self.assertIn(f"in use by pid {pid}; unmount it first", err)
        for argv in ([self.cache], ["--all", "--root", self.root]):
            rc, out, err = ctl("cache", "clean", *argv)
            self.assertEqual(rc, 1, out + err)
            self.assertIn(f"in use by pid {pid}; unmount it first", err)
            self.assertTrue(os.path.isdir(self.cache))
        self.assertTrue(harness.is_fuse_mounted(self.mnt), "the daemon was disturbed")
        d.stop()

        # Idle: the last use recorded at the clean stop.
        c = self.listed()
        self.assertEqual((c["state"], c["pid"]), ("idle", None))
        self.assertGreaterEqual(c["last_used"], started)
        self.assertGreater(c["size"], 30 * FILE_SIZE)
        rc, out, err = ctl("cache", "verify", "--json", self.cache)
        self.assertEqual(rc, 0, out + err)
        report = json.loads(out)
        self.assertTrue(report["clean"])
        self.assertGreaterEqual(report["objects"], 30)
        self.assertEqual(report["bytes"], report["objects"] * FILE_SIZE)
        objects = report["objects"]

        # One damaged object: found (twice: a check changes nothing), then repaired.
        bad = self.corrupt_one()
        for _ in range(2):
            rc, out, err = ctl("cache", "verify", self.cache)
            self.assertEqual(rc, 1, out + err)
            # RocksDB's blob CRC or the record's xxh3 notices it, whichever reads it first.
            self.assertIn(f"bad: {bad}: ", out)
            self.assertIn(f"{objects} objects", out)
        rc, out, err = ctl("cache", "verify", "--json", "--repair", self.cache)
        self.assertEqual(rc, 1, out + err)
        report = json.loads(out)
        self.assertEqual([b["object"] for b in report["bad"]], [bad])
        self.assertEqual(report["deleted"], 1)
        # Found next to clairfs on PATH, without the override.
        env = dict(os.environ, PYTHONPATH=PKG,
                   PATH=os.path.dirname(harness.BIN) + ":" + os.environ.get("PATH", ""))
        env.pop("CLAIRFS_CACHE_BIN", None)
        rc, out, err = ctl("cache", "verify", "--json", self.cache, env=env)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(json.loads(out)["objects"], objects - 1)

        # Clean: --dry-run removes nothing; then removed, reported, nothing left in the root.
        before = sorted(os.listdir(self.cache))
        rc, out, err = ctl("cache", "clean", "--dry-run", self.cache)
        self.assertEqual(rc, 0, err)
        self.assertIn(f"would remove {self.cache} (dataset {os.path.realpath(self.ds)}", out)
        self.assertEqual(sorted(os.listdir(self.cache)), before)
        rc, out, err = ctl("cache", "clean", self.cache)
        self.assertEqual(rc, 0, err)
        self.assertIn(f"removed {self.cache}", out)
        freed = int(re.search(r"^freed .* \((\d+) bytes\) in 1 cache", out, re.M).group(1))
        self.assertGreater(freed, 30 * FILE_SIZE)
        self.assertEqual(os.listdir(self.root), [])


class CleanSelectionTest(harness.ClairfsCase):
    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.tmpdir("csel"), "caches")
        now = time.time()
        self.old = os.path.join(self.root, "old")
        self.new = os.path.join(self.root, "new")
        fake_cache(self.old, "/data/a", now - 3 * 86400)
        fake_cache(self.new, "/data/b", now)

    def test_refuses_what_is_not_a_cache_or_a_link(self):
        plain = os.path.join(os.path.dirname(self.root), "plain")
        os.mkdir(plain)
        with open(os.path.join(plain, "precious"), "w") as f:
            f.write("keep")
        link = os.path.join(os.path.dirname(self.root), "link")
        os.symlink(self.old, link)
        for target, why in ((plain, "not a clairfs cache"), (link, "a symbolic link")):
            rc, out, err = ctl("cache", "clean", target)
            self.assertEqual(rc, 1, out + err)
            self.assertIn(f"refusing {target}: {why}", err)
        self.assertEqual(os.listdir(plain), ["precious"])
        self.assertTrue(os.path.isfile(os.path.join(self.old, "clairfs.json")))
        rc, out, err = ctl("cache", "clean")
        self.assertEqual(rc, 2, out + err)

    def test_refuses_a_cache_whose_lock_is_held(self):
        lock = os.path.join(self.new, "clairfs.lock")
        with open(lock, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            f.write(f"{os.getpid():<20}\n")
            f.flush()
            rc, out, err = ctl("cache", "clean", "--all", "--root", self.root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn(f"refusing {self.new}: in use by pid {os.getpid()}", err)
        self.assertIn(f"removed {self.old}", out)
        self.assertEqual(os.listdir(self.root), ["new"])

    def test_by_dataset_and_by_age(self):
        rc, out, err = ctl("cache", "clean", "--dataset", "/data/b", "--root", self.root,
                           "--dry-run")
        self.assertEqual(rc, 0, err)
        self.assertIn(f"would remove {self.new}", out)
        self.assertNotIn(self.old, out)
        self.assertEqual(sorted(os.listdir(self.root)), ["new", "old"])
        rc, out, err = ctl("cache", "clean", "--unused-for", "1", "--root", self.root)
        self.assertEqual(rc, 0, err)
        self.assertIn(f"removed {self.old} (dataset /data/a", out)
        self.assertIn("in 1 cache(s)", out)
        self.assertEqual(os.listdir(self.root), ["new"])
        rc, out, err = ctl("cache", "list", "--json", self.root)
        self.assertEqual(rc, 0, err)
        self.assertEqual([c["path"] for c in json.loads(out) if c["path"].startswith(self.root)],
                         [self.new])
