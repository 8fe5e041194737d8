"""The batch path's Python client (clairfs.batch) and datasets (clairfs.torch_batch) against a
real daemon: the bytes of every sample equal the file's, ranges, per-item errors, the buffer's
windows reused and grown, a new connection after fork(), a connection refused over
batch.max_clients, a 2-worker DataLoader through BatchImageFolder equal to torchvision's
ImageFolder over the original directory, a zero-copy decode, LocalitySampler, and the
fallback through the mount when the daemon runs with `batch.enabled: false`.

The tests that need the daemon's batch server are skipped (with that reason) when the daemon
built has none; the fallback tests run either way. The torch tests are skipped without
torch/torchvision.
"""
import errno
import gc
import os
import select
import threading
import sys
import time
import unittest
import warnings

import harness

import clairfs
from clairfs import batch as cbatch

try:
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms
    TORCH_MISSING = None
except ImportError as e:  # Debian: apt-get install python3-torch python3-torchvision
    TORCH_MISSING = f"torch/torchvision not importable: {e}"

warnings.filterwarnings("ignore", message="This DataLoader will create")
sys.path.insert(0, os.path.join(harness.REPO, "python", "examples"))

# name -> size: empty, tiny, around a 64-byte boundary, a typical sample, a few MiB.
SIZES = {"empty.bin": 0, "one.bin": 1, "a/b63.bin": 63, "a/b64.bin": 64, "a/b65.bin": 65,
         "a/c/typical.bin": 112640, "big.bin": 3 << 20}
for _i in range(40):
    SIZES[f"many/{_i:03d}.bin"] = 1000 + 997 * _i


def has_batch_path(mnt):
    return os.path.exists(os.path.join(mnt, ".clairfs", "batch"))


def wait_child(pid, read_fd, timeout=60.0):
    """The child's report (bytes it wrote to the pipe until it closed it) and exit status,
    waiting at most `timeout` seconds for it."""
    end = time.monotonic() + timeout
    data = b""
    while True:
        left = end - time.monotonic()
        if left <= 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child did not finish in time")
        ready, _, _ = select.select([read_fd], [], [], left)
        if ready:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            data += chunk
    _, status = os.waitpid(pid, 0)  # the pipe closed: the child is exiting
    return data, os.waitstatus_to_exitcode(status)


