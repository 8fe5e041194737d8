"""No-open mode (fuse.open_mode: none). The kernel opens dataset files itself and
keeps their pages; the daemon serves only the READs that miss the page cache, from the same
tiers, with the same checks. Control files keep their whole contract on their own connection."""
import errno
import os
import random
import subprocess

import harness
from harness import ClairfsCase, config
import treeutil as tu

NFILES = 120


def no_open(**kw):
    cfg = config(**kw)
    cfg["fuse"]["open_mode"] = "none"
    return cfg


def fully_cached(path):
    """Whether the page cache holds every byte of path (fincore, util-linux): a read of it then
    sends no READ in no-open mode. Asks nothing of the daemon but the file's attributes."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE",
                          path], capture_output=True, text=True, timeout=30, check=True).stdout
    res, size = (int(x) for x in out.split())
    return res >= size


class NoOpenTest(ClairfsCase):

    @classmethod
    def setUpClass(cls):
        rng = random.Random(11)
        cls.base = cls.class_tmpdir("noopen")
        cls.ds = os.path.join(cls.base, "ds")
        cls.files = {}
        for i in range(NFILES):
            rel = f"d{i % 4}/f{i:03d}.bin"
            cls.files[rel] = rng.randbytes(rng.randint(1, 300_000))
        for rel, data in cls.files.items():
            os.makedirs(os.path.dirname(os.path.join(cls.ds, rel)), exist_ok=True)
            tu.write_file(os.path.join(cls.ds, rel), data)
        cls.order = sorted(cls.files)
        random.Random(3).shuffle(cls.order)

    def mount_here(self, cfg):
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        self.mount(self.ds, mnt, cfg=cfg)
        return mnt

    def read(self, mnt, rel):
        with open(os.path.join(mnt, rel), "rb") as f:
            return f.read()

    def evict(self, mnt, rel):
        """Drops the file's pages from the page cache, so its next read reaches the daemon."""
        fd = os.open(os.path.join(mnt, rel), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def test_reads_are_right_and_cached_files_cost_no_round_trip(self):
        mnt = self.mount_here(no_open(ram="64MiB", staging="4MiB"))
        self.write_manifest(mnt, "#epoch\n" + "\n".join(self.order) + "\n#epoch\n" +
                            "\n".join(self.order) + "\n")
        for rel in self.order:
            self.assertTrue(self.read(mnt, rel) == self.files[rel], rel)
        first = self.stats(mnt)
        # The second epoch comes from the page cache: no read of a file reaches the daemon.
        # (With stats made ahead running, about one run in 30 saw the kernel ask again for a
        # few single 4 KiB pages in the middle of files it had read whole, with no
        # invalidation from clairfs: such pages are allowed, up to 1 % of the bytes.)
        for rel in self.order:
            self.assertTrue(self.read(mnt, rel) == self.files[rel], rel)
        second = self.stats(mnt)
        self.assertEqual(second["file_reads"], first["file_reads"], second)
        data = sum(len(d) for d in self.files.values())
        self.assertLessEqual(second["bytes_read"] - first["bytes_read"], data // 100, second)
        # The control files still answer on every read (their own connection).
        self.assertEqual(self.plan(mnt)["entries"], 2 * NFILES)
        self.assertIn("file_reads", self.control_read(mnt, "metrics"))
        # Writes of dataset files are refused as before.
        with self.assertRaises(OSError) as e:
            os.open(os.path.join(mnt, self.order[0]), os.O_WRONLY)
        self.assertEqual(e.exception.errno, errno.EROFS)

    def test_a_read_that_misses_the_page_cache_is_served_from_the_tiers(self):
        mnt = self.mount_here(no_open(ram="64MiB", staging="4MiB"))
        self.write_manifest(mnt, "\n".join(self.order) + "\n" + "\n".join(self.order) + "\n")
        harness.wait_for(lambda: sum(t["bytes"] for t in self.stats(mnt)["tiers"]) >=
                         sum(len(d) for d in self.files.values()), 30, "the RAM tier to fill")
        for rel in self.order:
            self.read(mnt, rel)
            self.evict(mnt, rel)
        before = self.stats(mnt)
        for rel in self.order:
            self.assertTrue(self.read(mnt, rel) == self.files[rel], rel)
        after = self.stats(mnt)
        self.assertEqual(after["file_reads"] - before["file_reads"], NFILES, after)
        self.assertEqual(after["backing_bytes"], before["backing_bytes"], after)
        self.assertEqual(after["prefetch"]["position"], 2 * NFILES, after)

    def test_a_changed_file_is_never_served_from_a_tier(self):
        # What the page cache holds is served until the kernel revalidates the name and the
        # attributes (entry_timeout, attr_timeout: short here) or a read misses it.
        cfg = no_open(ram="64MiB", staging="4MiB")
        cfg["fuse"].update({"entry_timeout": 0.2, "attr_timeout": 0.2})
        ds = os.path.join(self.tmpdir("changing"), "ds")  # its own: the file is changed
        rel, old = "c/x.bin", os.urandom(200_000)
        os.makedirs(os.path.join(ds, "c"))
        tu.write_file(os.path.join(ds, rel), old)
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        self.mount(ds, mnt, cfg=cfg)
        self.write_manifest(mnt, rel + "\n")
        self.assertTrue(self.read(mnt, rel) == old)
        path = os.path.join(ds, rel)
        new = b"changed " + old
        tu.write_file(path + ".tmp", new)
        os.rename(path + ".tmp", path)  # another inode: the old name's node goes stale

        def reads_new():
            # Until the kernel looks the name up again (entry_timeout), an open finds the old
            # node, whose next read that reaches the daemon fails with ESTALE (no OPEN to
            # retry the lookup on, as in per_open mode); never old bytes from a tier.
            try:
                return self.read(mnt, rel) == new
            except OSError as e:
                if e.errno != errno.ESTALE:
                    raise
                return False
        harness.wait_for(reads_new, 10, "the new version to be read")
        # An in-place change of the same inode: noticed at the next read that misses the cache.
        with open(path, "r+b") as f:
            f.write(b"CHANGED!")
        new2 = b"CHANGED!" + new[8:]
        self.evict(mnt, rel)

        def reads_new2():
            # A read within the grace of the change the watch reported may be refused
            # (ESTALE: fs/core/page_versions.h) rather than risk a mix; one that succeeds is the
            # new version, never old bytes from a tier.
            try:
                data = self.read(mnt, rel)
            except OSError as e:
                if e.errno != errno.ESTALE:
                    raise
                return False
            self.assertTrue(data == new2)
            return True
        harness.wait_for(reads_new2, 10, "the in-place change to be read")

    def test_the_window_moves_past_reads_the_page_cache_served(self):
        # No tier: every object is staged, in a window of a few files. In the second epoch
        # every other file comes from the page cache (no READ) and the rest miss it: the
        # window must give the cached ones up and stage the misses ahead of the reader. The
        # reader waits for the window to reach each miss before reading it (a window that
        # kept the cached files would never get there), so that what is measured is where
        # the window goes, not whether it outruns a reader that never pauses (it does not
        # always, under a sanitizer on a loaded machine).
        cfg = no_open(ram="1", staging="2MiB")
        cfg["cache"]["page_cache_lag"] = 4
        mnt = self.mount_here(cfg)
        self.write_manifest(mnt, "#epoch\n" + "\n".join(self.order) + "\n#epoch\n" +
                            "\n".join(self.order) + "\n")
        for rel in self.order:
            self.assertTrue(self.read(mnt, rel) == self.files[rel], rel)
        misses = self.order[::2]
        for rel in misses:
            self.evict(mnt, rel)
        before = self.stats(mnt)
        missed = set(misses)
        reclaimed = []  # cached files whose pages the kernel took back on its own (memory load)
        for i, rel in enumerate(self.order):
            if rel in missed:
                pos = NFILES + i  # one object per file, one stream
                harness.wait_for(
                    lambda: self.stats(mnt)["prefetch"]["streams"][0]["staging_cursor"] > pos,
                    10, f"the staging window to reach position {pos}")
            elif not fully_cached(os.path.join(mnt, rel)):
                reclaimed.append(rel)
            self.assertTrue(self.read(mnt, rel) == self.files[rel], rel)
        after = self.stats(mnt)
        # Every miss reaches the daemon from its start (a file read); a reclaimed file only if
        # the kernel took its first page back too (a later page alone is a READ past offset 0,
        # not a file read: the machine's proactive reclaim takes pages here and there).
        reads = after["file_reads"] - before["file_reads"]
        self.assertGreaterEqual(reads, len(misses), (reclaimed, after))
        self.assertLessEqual(reads, len(misses) + len(reclaimed), (reclaimed, after))
        staged = after["served"]["staging"] - before["served"]["staging"]
        self.assertGreaterEqual(staged, 0.8 * len(misses), after)
        # Everything more than page_cache_lag reads before the last miss (at 2 NFILES - 2) is
        # consumed or given up.
        self.assertGreaterEqual(after["prefetch"]["position"], 2 * NFILES - 2 - 4, after)

    def test_changes_on_this_node_are_seen_without_waiting_for_the_timeouts(self):
        # entry_timeout and attr_timeout stay at 3600 s: the backing watch drops what the
        # kernel cached of a changed name (fs/fresh/backing_watch.h), so the next open sees it.
        files = {"w/gone.bin": os.urandom(50_000), "w/replaced.bin": os.urandom(60_000),
                 "w/written.bin": os.urandom(70_000)}
        results = {}
        for watch in (True, False):
            ds = os.path.join(self.tmpdir(f"watch-{watch}"), "ds")
            for rel, data in files.items():
                os.makedirs(os.path.dirname(os.path.join(ds, rel)), exist_ok=True)
                tu.write_file(os.path.join(ds, rel), data)
            mnt = os.path.join(self.tmpdir("mnt"), "m")
            os.mkdir(mnt)
            cfg = no_open(ram="64MiB", staging="4MiB")
            cfg["fuse"]["watch_backing"] = watch
            self.mount(ds, mnt, cfg=cfg)
            self.write_manifest(mnt, "\n".join(sorted(files)) + "\n")
            for rel, data in files.items():
                self.assertTrue(self.read(mnt, rel) == data, rel)
            os.unlink(os.path.join(ds, "w/gone.bin"))
            new = os.urandom(61_000)
            tu.write_file(os.path.join(ds, "w/replaced.tmp"), new)
            os.rename(os.path.join(ds, "w/replaced.tmp"), os.path.join(ds, "w/replaced.bin"))
            with open(os.path.join(ds, "w/written.bin"), "r+b") as f:
                f.write(b"WRITTEN!")
            written = b"WRITTEN!" + files["w/written.bin"][8:]
            if not watch:
                # Without the watch the kernel keeps the name and the pages it has.
                results[watch] = os.path.exists(os.path.join(mnt, "w/gone.bin"))
                self.assertEqual(self.stats(mnt)["watch"]["directories"], 0)
                continue

            def current():
                try:
                    return (not os.path.exists(os.path.join(mnt, "w/gone.bin")) and
                            self.read(mnt, "w/replaced.bin") == new and
                            self.read(mnt, "w/written.bin") == written)
                except OSError as e:
                    if e.errno != errno.ESTALE:  # a read racing the watch (documented)
                        raise
                    return False
            harness.wait_for(current, 10, "the mount to show the changes")
            results[watch] = os.path.exists(os.path.join(mnt, "w/gone.bin"))
            w = self.stats(mnt)["watch"]
            self.assertEqual(w["directories"], 2, w)  # the root and w/
            self.assertGreaterEqual(w["invalidations"], 3, w)
            self.assertEqual((w["refused"], w["overflows"]), (0, 0), w)
            self.assertIn("clairfs_watch_invalidations_total",
                          self.control_read(mnt, "metrics"))
        self.assertEqual(results, {True: False, False: True})

    def test_versions_checked_ahead_spare_the_reads_a_stat_and_a_change_counts_at_once(self):
        # fuse.stat_ahead (cache/backing/stat_ahead.h): the files the plan reads next are statted in
        # batches ahead of the reads, so a read that misses the page cache waits for no stat of
        # its own. A file changed on this node after its stat was made is still read at its
        # new version by the very next read: the watch reports the change before the write
        # returns, and a stat made ahead is not used from then on.
        n = 40
        ds = os.path.join(self.tmpdir("ahead"), "ds")  # its own: a file is changed
        files = {rel: self.files[rel] for rel in self.order[:n]}
        for rel, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(ds, rel)), exist_ok=True)
            tu.write_file(os.path.join(ds, rel), data)
        order = self.order[:n]
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        self.mount(ds, mnt, cfg=no_open(ram="64MiB", staging="4MiB"))
        self.write_manifest(mnt, "".join("#epoch\n" + "\n".join(order) + "\n" for _ in range(3)))
        harness.wait_for(lambda: sum(t["bytes"] for t in self.stats(mnt)["tiers"]) >=
                         sum(len(d) for d in files.values()), 30, "the RAM tier to fill")
        for rel in order:  # epoch 1, then out of the page cache
            self.assertTrue(self.read(mnt, rel) == files[rel], rel)
            self.evict(mnt, rel)
        before = self.stats(mnt)
        for rel in order:  # epoch 2: every read reaches the daemon
            self.assertTrue(self.read(mnt, rel) == files[rel], rel)
            self.evict(mnt, rel)
        after = self.stats(mnt)
        used = after["stat_ahead"]["used"] - before["stat_ahead"]["used"]
        self.assertGreaterEqual(used, n // 2, after["stat_ahead"])
        self.assertLess(after["stat_ahead"]["batches"], n, after["stat_ahead"])
        self.assertEqual(after["backing_bytes"], before["backing_bytes"], after)
        # Epoch 3: the files ahead of the reader were statted; one of them changes in place
        # (same size, same inode) before it is read.
        half = n // 2
        for rel in order[:half]:
            self.assertTrue(self.read(mnt, rel) == files[rel], rel)
        changed = order[half + 2]
        with open(os.path.join(ds, changed), "r+b") as f:
            f.write(b"CHANGED!")
        files[changed] = b"CHANGED!" + files[changed][8:]
        for rel in order[half:]:
            self.assertTrue(self.read(mnt, rel) == files[rel], rel)
        self.assertIn("clairfs_stat_ahead_used_total", self.control_read(mnt, "metrics"))

    def test_planned_lookups_after_dentries_are_dropped_make_no_backing_call(self):
        # Memory pressure (here `drop_caches` 3) makes the kernel forget the dataset's names, so
        # each planned read costs a LOOKUP. The stats made ahead (and one of each directory)
        # answer it: no backing-store stat on the reader's path (metadata.reader_stats), and
        # changes the watch reports are still seen by the next lookup.
        if os.geteuid() != 0:
            self.skipTest("drop_caches needs root")
        n = 60
        ds = os.path.join(self.tmpdir("lookups"), "ds")  # its own: files are changed
        order = self.order[:n]
        files = {rel: self.files[rel] for rel in order}
        for rel, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(ds, rel)), exist_ok=True)
            tu.write_file(os.path.join(ds, rel), data)
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        cfg = no_open(ram="64MiB", staging="4MiB")
        cfg["fuse"]["stat_max_age"] = 5  # a test's pauses stay well inside it
        self.mount(ds, mnt, cfg=cfg)
        self.write_manifest(mnt, "".join("#epoch\n" + "\n".join(order) + "\n" for _ in range(3)))
        harness.wait_for(lambda: sum(t["bytes"] for t in self.stats(mnt)["tiers"]) >=
                         sum(len(d) for d in files.values()), 30, "the RAM tier to fill")
        for rel in order:  # epoch 1
            self.assertTrue(self.read(mnt, rel) == files[rel], rel)

        def drop_and_await_a_batch():
            subprocess.run(["sync"], check=True, timeout=60)
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            # A batch begun after the drop: the records are young (the idle refresh runs one
            # every stat_max_age; a read would wake one sooner).
            batches = self.stats(mnt)["stat_ahead"]["batches"]
            harness.wait_for(lambda: self.stats(mnt)["stat_ahead"]["batches"] > batches, 30,
                             "a batch of stats ahead after the drop")

        drop_and_await_a_batch()
        before = self.stats(mnt)
        for rel in order:  # epoch 2: every name looked up again
            self.assertTrue(self.read(mnt, rel) == files[rel], rel)
        after = self.stats(mnt)
        meta = {k: after["metadata"][k] - before["metadata"][k] for k in after["metadata"]}
        self.assertGreaterEqual(meta["lookups"], n, meta)  # the names were forgotten
        self.assertGreaterEqual(meta["lookups_ahead"], n, meta)
        self.assertLessEqual(meta["reader_stats"], n // 20, meta)  # ~0 per planned read
        self.assertGreaterEqual(after["read_requests"] - before["read_requests"], n, after)
        # Epoch 3: one file ahead made unreadable to others, one deleted, on this node (the
        # watch reports both); then the names are forgotten again and looked up.
        revoked, deleted = order[5], order[9]
        os.chmod(os.path.join(ds, revoked), 0o600)
        os.unlink(os.path.join(ds, deleted))
        drop_and_await_a_batch()
        for rel in order:
            path = os.path.join(mnt, rel)
            if rel == deleted:
                self.assertFalse(os.path.exists(path), rel)
                continue
            self.assertEqual(os.stat(path).st_mode & 0o7777,
                             0o600 if rel == revoked else os.stat(os.path.join(ds, rel)).st_mode
                             & 0o7777, rel)
            self.assertTrue(self.read(mnt, rel) == files[rel], rel)
        self.assertIn("clairfs_metadata_reader_stats_total", self.control_read(mnt, "metrics"))
