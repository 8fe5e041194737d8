"""Streams and the compact form on a real mount (issue 12): several processes registering
their own streams on one mount, the compact form against the text form, unregister.

"""
import io
import os
import struct
import subprocess
import sys
import unittest

import harness

import clairfs
from clairfs import compact

try:
    import torch  # noqa: F401
    TORCH_MISSING = None
except ImportError as e:
    TORCH_MISSING = f"torch not importable: {e}"

PYTHONPATH = os.path.join(harness.REPO, "python")
FILES = 101  # not divisible by 8: DistributedSampler pads

EPOCHS = 3

# One rank of a job: registers its DistributedSampler's order (EPOCHS epochs) under its default
# stream name, prints the name, then for each epoch waits for <go>-<epoch>, opens its files in
# that order checking every byte, and reports <go>-<epoch>-done-<rank>. Exits 3 on a wrong
# byte.
RANK_SCRIPT = r"""
import os, sys, time, torch, clairfs
from torch.utils.data import DataLoader, DistributedSampler
mnt, world, seed, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rank = int(os.environ["RANK"])
class Files(torch.utils.data.Dataset):
    def __init__(self):
        self.samples = [(os.path.join(mnt, f"d{i % 4}", f"f{i:03d}.bin"), i) for i in range(FILES)]
    def __len__(self):
        return len(self.samples)
    def __getitem__(self, i):
        path, k = self.samples[i]
        with open(path, "rb") as f:
            return int(f.read() == bytes([k % 251]) * (1000 + k))
ds = Files()
sampler = DistributedSampler(ds, num_replicas=world, rank=rank, seed=seed)
loader = DataLoader(ds, batch_size=4, sampler=sampler)
n = clairfs.register_loader(mnt, loader, EPOCHS, compact=None if world > 1 else True)
print(clairfs.default_stream_name(), n, flush=True)
for epoch in range(EPOCHS):
    deadline = time.monotonic() + 120
    while not os.path.exists(f"{go}-{epoch}") and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.set_epoch(epoch)
    for ok in loader:
        if not bool(ok.all()):
            sys.exit(3)
    open(f"{go}-{epoch}-done-{rank}", "w").close()
""".replace("FILES", str(FILES)).replace("EPOCHS", str(EPOCHS))