class BatchClientTest(harness.ClairfsCase):
    @classmethod
    def setUpClass(cls):
        cls.orig = cls.class_tmpdir("bat")
        cls.data = {}
        for i, (name, size) in enumerate(SIZES.items()):
            path = os.path.join(cls.orig, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            body = os.urandom(size)
            with open(path, "wb") as f:
                f.write(body)
            cls.data[name] = body
        os.mkdir(os.path.join(cls.orig, "adir"))
        os.symlink("one.bin", os.path.join(cls.orig, "link.bin"))

    def setUp(self):
        super().setUp()
        mnt = os.path.join(self.tmpdir("bm"), "mnt")
        os.mkdir(mnt)
        self.mount(self.orig, mnt)
        if not has_batch_path(mnt):
            self.skipTest("this daemon has no batch path (.clairfs/batch absent)")
        self.mnt = mnt

    def test_whole_files_relative_and_absolute(self):
        names = list(self.data)
        with cbatch.BatchClient(self.mnt) as client, \
                client.read(names + [os.path.join(self.mnt, n) for n in names]) as b:
            self.assertEqual(len(b), 2 * len(names))
            for i, name in enumerate(names + names):
                self.assertEqual(bytes(b[i]), self.data[name], name)
                self.assertEqual(b.file_sizes[i], len(self.data[name]))
                self.assertEqual(b.error(i), 0)
        # A read counts in the daemon's stats like a read through the mount.
        st = clairfs.stats(self.mnt)
        self.assertGreaterEqual(st["file_reads"], 2 * len(names) - 1)

    def test_prefetch_yields_every_batch_in_order_and_stops_when_left(self):
        names = list(self.data)
        batches = [names[i:] + names[:i] for i in range(len(names))]
        with cbatch.BatchClient(self.mnt) as client:
            got = []
            for b in cbatch.prefetch(client, batches, depth=2):
                with b:
                    got.append([bytes(b[i]) for i in range(len(b))])
            self.assertEqual(got, [[self.data[n] for n in batch] for batch in batches])
            # Left after the first batch: the thread stops and what it read ahead is closed.
            gen = cbatch.prefetch(client, batches * 20, depth=3)
            first = next(gen)
            first.close()
            gen.close()
            deadline = time.monotonic() + 10
            while any(t.name == "clairfs-prefetch" for t in threading.enumerate()):
                self.assertLess(time.monotonic(), deadline, "the prefetch thread did not end")
                time.sleep(0.01)
            # A failing read is raised where its batch would have come; nothing after it.
            seen = []
            with self.assertRaises(ValueError):
                for b in cbatch.prefetch(client, [names, ["/not/under/the/mount"], names]):
                    seen.append(len(b))
                    b.close()
            self.assertEqual(seen, [len(names)])

    def test_ranges(self):
        typical = self.data["a/c/typical.bin"]
        recs = [("a/c/typical.bin", 0, 10), ("a/c/typical.bin", 4096, 5000),
                ("a/c/typical.bin", 100000, None), ("a/c/typical.bin", 7, -1),
                ("big.bin", (3 << 20) - 5, 5), ("a/c/typical.bin", 1000, 0)]
        with cbatch.BatchClient(self.mnt) as client, client.read(recs) as b:
            self.assertEqual(bytes(b[0]), typical[:10])
            self.assertEqual(bytes(b[1]), typical[4096:9096])
            self.assertEqual(bytes(b[2]), typical[100000:])
            self.assertEqual(bytes(b[3]), typical[7:])
            self.assertEqual(bytes(b[4]), self.data["big.bin"][-5:])
            self.assertEqual(bytes(b[5]), b"")

    def test_per_item_errors_raise_as_open_would(self):
        with cbatch.BatchClient(self.mnt) as client:
            with client.read(["many/000.bin", "nope.bin", "adir", "link.bin", "a/../one.bin",
                              "many/001.bin"]) as b:
                self.assertEqual(bytes(b[0]), self.data["many/000.bin"])
                self.assertEqual(bytes(b[5]), self.data["many/001.bin"])
                with self.assertRaises(FileNotFoundError) as cm:
                    b[1]
                self.assertEqual(cm.exception.filename, "nope.bin")
                self.assertEqual(b.error(1), errno.ENOENT)
                self.assertEqual(b.error(2), errno.EINVAL)   # not a regular file
                self.assertEqual(b.error(3), errno.ELOOP)    # a symbolic link
                self.assertEqual(b.error(4), errno.EINVAL)   # '..'
                with self.assertRaises(OSError) as cm:
                    b[3]
                self.assertEqual(cm.exception.errno, errno.ELOOP)
            with self.assertRaises(ValueError):  # outside the mount: never sent
                client.read(["/etc/passwd"])
            # The connection is still good after errors.
            with client.read(["one.bin"]) as b:
                self.assertEqual(bytes(b[0]), self.data["one.bin"])

    def test_windows_reused_grown_and_released(self):
        names = [n for n in self.data if n.startswith("many/")]
        client = cbatch.BatchClient(self.mnt, window_bytes=64 << 10, windows=2)
        self.addCleanup(client.close)
        b1 = client.read(names)          # ~800 KiB: many 64 KiB windows, so the buffer grows
        self.assertGreater(client.hellos, 1)
        hellos = client.hellos
        b2 = client.read(["big.bin"])    # larger than a window: windows as large as the file
        self.assertGreater(client.hellos, hellos)
        self.assertGreaterEqual(client.window_bytes, 3 << 20)
        for i, n in enumerate(names):     # the first batch's memory is untouched by the later
            self.assertEqual(bytes(b1[i]), self.data[n], n)
        self.assertEqual(bytes(b2[0]), self.data["big.bin"])
        view = b1[0]
        b1.close()
        with self.assertRaises(ValueError):
            bytes(view)                   # the view was released with its Batch
        with self.assertRaises(ValueError):
            b1[0]
        # Windows given back (closed or collected) are reused: no new hello for many batches.
        del b2
        gc.collect()
        hellos = client.hellos
        for _ in range(20):
            with client.read(names[:4]) as b:
                self.assertEqual(bytes(b[3]), self.data[names[3]])
        self.assertEqual(client.hellos, hellos)

    def test_a_spilled_batch_gets_a_window_of_its_size_next(self):
        # A batch over several windows has its overflowing samples refused (ENOBUFS, counted
        # in the batch errors) and asked for again; the next batch gets windows that hold it
        # whole, so from then on no sample is refused and no new buffer is made.
        names = [n for n in self.data if n.startswith("many/")]
        client = cbatch.BatchClient(self.mnt, window_bytes=64 << 10, windows=2)
        self.addCleanup(client.close)
        errors = clairfs.stats(self.mnt)["batch"]["errors"]
        with client.read(names) as b:
            self.assertEqual(bytes(b[-1]), self.data[names[-1]])
        self.assertGreater(clairfs.stats(self.mnt)["batch"]["errors"], errors)
        with client.read(names):
            pass
        self.assertGreaterEqual(client.window_bytes, sum(len(self.data[n]) for n in names))
        errors, hellos = clairfs.stats(self.mnt)["batch"]["errors"], client.hellos
        for _ in range(3):
            with client.read(names) as b:
                for i, n in enumerate(names):
                    self.assertEqual(bytes(b[i]), self.data[n], n)
        self.assertEqual((clairfs.stats(self.mnt)["batch"]["errors"], client.hellos),
                         (errors, hellos))

    def test_threads_share_a_client(self):
        # One connection per process: threads take turns on it (a request at a time) and each
        # gets its own batch's bytes.
        import threading
        names = [n for n in self.data if n.startswith("many/")]
        client = cbatch.BatchClient(self.mnt)
        self.addCleanup(client.close)
        failures = []

        def reader(k):
            try:
                for r in range(10):
                    picked = names[(k + r) % 7::3]
                    with client.read(picked) as b:
                        for i, n in enumerate(picked):
                            if bytes(b[i]) != self.data[n]:
                                failures.append((k, r, n))
            except Exception as e:  # reported below
                failures.append((k, repr(e)))

        threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        self.assertFalse(any(t.is_alive() for t in threads), "a reader thread hung")
        self.assertEqual(failures, [])

    def test_fork_reconnects(self):
        names = [n for n in self.data if n.startswith("many/")]
        client = clairfs.client_for(self.mnt)
        with client.read(names) as b:
            self.assertEqual(bytes(b[7]), self.data[names[7]])
        parent_sock = client._sock
        connections = clairfs.stats(self.mnt)["batch"]["connections"]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: reads through the same client object, reports, exits
            code = 1
            try:
                os.close(r)
                c = clairfs.client_for(self.mnt)
                with c.read(names) as b:
                    ok = all(bytes(b[i]) == self.data[n] for i, n in enumerate(names))
                new = c._sock is not parent_sock and c._pid == os.getpid()
                os.write(w, b"ok" if ok and new else f"bad {ok} {new}".encode())
                code = 0
            except BaseException as e:  # report anything to the parent
                os.write(w, repr(e).encode()[:4000])
            finally:
                os._exit(code)
        os.close(w)
        try:
            report, status = wait_child(pid, r)
        finally:
            os.close(r)
        self.assertEqual((report, status), (b"ok", 0))
        # The child made a connection of its own; the parent's was not disturbed by it.
        self.assertEqual(clairfs.stats(self.mnt)["batch"]["connections"], connections + 1)
        self.assertIs(client._sock, parent_sock)
        with client.read(names[:5]) as b:
            self.assertEqual(bytes(b[4]), self.data[names[4]])


class BatchFallbackTest(harness.ClairfsCase):
    """With `batch.enabled: false` the control file is absent, the client says why, and the
    datasets read through the mount: same bytes, one logged reason."""

    def test_disabled_batch_path(self):
        orig = self.tmpdir("bf")
        bodies = {}
        for i in range(12):
            bodies[f"f{i}.bin"] = os.urandom(500 * i)
            with open(os.path.join(orig, f"f{i}.bin"), "wb") as f:
                f.write(bodies[f"f{i}.bin"])
        mnt = os.path.join(self.tmpdir("bfm"), "mnt")
        os.mkdir(mnt)
        cfg = harness.config()
        if self.daemon_knows_batch():
            cfg["batch"] = {"enabled": False}
        self.mount(orig, mnt, cfg=cfg)
        self.assertFalse(has_batch_path(mnt))
        with self.assertRaises(clairfs.BatchUnavailable) as cm:
            cbatch.BatchClient(mnt)
        self.assertIn(".clairfs/batch", cm.exception.reason)
        if TORCH_MISSING:
            return
        names = sorted(bodies)
        ds = clairfs.BatchFiles(names, root=mnt)
        with self.assertLogs("clairfs.batch", "WARNING") as logs:
            got = ds.__getitems__(range(len(ds)))
            got += [ds[3], ds[5]]
        self.assertEqual(len(logs.records), 1, logs.output)   # one reason, logged once
        self.assertEqual(got, [bodies[n] for n in names] + [bodies[names[3]], bodies[names[5]]])
        with self.assertRaises(FileNotFoundError):
            clairfs.BatchFiles(["gone.bin"], root=mnt)[0]
        # Ranges through the mount too.
        rec = clairfs.BatchFiles([("f9.bin", 100, 50), ("f9.bin", 4000, None)], root=mnt)
        self.assertEqual(rec.__getitems__([0, 1]), [bodies["f9.bin"][100:150], bodies["f9.bin"][4000:]])

    def test_refused_connection(self):
        # Over batch.max_clients the server accepts and closes at once with a kError (EBUSY):
        # the client says so as BatchUnavailable, and the first connection goes on.
        if not self.daemon_knows_batch():
            self.skipTest("this daemon has no batch path")
        orig = self.tmpdir("br")
        with open(os.path.join(orig, "a.bin"), "wb") as f:
            f.write(b"x" * 1000)
        mnt = os.path.join(self.tmpdir("brm"), "mnt")
        os.mkdir(mnt)
        cfg = harness.config()
        cfg["batch"] = {"max_clients": 1}
        self.mount(orig, mnt, cfg=cfg)
        with cbatch.BatchClient(mnt) as first:
            with self.assertRaises(clairfs.BatchUnavailable) as cm:
                cbatch.BatchClient(mnt, timeout=30)
            self.assertIn("refused", cm.exception.reason)
            with first.read(["a.bin"]) as b:
                self.assertEqual(bytes(b[0]), b"x" * 1000)
        self.assertEqual(clairfs.stats(mnt)["batch"]["refused_connections"], 1)

    @staticmethod
    def daemon_knows_batch():
        """Whether the daemon built has the batch path (its config then takes `batch:`)."""
        with open(harness.BIN, "rb") as f:  # the config key only a daemon with it parses
            return b"max_clients_per_user" in f.read()


@unittest.skipIf(TORCH_MISSING, TORCH_MISSING)
class BatchTorchTest(harness.ClairfsCase):
    @classmethod
    def setUpClass(cls):
        from make_images import make_images
        cls.orig = os.path.join(cls.class_tmpdir("bti"), "images")
        make_images(cls.orig, images=160, classes=4, seed=11)
        os.rename(os.path.join(cls.orig, "class3"), os.path.join(cls.orig, "#sharp"))
        with open(os.path.join(cls.orig, "class0", "notes.txt"), "w") as f:
            f.write("not an image: ImageFolder skips it\n")
        os.makedirs(os.path.join(cls.orig, "class1", "nested"))
        os.link(os.path.join(cls.orig, "class1", "00001.jpg"),
                os.path.join(cls.orig, "class1", "nested", "x.JPG"))

    def mount_images(self, cfg=None):
        mnt = os.path.join(self.tmpdir("btm"), "mnt")
        os.mkdir(mnt)
        self.mount(self.orig, mnt, cfg=cfg)
        return mnt

    def loader_batches(self, ds, workers, batch_size=16):
        loader = DataLoader(ds, batch_size=batch_size, num_workers=workers,
                            shuffle=True, generator=torch.Generator().manual_seed(3))
        return loader, list(loader)

    def test_dataloader_two_workers_equals_imagefolder(self):
        mnt = self.mount_images()
        if not has_batch_path(mnt):
            self.skipTest("this daemon has no batch path (.clairfs/batch absent)")
        tf = transforms.Compose([transforms.Resize((32, 32)), transforms.PILToTensor()])
        ref = datasets.ImageFolder(self.orig, transform=tf)
        ds = clairfs.BatchImageFolder(mnt, transform=tf)
        self.assertEqual((ds.classes, ds.class_to_idx), (ref.classes, ref.class_to_idx))
        self.assertEqual([(os.path.relpath(p, mnt), t) for p, t in ds.samples],
                         [(os.path.relpath(p, self.orig), t) for p, t in ref.samples])
        before = clairfs.stats(mnt)
        _, want = self.loader_batches(ref, 0)
        loader, got = self.loader_batches(ds, 2)
        self.assertEqual(len(got), len(want))
        for (gx, gy), (wx, wy) in zip(got, want):
            self.assertTrue(torch.equal(gx, wx))
            self.assertTrue(torch.equal(gy, wy))
        after = clairfs.stats(mnt)
        # One request per batch, from one connection per worker, every sample served by it.
        delta = {k: after["batch"][k] - before["batch"][k] for k in after["batch"]}
        self.assertEqual(delta["requests"], len(got), delta)
        self.assertEqual(delta["connections"], 2, delta)
        self.assertEqual(delta["samples"], len(ds), delta)
        self.assertGreaterEqual(after["file_reads"] - before["file_reads"], len(ds))
        # The package's planning takes the dataset like an ImageFolder.
        n = clairfs.register_loader(mnt, loader, 1)
        self.assertEqual(n, len(ds))
        self.assertEqual(clairfs.plan(mnt)["entries"], n)
        # A single item, and __getitem__ decodes to the same pixels as the reference.
        self.assertTrue(torch.equal(ds[5][0], ref[5][0]))

    def test_locality_sampler_and_errors(self):
        mnt = self.mount_images()
        ds = clairfs.BatchImageFolder(mnt, decode=bytes)
        sampler = clairfs.LocalitySampler(ds, num_replicas=2, rank=1, nodes=2, ranks_per_node=1,
                                          seed=1, batch_size=8, mount=mnt)
        self.assertEqual(clairfs.plan(mnt)["entries"], len(sampler))
        loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=2,
                            collate_fn=lambda items: items)
        seen = [p for b in loader for p in b]
        want = [(open(ds.samples[i][0], "rb").read(), ds.samples[i][1]) for i in sampler]
        self.assertEqual(seen, want)
        ds.samples.append((os.path.join(mnt, "class0", "gone.jpg"), 0))
        with self.assertRaises(FileNotFoundError):
            ds.__getitems__([0, len(ds) - 1])

    def test_zero_copy_decode_with_the_default_collate(self):
        # decode may return a tensor over the batch buffer: the default collate copies it
        # before the worker reads the next batch. Equal-sized records, so they stack.
        mnt = self.mount_images()
        if not has_batch_path(mnt):
            self.skipTest("this daemon has no batch path (.clairfs/batch absent)")
        ref = datasets.ImageFolder(self.orig)
        recs = [(os.path.join(mnt, os.path.relpath(p, self.orig)), 16, 200) for p, _ in ref.samples]
        ds = clairfs.BatchFiles(recs, decode=lambda v: torch.frombuffer(v, dtype=torch.uint8))
        got = torch.cat(list(DataLoader(ds, batch_size=16, num_workers=2)))
        want = []
        for p, _ in ref.samples:
            with open(p, "rb") as f:
                want.append(torch.frombuffer(bytearray(f.read()[16:216]), dtype=torch.uint8))
        self.assertTrue(torch.equal(got, torch.stack(want)))
        # The dataset holds a batch until its next one: then its views are released.
        views = clairfs.BatchFiles(recs, decode=lambda v: v)
        first = views.__getitems__([0, 1])
        self.assertEqual(bytes(first[1]), want[1].numpy().tobytes())
        views.__getitems__([2])
        with self.assertRaises(ValueError):
            bytes(first[1])

    def test_fallback_through_the_mount(self):
        cfg = harness.config()
        if BatchFallbackTest.daemon_knows_batch():
            cfg["batch"] = {"enabled": False}
        mnt = self.mount_images(cfg)
        self.assertFalse(has_batch_path(mnt))
        tf = transforms.Compose([transforms.Resize((32, 32)), transforms.PILToTensor()])
        ref = datasets.ImageFolder(self.orig, transform=tf)
        ds = clairfs.BatchImageFolder(mnt, transform=tf)
        with self.assertLogs("clairfs.batch", "WARNING") as logs:
            _, got = self.loader_batches(ds, 0)
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("batch", logs.output[0])
        _, want = self.loader_batches(ref, 0)
        for (gx, gy), (wx, wy) in zip(got, want):
            self.assertTrue(torch.equal(gx, wx))
            self.assertTrue(torch.equal(gy, wy))
