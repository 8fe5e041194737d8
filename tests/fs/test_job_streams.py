"""Streams on a real mount: two jobs with different shuffles on one mount at once,
on the same files and on two different parts of the dataset; a stream whose writer died
leaves after cache.stream_idle while the others go on."""
import errno
import os
import random
import threading

from harness import ClairfsCase, config, wait_for
import treeutil as tu

FILES = 120
SIZE = 24_000


def rel(i):
    return f"d{i % 6}/f{i:03d}.bin"


def content(i):
    return bytes([(i * 7 + k) % 251 for k in range(251)]) * (SIZE // 251) + bytes(SIZE % 251)


class StreamsCase(ClairfsCase):
    @classmethod
    def setUpClass(cls):
        cls.base = cls.class_tmpdir("streams")
        cls.ds = os.path.join(cls.base, "ds")
        for i in range(FILES):
            path = os.path.join(cls.ds, rel(i))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tu.write_file(path, content(i))

    def register(self, mnt, name, epochs, append=False):
        text = f"#stream {name}\n" + "".join(
            "#epoch\n" + "".join(rel(i) + "\n" for i in e) for e in epochs)
        self.write_manifest(mnt, text, append=append)

    def read_epoch(self, mnt, order, bad):
        for i in order:
            with open(os.path.join(mnt, rel(i)), "rb") as f:
                if f.read() != content(i):
                    bad.append(i)

    def streams(self, mnt, what):
        doc = self.plan(mnt) if what == "plan" else self.stats(mnt)["prefetch"]
        return {s["name"]: s for s in doc["streams"]}

    def two_jobs(self, files_a, files_b):
        """Jobs a and b, 3 epochs each of their own seeded shuffle, read concurrently; checks
        what the issue asks of a shared cache."""
        # per_open: each job's stream must see each of its own reads, also of a file the other
        # job just read (in none mode the page cache answers it, unseen).
        d = self.mount(self.ds, self.tmpdir("mnt"),
                       cfg=config(ram="64MiB", staging="2MiB", open_mode="per_open"))
        mnt = d.mountpoint
        orders = {}
        for name, files, seed in (("job-a", files_a, 1), ("job-b", files_b, 2)):
            rng = random.Random(seed)
            epochs = []
            for _ in range(3):
                e = list(files)
                rng.shuffle(e)
                epochs.append(e)
            orders[name] = epochs
            self.register(mnt, name, epochs)
        plan = self.plan(mnt)
        self.assertEqual(set(self.streams(mnt, "plan")), {"job-a", "job-b"})
        union = set(files_a) | set(files_b)
        self.assertEqual(plan["files"], len(union))
        self.assertEqual(plan["entries"], 3 * (len(files_a) + len(files_b)))
        # Both jobs read at once, epoch by epoch; after epoch 1 nothing may come from the
        # backing store (the RAM tier holds the union).
        bad = []
        for epoch in range(3):
            threads = [threading.Thread(target=self.read_epoch, args=(mnt, orders[n][epoch], bad))
                       for n in orders]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
                self.assertFalse(t.is_alive())
            if epoch == 0:
                # The tier fill runs ahead of the readers; wait until it holds the union.
                wait_for(lambda: self.stats(mnt)["ram_bytes"] >= len(union) * SIZE, 30,
                         "the RAM tier to hold both jobs' files")
                after_first = self.stats(mnt)["served"]["backing"]
        self.assertEqual(bad, [])
        st = self.stats(mnt)
        self.assertEqual(st["served"]["backing"], after_first, st["served"])
        self.assertEqual(st["unplanned_file_reads"], 0)
        # Each file was read from the backing store about once, whichever job read it first.
        self.assertLessEqual(st["backing_bytes"], 1.05 * len(union) * SIZE, st)
        for name, s in self.streams(mnt, "stats").items():
            self.assertEqual(s["position"], s["positions"], (name, s))
            self.assertEqual(s["epoch"], 3, (name, s))

    def test_two_jobs_on_the_same_files(self):
        self.two_jobs(range(FILES), range(FILES))

    def test_two_jobs_on_different_parts(self):
        self.two_jobs(range(0, FILES // 2), range(FILES // 2, FILES))

    def test_the_number_of_streams_is_capped(self):
        """cache.max_streams: one stream more fails close() with the reason, keeps the plan;
        replacing or appending to a stream the plan has, and removing one, still work."""
        cfg = config(ram="64MiB", staging="2MiB")
        cfg["cache"]["max_streams"] = 2
        d = self.mount(self.ds, self.tmpdir("mnt"), cfg=cfg)
        mnt = d.mountpoint
        self.register(mnt, "a", [range(0, 10)])
        self.register(mnt, "b", [range(10, 20)])
        for append in (False, True):
            with self.assertRaises(OSError) as cm:
                self.register(mnt, "c", [range(20, 30)], append=append)
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            with open(os.path.join(mnt, ".clairfs", "errors")) as f:
                report = f.read()
            self.assertIn("stream 'c'", report)
            self.assertIn("cache.max_streams", report)
            self.assertEqual(set(self.streams(mnt, "plan")), {"a", "b"})
        self.register(mnt, "a", [range(30, 40)])  # a replacement fits
        self.register(mnt, "b", [range(40, 45)], append=True)
        self.assertEqual(self.streams(mnt, "plan")["b"]["entries"], 15)
        self.write_manifest(mnt, "#stream b\n")  # removes b
        self.register(mnt, "c", [range(20, 30)])
        self.assertEqual(set(self.streams(mnt, "plan")), {"a", "c"})
        self.assertEqual(self.plan(mnt)["files"], 20)

    def test_a_dead_writers_stream_leaves_after_the_idle_time(self):
        # per_open: the live job re-reads 20 files, which in none mode the page cache answers
        # (no read reaches the daemon, so the live stream would look idle too).
        cfg = config(ram="64MiB", staging="2MiB", open_mode="per_open")
        cfg["cache"]["stream_idle"] = 1
        d = self.mount(self.ds, self.tmpdir("mnt"), cfg=cfg)
        mnt = d.mountpoint
        # The dead job registered files 100..119 and never read; the live one reads 0..19.
        self.register(mnt, "dead", [range(100, FILES)])
        live = [list(range(20))] * 500
        self.register(mnt, "live", live)
        self.assertEqual(set(self.streams(mnt, "plan")), {"dead", "live"})
        bad = []
        epoch = 0

        def dead_gone():
            nonlocal epoch
            self.read_epoch(mnt, live[epoch], bad)
            epoch += 1
            return "dead" not in self.streams(mnt, "plan")

        wait_for(dead_gone, 30, "the idle stream to leave")
        self.assertEqual(bad, [])
        streams = self.streams(mnt, "stats")
        self.assertEqual(set(streams), {"live"})
        self.assertEqual(streams["live"]["position"], 20 * epoch)  # untouched by the removal
        self.assertEqual(self.plan(mnt)["files"], 20)
        with open(d.log_path) as f:
            self.assertIn("stream 'dead' removed", f.read())