class StreamsTest(harness.ClairfsCase):
    def setUp(self):
        super().setUp()
        self.data = os.path.join(self.tmpdir("st"), "data")
        self.rel = [f"d{i % 4}/f{i:03d}.bin" for i in range(FILES)]
        for i, rel in enumerate(self.rel):
            os.makedirs(os.path.join(self.data, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(self.data, rel), "wb") as f:
                f.write(bytes([i % 251]) * (1000 + i))
        # per_open: each rank's stream must see each of its reads. In no-open mode two ranks
        # reading one file at once (DistributedSampler pads a shard with another's samples)
        # share its pages, and the second read may reach no daemon.
        self.mount(self.data, cfg=harness.config(open_mode="per_open"))
        if "streams" not in clairfs.plan(self.data):
            self.skipTest("this clairfs has no streams (its plan lists none)")

    def streams(self, what="plan"):
        if what == "plan":
            return {s["name"]: s for s in clairfs.plan(self.data)["streams"]}
        return {s["name"]: s for s in clairfs.stats(self.data)["prefetch"]["streams"]}

    def start_ranks(self, world, seed, go):
        procs = []
        for rank in range(world):
            env = dict(os.environ, PYTHONPATH=PYTHONPATH, RANK=str(rank), WORLD_SIZE=str(world))
            p = subprocess.Popen([sys.executable, "-W", "ignore", "-c", RANK_SCRIPT, self.data,
                                  str(world), str(seed), go], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            harness.register_proc(p)
            self.addCleanup(harness.release_proc, p)
            procs.append(p)
        names = []
        for p in procs:
            line = p.stdout.readline().split()
            self.assertEqual(len(line), 2, p.stderr.read() if p.poll() is not None else "no output")
            names.append((line[0], int(line[1])))
        return procs, names

    def go(self, go, epoch, world):
        """Starts epoch in every rank and waits until each one finished it."""
        open(f"{go}-{epoch}", "w").close()
        harness.wait_for(lambda: all(os.path.exists(f"{go}-{epoch}-done-{r}") for r in range(world)),
                         120, f"every rank to finish epoch {epoch}")

    @unittest.skipIf(TORCH_MISSING, TORCH_MISSING)
    def test_eight_ranks_register_eight_streams_on_one_mount(self):
        go = os.path.join(self.tmpdir("go"), "go")
        procs, names = self.start_ranks(8, 5, go)
        per_rank = EPOCHS * -(-FILES // 8)
        self.assertEqual(len({n for n, _ in names}), 8, names)
        for rank, (name, n) in enumerate(names):
            self.assertRegex(name, rf"^rank{rank}-p[0-9]+")
            self.assertEqual(n, per_rank)
        plan = clairfs.plan(self.data)
        streams = self.streams()
        self.assertEqual(set(streams), {n for n, _ in names})
        for name, _ in names:
            self.assertEqual((streams[name]["epochs"], streams[name]["entries"]),
                             (EPOCHS, per_rank))
        self.assertEqual(plan["entries"], 8 * per_rank)
        self.assertEqual(plan["files"], FILES)  # the union of the eight shards
        self.go(go, 0, 8)
        # The RAM tier fills ahead of the readers; from epoch 2 on it (or staging) serves.
        harness.wait_for(lambda: clairfs.stats(self.data)["ram_bytes"] >=
                         sum(1000 + i for i in range(FILES)), 30, "the RAM tier to fill")
        before = clairfs.stats(self.data)
        for epoch in range(1, EPOCHS):
            self.go(go, epoch, 8)
        for p in procs:
            self.assertEqual(p.wait(timeout=120), 0, p.stderr.read())  # 3: a wrong byte
        st = clairfs.stats(self.data)
        self.assertEqual(st["unplanned_file_reads"], 0)
        opens = st["file_reads"] - before["file_reads"]
        self.assertEqual(opens, 8 * (EPOCHS - 1) * -(-FILES // 8))
        fast = (st["served"]["ram"] - before["served"]["ram"] +
                st["served"]["staging"] - before["served"]["staging"])
        self.assertGreaterEqual(fast, 0.95 * opens, (st["served"], before["served"]))
        for name, s in self.streams("stats").items():
            self.assertEqual(s["position"], s["positions"], (name, s))
            self.assertEqual(s["epoch"], EPOCHS, (name, s))

    @unittest.skipIf(TORCH_MISSING, TORCH_MISSING)
    def test_two_jobs_with_different_seeds_and_unregister(self):
        go = os.path.join(self.tmpdir("go"), "go")
        for epoch in range(EPOCHS):
            open(f"{go}-{epoch}", "w").close()
        (_, [(a, na)]), (_, [(b, nb)]) = self.start_ranks(1, 1, go), self.start_ranks(1, 2, go)
        self.assertNotEqual(a, b)
        streams = self.streams()
        self.assertLessEqual({a, b}, set(streams))
        self.assertEqual((streams[a]["entries"], streams[b]["entries"]), (na, nb))
        # This process registers twice under its own name: the second replaces the first.
        mine = clairfs.default_stream_name()
        clairfs.register_paths(self.data, [self.rel, self.rel], stream=mine, compact=True)
        clairfs.register_paths(self.data, [self.rel[:10]], stream=mine, compact=True)
        streams = self.streams()
        self.assertEqual(streams[mine]["entries"], 10)
        self.assertEqual(len(streams), 3)
        clairfs.register_paths(self.data, [self.rel[:5]], stream=mine, compact=True, append=True)
        self.assertEqual((self.streams()[mine]["epochs"], self.streams()[mine]["entries"]), (2, 15))
        clairfs.unregister(self.data, a)
        streams = self.streams()
        self.assertEqual(set(streams), {b, mine})
        self.assertEqual(streams[b]["entries"], nb)
        self.assertEqual(clairfs.plan(self.data)["entries"], nb + 15)

    def test_compact_and_text_forms_register_the_same_plan(self):
        epochs = [self.rel, list(reversed(self.rel)), self.rel[::3]]
        clairfs.register_paths(self.data, epochs, stream="text")
        clairfs.register_paths(self.data, epochs, stream="compact", compact=True)
        s = self.streams()
        for key in ("epochs", "entries", "positions"):
            self.assertEqual(s["text"].get(key), s["compact"].get(key), key)
        ranges = [[(r, 0, 100), (r, 100, 50)] for r in self.rel[:3]]
        self.assertEqual(clairfs.register_records(self.data, ranges, stream="r", compact=True), 6)
        self.assertEqual(self.streams()["r"]["entries"], 6)

    def test_rejected_compact_manifests_change_nothing(self):
        clairfs.register_paths(self.data, [self.rel], stream="keep", compact=True)
        before = clairfs.plan(self.data)
        with self.assertRaises(clairfs.ManifestError) as cm:
            clairfs.register_paths(self.data, [["d0/f000.bin", "missing.bin"]], stream="keep",
                                   compact=True)
        self.assertIn("item 2", cm.exception.errors)
        # Cut off before its trailer: a writer killed mid-write.
        out = io.BytesIO()
        compact.write_compact(out, ["d0/f000.bin"], [[0, 0]], stream="keep")
        whole = out.getvalue()
        with self.assertRaises(OSError):
            self.write_manifest(self.data, whole[:-16])
        self.assertEqual(clairfs.plan(self.data), before)
        self.write_manifest(self.data, whole)
        self.assertEqual(self.streams()["keep"]["entries"], 2)
        self.assertEqual(struct.unpack_from("<Q", whole, len(whole) - 16)[0], 2)

    def test_unregister_the_default_stream(self):
        clairfs.register_paths(self.data, [self.rel[:4]])  # no name: the stream "default"
        clairfs.register_paths(self.data, [self.rel[:6]], stream="other")
        clairfs.unregister(self.data, "default")
        self.assertEqual(set(self.streams()), {"other"})
        clairfs.unregister(self.data, "no-such-stream")
        self.assertEqual(set(self.streams()), {"other"})
        self.assertEqual(clairfs.errors(self.data), "")


if __name__ == "__main__":
    unittest.main()
