"""The SSD cache directory at start-up: a directory clairfs has to create is announced in the
log as a new, empty cache (so a mistyped path shows) and described in clairfs.json; a start
that fails before serving removes the directories it created, and never a cache that existed
before it."""
import json
import os
import stat
import subprocess
import time

import harness
from harness import ClairfsCase, config, write_config
from test_lifecycle import run_clairfs, small_dataset

NEW_CACHE = "a new and empty cache directory"


def ssd_config(cache_dir):
    cfg = config()
    cfg["cache"]["tiers"].append({"kind": "ssd", "capacity": "64MiB", "dir": cache_dir})
    return cfg


def read_log(daemon):
    with open(daemon.log_path, errors="replace") as f:
        return f.read()


def description(cache_dir):
    path = os.path.join(cache_dir, "clairfs.json")
    st = os.lstat(path)
    with open(path) as f:
        return json.load(f), stat.S_IMODE(st.st_mode)


class CacheDirTest(ClairfsCase):
    def setUp(self):
        super().setUp()
        self.base = self.tmpdir("cdir")
        self.ds = small_dataset(self.base, n=4)
        self.mnt = os.path.join(self.base, "mnt")
        os.mkdir(self.mnt)

    def test_a_new_directory_is_announced_and_described(self):
        cache = os.path.join(self.base, "caches", "typo", "c")
        started = int(time.time())
        d = self.mount(self.ds, self.mnt, cfg=ssd_config(cache), workdir=self.base)
        log = read_log(d)
        self.assertIn(f"created '{cache}', {NEW_CACHE}", log)
        self.assertIn("clairfs-ctl cache list", log)
        info, mode = description(cache)
        self.assertEqual(mode, 0o600)
        self.assertEqual(info["dataset"], os.path.realpath(self.ds))
        self.assertEqual(info["version"], harness_version())
        self.assertGreaterEqual(info["created"], started)
        self.assertGreaterEqual(info["last_used"], info["created"])
        d.stop()
        # Used again: no warning, the creation time kept, the last use moved on (or equal
        # within the same second).
        d = self.mount(self.ds, self.mnt, cfg=ssd_config(cache), workdir=self.base)
        self.assertNotIn(NEW_CACHE, read_log(d))
        again, _ = description(cache)
        self.assertEqual(again["created"], info["created"])
        self.assertGreaterEqual(again["last_used"], info["last_used"])
        d.stop()

    def test_a_failed_start_removes_what_it_created(self):
        caches = os.path.join(self.base, "caches")
        cache = os.path.join(caches, "x", "c")
        cfg = write_config(os.path.join(self.base, "ssd.yaml"), ssd_config(cache))
        # Fails after the SSD tier took (and made) its directory: libfuse refuses the option.
        for foreground in (True, False):
            with self.subTest(foreground=foreground):
                rc, err, _ = run_clairfs(self, self.base,
                                         ["-c", cfg, "-o", "no_such_fuse_option", self.ds,
                                          self.mnt], self.mnt, foreground)
                self.assertEqual(rc, 64, err)
                self.assertIn("invalid FUSE options", err)
                if foreground:  # a daemon logs to syslog
                    self.assertIn(NEW_CACHE, err)  # it was made, then taken back
                self.assertFalse(os.path.exists(caches), os.listdir(self.base))
                self.assertFalse(harness.is_fuse_mounted(self.mnt))

    def test_a_failed_start_keeps_an_existing_cache(self):
        cache = os.path.join(self.base, "cache")
        d = self.mount(self.ds, self.mnt, cfg=ssd_config(cache), workdir=self.base)
        d.stop()
        before = sorted(os.listdir(cache))
        self.assertIn("CURRENT", before)
        cfg = write_config(os.path.join(self.base, "ssd.yaml"), ssd_config(cache))
        rc, err, _ = run_clairfs(self, self.base,
                                 ["-c", cfg, "-o", "no_such_fuse_option", self.ds, self.mnt],
                                 self.mnt, True)
        self.assertEqual(rc, 64, err)
        self.assertNotIn(NEW_CACHE, err)
        self.assertTrue(os.path.isdir(cache))
        self.assertIn("CURRENT", os.listdir(cache))
        self.assertIn("clairfs.json", os.listdir(cache))
        # An existing parent of a made directory stays too.
        inner = os.path.join(self.base, "parent-exists", "c")
        os.mkdir(os.path.dirname(inner), 0o700)
        cfg = write_config(os.path.join(self.base, "inner.yaml"), ssd_config(inner))
        rc, err, _ = run_clairfs(self, self.base,
                                 ["-c", cfg, "-o", "no_such_fuse_option", self.ds, self.mnt],
                                 self.mnt, True)
        self.assertEqual(rc, 64, err)
        self.assertEqual(os.listdir(os.path.dirname(inner)), [])


def harness_version():
    """The version the binary under test reports (clairfs --version)."""
    out = subprocess.run([harness.BIN, "--version"], capture_output=True, text=True,
                         timeout=10).stdout
    return out.split()[-1]
