"""Predicted epochs (clairfs/predict.py, clairfs/ctl/predict.py): the model on loads worked out
by hand, the capacity search, the argument parsers; then `clairfs-ctl plan --predict` on a real
mount against the daemon's own plan (per_epoch adds up to predicted_backing_bytes, epoch 1 reads
the tiers' objects from the backing store, epoch 2 from the tiers)."""
import dataclasses
import json
import os
import tempfile
import unittest

import harness
from test_cli import ctl

import clairfs
from clairfs.ctl import predict as ctl_predict
from clairfs.predict import (Compute, EpochLoad, Rates, Source, capacity_for_no_stall,
                             fill_order_end, loads, page_cache_share, predict, samples_per_epoch,
                             with_extra_capacity)

MB = 1e6
MIB = 1 << 20


def _load(samples, backing, fills=0.0, ram=0.0, peers=0.0, reads_per_mb=10.0):
    return EpochLoad(samples=samples, bytes=backing + ram + peers,
                     tiers={"ram": Source(ram * reads_per_mb / MB, ram)},
                     backing=Source(backing * reads_per_mb / MB, backing),
                     fills=Source(fills * reads_per_mb / MB, fills),
                     peers=Source(peers * reads_per_mb / MB, peers))


class ModelTest(unittest.TestCase):
    def test_epoch_is_the_slower_of_compute_and_the_slowest_source(self):
        rates = Rates(backing_bw=25 * MB, tier_bw={"ram": 1000 * MB})
        compute = Compute(samples_per_s=1000)
        cold = _load(2000, backing=100 * MB, fills=100 * MB)  # 4 s of I/O, 2 s of compute
        warm = _load(2000, backing=0, ram=100 * MB)  # 0.1 s of I/O
        p1, p2 = predict([cold, warm], rates, compute)
        self.assertAlmostEqual(p1.time, 4.0)
        self.assertAlmostEqual(p1.stall, 2.0)
        self.assertEqual(p1.bound, "backing")
        self.assertAlmostEqual(p2.time, 2.0)
        self.assertEqual(p2.stall, 0.0)
        self.assertEqual(p2.bound, "compute")
        self.assertAlmostEqual(p2.seconds_by_source["ram"], 0.1)
        self.assertEqual(p1.bytes_by_source["backing"], 100 * MB)

    def test_fills_of_later_epochs_run_ahead(self):
        rates, compute = Rates(backing_bw=10 * MB), Compute(samples_per_s=1000)
        # Epoch 1 reads from peers: it waits for the fills of epoch 2 as well (the peers fetch
        # in their own order); epoch 2 then finds its fills done.
        e1 = _load(1000, backing=40 * MB, fills=40 * MB, peers=10 * MB)
        e2 = _load(1000, backing=20 * MB, fills=20 * MB, ram=30 * MB)
        p1, p2 = predict([e1, e2], rates, compute)
        self.assertAlmostEqual(p1.time, 6.0)
        self.assertAlmostEqual(p1.seconds_by_source["backing"], 6.0)
        self.assertAlmostEqual(p2.time, 1.0)
        self.assertEqual(p2.bound, "compute")
        # No peers: later fills take as much of the store as the staged reads do (2 s of the
        # 3 s), the rest is epoch 2's.
        e1 = _load(500, backing=60 * MB, fills=40 * MB)
        e2 = _load(500, backing=30 * MB, fills=30 * MB)
        p1, p2 = predict([e1, e2], rates, compute)
        self.assertAlmostEqual(p1.time, 8.0)
        self.assertAlmostEqual(p2.time, 1.0)
        self.assertAlmostEqual(p2.stall, 0.5)
        self.assertEqual(p2.bound, "backing")
        # The staged reads of an epoch start with it: a store idle during a compute-bound epoch
        # does not read the next epoch's ahead.
        e = _load(2000, backing=10 * MB)  # 1 s of reads, 2 s of compute
        self.assertEqual([p.time for p in predict([e, e, e], rates, compute)], [2.0, 2.0, 2.0])

    def test_iops_bind_small_objects(self):
        # 10,000 reads of 10 KB: 4 s at 25 MB/s, 25 s at 400 IOPS.
        load = EpochLoad(samples=10000, bytes=100 * MB, tiers={},
                         backing=Source(10000, 100 * MB), fills=Source())
        slow = predict([load], Rates(backing_bw=25 * MB, backing_iops=400),
                       Compute(samples_per_s=1e6))[0]
        self.assertAlmostEqual(slow.time, 25.0)
        fast = predict([load], Rates(backing_bw=25 * MB), Compute(samples_per_s=1e6))[0]
        self.assertAlmostEqual(fast.time, 4.0)

    def test_compute_in_bytes_per_second(self):
        p = predict([_load(1, backing=0, ram=50 * MB)], Rates(backing_bw=1),
                    Compute(bytes_per_s=10 * MB))[0]
        self.assertAlmostEqual(p.compute, 5.0)
        with self.assertRaises(ValueError):
            predict([_load(1, backing=0)], Rates(backing_bw=1), Compute())

    def test_loads_from_plan_json_and_warm_tiers(self):
        plan = {"epochs": 2, "streams": [{"epochs": 2, "entries": 10}, {"epochs": 1, "entries": 4}],
                "tiers": [{"name": "ram", "bytes": 600}, {"name": "ssd", "bytes": 200}],
                "per_epoch": [
                    {"bytes": 1000, "reads": 10, "backing": {"reads": 10, "bytes": 1000},
                     "fills": {"reads": 8, "bytes": 800},
                     "tiers": [{"name": "ram", "reads": 0, "bytes": 0},
                               {"name": "ssd", "reads": 0, "bytes": 0}],
                     "from_peers": {"reads": 0, "bytes": 0}},
                    {"bytes": 1000, "reads": 10, "backing": {"reads": 2, "bytes": 200},
                     "fills": {"reads": 0, "bytes": 0},
                     "tiers": [{"name": "ram", "reads": 6, "bytes": 600},
                               {"name": "ssd", "reads": 2, "bytes": 200}],
                     "from_peers": {"reads": 0, "bytes": 0}}]}
        self.assertEqual(samples_per_epoch(plan), [9.0, 5.0])
        cold = loads(plan)
        self.assertEqual(cold[0].backing, Source(10, 1000))
        self.assertEqual(cold[1].tiers["ssd"], Source(2, 200))
        # Tiers holding half their share: half the fills come from them, by their shares.
        warm = loads(plan, held=0.5)
        self.assertEqual(warm[0].backing, Source(6, 600))
        self.assertEqual(warm[0].fills, Source(4, 400))
        self.assertEqual(warm[0].tiers["ram"], Source(3, 300))
        self.assertEqual(warm[0].tiers["ssd"], Source(1, 100))
        self.assertEqual(warm[1], cold[1])
        with self.assertRaises(ValueError):
            loads({"view": "counts", "epochs": 1})
        # The RAM tier's time is that of the distinct objects it serves (a chunk read by many
        # records once), where the plan gives them; the SSD tier reads an object per read.
        plan["per_epoch"][1]["tiers"][0]["distinct"] = {"reads": 2, "bytes": 300}
        plan["per_epoch"][1]["tiers"][1]["distinct"] = {"reads": 1, "bytes": 100}
        e2 = loads(plan)[1]
        self.assertEqual(e2.tiers["ram"], Source(6, 600))
        self.assertEqual(e2.moved("ram"), Source(2, 300))
        p = predict([e2], Rates(backing_bw=1e12, tier_bw={"ram": 10, "ssd": 10}),
                    Compute(samples_per_s=1e6))[0]
        self.assertAlmostEqual(p.seconds_by_source["ram"], 30.0)
        self.assertAlmostEqual(p.seconds_by_source["ssd"], 20.0)
        self.assertEqual(p.bytes_by_source["ram"], 600)

    def test_extra_capacity_moves_staged_reads_after_their_first_epoch(self):
        # 300 MB staged each epoch, 100 MB in the tier (filled in epoch 1).
        e1 = _load(1000, backing=400 * MB, fills=100 * MB)
        e2 = _load(1000, backing=300 * MB, ram=100 * MB)
        e1x, e2x = with_extra_capacity([e1, e2], 300 * MB, "ram", 150 * MB)
        self.assertEqual(e1x.backing, e1.backing)  # epoch 1 still reads them, to fill the tier
        self.assertAlmostEqual(e1x.fills.bytes, 250 * MB)
        self.assertAlmostEqual(e2x.backing.bytes, 150 * MB)
        self.assertAlmostEqual(e2x.tiers["ram"].bytes, 250 * MB)
        # All of it, and more: nothing is staged any more.
        _, e2all = with_extra_capacity([e1, e2], 300 * MB, "ram", 900 * MB)
        self.assertAlmostEqual(e2all.backing.bytes, 0)

    def test_capacity_that_removes_the_stall(self):
        # Compute 10 s per epoch; epochs 2+ stage 400 MB at 25 MB/s: 16 s. Without a stall
        # they may stage 250 MB (252.5 MB: a stall of 1 % of the compute counts as none): 147.5 MB
        # (of 400 MB staged) more in the tier.
        rates = Rates(backing_bw=25 * MB, tier_bw={"ram": 1e12})
        compute = Compute(samples_per_s=100)
        e1 = _load(1000, backing=800 * MB, fills=400 * MB)
        e2 = _load(1000, backing=400 * MB, ram=400 * MB)
        extra = capacity_for_no_stall([e1, e2, e2], 400 * MB, "ram", rates, compute)
        self.assertAlmostEqual(extra, 147.5 * MB, delta=MIB)
        self.assertEqual(capacity_for_no_stall([e1, e2], 400 * MB, "ram", rates,
                                               Compute(samples_per_s=10)), 0.0)
        # A tier too slow for the job: no capacity helps.
        self.assertIsNone(capacity_for_no_stall([e1, e2], 400 * MB, "ram",
                                                Rates(backing_bw=25 * MB, tier_bw={"ram": 1 * MB}),
                                                compute))

    def test_more_ram_takes_objects_of_the_slower_tier(self):
        # Nothing staged; epochs 2+ read 400 MB from the SSD tier at 100 MB/s (4 s) against
        # 2 s of compute: the RAM tier must take half of the SSD's objects (200 MB of 400).
        rates = Rates(backing_bw=25 * MB, tier_bw={"ram": 1e12, "ssd": 100 * MB})
        compute = Compute(samples_per_s=1000)
        e1 = _load(2000, backing=500 * MB, fills=500 * MB)
        e2 = EpochLoad(samples=2000, bytes=500 * MB, backing=Source(), fills=Source(),
                       tiers={"ram": Source(100, 100 * MB), "ssd": Source(400, 400 * MB)})
        moved = with_extra_capacity([e1, e2], 0, "ram", 100 * MB, slower=[("ssd", 400 * MB)])
        self.assertEqual(moved[1].tiers["ssd"], Source(300, 300 * MB))
        self.assertEqual(moved[1].tiers["ram"], Source(200, 200 * MB))
        self.assertEqual((moved[0].backing, moved[0].fills), (e1.backing, e1.fills))
        self.assertEqual(moved[0].tiers["ram"].bytes + moved[0].tiers["ssd"].bytes, 0)
        extra = capacity_for_no_stall([e1, e2], 0, "ram", rates, compute,
                                      slower=[("ssd", 400 * MB)])
        self.assertAlmostEqual(extra, 195 * MB, delta=MIB)  # a stall of 50 ms is none
        # The SSD tier has no slower tier to take from, and nothing is staged.
        self.assertIsNone(capacity_for_no_stall([e1, e2], 0, "ssd", rates, compute))

    def test_records_in_big_chunks_wait_for_the_fill(self):
        # Files (one read per object): the compute overlaps the fill, the slower of the two sets
        # the pace.
        self.assertAlmostEqual(fill_order_end(0, 12.0, 4.0, 1.0), 12.0)
        self.assertAlmostEqual(fill_order_end(2.0, 3.0, 4.0, 1.0), 5.0)
        # 38 reads per chunk (records in 4 MiB chunks): nearly every chunk is needed early, so
        # most of the compute waits for the fill: about 12 + 3.4 s, not 12.
        end = fill_order_end(0, 12.0, 4.0, 38.0)
        self.assertGreater(end, 15.0)
        self.assertLess(end, 16.0)
        # Never later than fill then compute, one after the other.
        self.assertLessEqual(fill_order_end(0, 12.0, 4.0, 1e9), 16.0 + 1e-9)
        # An epoch of 72 chunks read 2775 times from the backing store and then the tiers (the
        # plan of the records benchmark, cold): 38.5 reads per object, epoch 1 waits for it.
        e1 = EpochLoad(samples=2775, bytes=300 * MB, reads=2775,
                       tiers={"ram": Source(1409, 0)}, backing=Source(72, 300 * MB),
                       fills=Source(72, 300 * MB), tiers_moved={"ram": Source(72, 300 * MB)})
        self.assertAlmostEqual(e1.reads_per_object(), 2775 / 72)
        p = predict([e1], Rates(backing_bw=25 * MB), Compute(samples_per_s=2775 / 4.0))[0]
        self.assertAlmostEqual(p.time, fill_order_end(0, 12.0, 4.0, 2775 / 72))
        self.assertEqual(p.bound, "backing")
        # Without the plan's reads (an older daemon) nothing changes: one read per object.
        self.assertEqual(dataclasses.replace(e1, reads=0).reads_per_object(), 1.0)

    def test_page_cache_answers_its_share_of_ssd_reads(self):
        self.assertEqual(page_cache_share(50, 200), 0.25)
        self.assertEqual(page_cache_share(500, 200), 1.0)
        self.assertEqual(page_cache_share(-1, 200), 0.0)
        self.assertEqual(page_cache_share(0, 0), 0.0)
        # 400 MB moved by the SSD tier at 100 MB/s from the device, 1 GB/s from the page cache.
        e = EpochLoad(samples=100, bytes=400 * MB, tiers={"ssd": Source(100, 400 * MB)},
                      backing=Source(), fills=Source())
        rates = Rates(backing_bw=1e12, tier_bw={"ssd": 100 * MB}, page_cache_bw=1000 * MB)
        compute = Compute(samples_per_s=1000)  # 0.1 s
        self.assertAlmostEqual(predict([e], rates, compute)[0].time, 4.0)
        cached = dataclasses.replace(rates, page_cached={"ssd": 0.75})
        self.assertAlmostEqual(predict([e], cached, compute)[0].time, 1.0 + 0.3)
        # The RAM tier's reads never come from the device: a share given for it changes nothing.
        e_ram = dataclasses.replace(e, tiers={"ram": Source(100, 400 * MB)})
        ram = dataclasses.replace(rates, tier_bw={"ram": 100 * MB}, page_cached={"ssd": 1.0})
        self.assertAlmostEqual(predict([e_ram], ram, compute)[0].time, 4.0)

    def test_capacity_search_sees_the_page_cache_share_fall(self):
        # The SSD tier holds 100 MB, 50 MB of it in the page cache (free to read), its device
        # gives 8 MB/s; epoch 2 stages 300 MB at 25 MB/s against 10 s of compute.
        plan = {"tiers": [{"name": "ssd", "bytes": 100 * MB}]}
        e1 = EpochLoad(samples=10, bytes=400 * MB, tiers={}, backing=Source(40, 400 * MB),
                       fills=Source(10, 100 * MB))
        e2 = EpochLoad(samples=10, bytes=400 * MB, tiers={"ssd": Source(10, 100 * MB)},
                       backing=Source(30, 300 * MB), fills=Source())
        rates = Rates(backing_bw=25 * MB, tier_bw={"ssd": 8 * MB}, page_cache_bw=1e12)
        compute = Compute(samples_per_s=1)  # 10 s
        fixed = ctl_predict._cached_rates(rates, plan, 50 * MB)
        self.assertEqual(fixed.page_cached, {"ssd": 0.5})
        self.assertGreater(predict([e1, e2], fixed, compute)[1].stall, 0)
        # With the cached share held at 0.5: 250 MB staged (10 s, and the 0.1 s a stall may
        # take) and 147.5 MB half from the device (9.2 s): 47.5 MB more.
        held = capacity_for_no_stall([e1, e2], 300 * MB, "ssd", fixed, compute)
        self.assertGreaterEqual(held, 47.5 * MB)
        self.assertLessEqual(held, 47.5 * MB + (1 << 20))
        # But 50 MB of page cache over a 147.5 MB tier is a third of its reads: its device
        # then needs 12.2 s, and no capacity of this tier removes the stall.
        self.assertIsNone(capacity_for_no_stall(
            [e1, e2], 300 * MB, "ssd", fixed, compute,
            rates_at=lambda x: ctl_predict._cached_rates(rates, plan, 50 * MB, "ssd", x)))

    def test_page_cache_room(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("MemTotal:  8000000 kB\nMemAvailable:  4000000 kB\n")
            meminfo = f.name
        try:
            stats = {"tiers": [{"name": "ram", "capacity": 1000 * 1024, "bytes": 400 * 1024},
                               {"name": "ssd", "capacity": 10 ** 12, "bytes": 0}],
                     "prefetch": {"staging_max_capacity": 200 * 1024, "staging_bytes": 0}}
            # 4,000,000 kB available, less 600,000 kB the RAM tier will take, 200 the window.
            self.assertEqual(ctl_predict.page_cache_room(stats, meminfo),
                             (4000000 - 600 - 200) * 1024)
            self.assertEqual(ctl_predict.page_cache_room({}, meminfo), 4000000 * 1024)
        finally:
            os.unlink(meminfo)
        self.assertEqual(ctl_predict.page_cache_room({}, "/nonexistent/meminfo"), 0.0)

    def test_parsers(self):
        self.assertIsNone(ctl_predict.parse_page_cache("auto"))
        self.assertEqual(ctl_predict.parse_page_cache("2GiB"), 2 * (1 << 30))
        self.assertEqual(ctl_predict.parse_page_cache("0"), 0)
        for bad in ("2GB/s", "lots"):
            with self.assertRaises(Exception):
                ctl_predict.parse_page_cache(bad)
        self.assertEqual(ctl_predict.parse_bytes_rate("25MB/s"), 25e6)
        self.assertEqual(ctl_predict.parse_bytes_rate("2GiB/s"), 2 * (1 << 30))
        self.assertEqual(ctl_predict.parse_bytes_rate("1.5e6"), 1.5e6)
        self.assertEqual(ctl_predict.parse_compute("700 samples/s"), Compute(samples_per_s=700))
        self.assertEqual(ctl_predict.parse_compute("700/s"), Compute(samples_per_s=700))
        self.assertEqual(ctl_predict.parse_compute("12MB/s"), Compute(bytes_per_s=12e6))
        self.assertEqual(ctl_predict.parse_tier_bw("ram=1GB/s,ssd=300MB/s"),
                         {"ram": 1e9, "ssd": 3e8})
        for bad in ("fast", "12 parsecs/s"):
            with self.assertRaises(Exception):
                ctl_predict.parse_bytes_rate(bad)


class PredictMountTest(harness.ClairfsCase):
    """`plan --predict` on a daemon with a registered plan: RAM tier 1 MiB, 40 files of 50 KB
    (2 MB), three epochs: the tier holds some, the rest is staged every epoch."""

    def setUp(self):
        super().setUp()
        base = self.tmpdir("predict")
        self.data = os.path.join(base, "data")
        os.mkdir(self.data)
        self.files = [f"{i:03d}.bin" for i in range(40)]
        for i, rel in enumerate(self.files):
            with open(os.path.join(self.data, rel), "wb") as f:
                f.write(bytes([i]) * 50000)
        self.mnt = os.path.join(base, "mnt")
        os.mkdir(self.mnt)
        self.mount(self.data, self.mnt, cfg=harness.config(ram="1MiB", staging="256KiB"),
                   workdir=base)
        order = [self.files, list(reversed(self.files)), self.files[::2] + self.files[1::2]]
        self.write_manifest(self.mnt, "".join("#epoch\n" + "\n".join(e) + "\n" for e in order))

    def test_per_epoch_adds_up_to_the_plan(self):
        plan = self.plan(self.mnt)
        per = plan["per_epoch"]
        self.assertEqual(len(per), 3)
        self.assertEqual([e["reads"] for e in per], [40, 40, 40])
        self.assertEqual(sum(e["backing"]["bytes"] for e in per), plan["predicted_backing_bytes"])
        ram = plan["tiers"][0]
        self.assertGreater(ram["objects"], 0)
        self.assertLess(ram["objects"], 40)
        # Epoch 1 fills the tier (from the backing store) and stages the rest: all of it.
        self.assertEqual(per[0]["backing"]["bytes"], 40 * 50000)
        self.assertEqual(per[0]["fills"]["bytes"], ram["bytes"])
        self.assertEqual(per[0]["tiers"][0]["bytes"], 0)
        for e in per[1:]:  # later epochs: the tier's objects from the tier
            served = {"reads": ram["objects"], "bytes": ram["bytes"]}  # each object once
            self.assertEqual(e["tiers"][0], dict(served, name="ram", distinct=served))
            self.assertEqual(e["backing"]["bytes"], 40 * 50000 - ram["bytes"])
            self.assertEqual(e["fills"]["bytes"], 0)

    def test_cli_predicts_from_the_mount(self):
        # A cold start (the tier fill has begun by now: by default what it holds is counted).
        rc, out, err = ctl("plan", "--predict", self.mnt, "--json", "--compute-rate", "100",
                           "--backing-bw", "1MB/s", "--tiers-held", "0", "--page-cache", "1GiB")
        self.assertEqual((rc, err), (0, ""))
        result = json.loads(out)
        # No SSD tier: the page cache given changes no tier's time.
        self.assertEqual((result["inputs"]["page_cache"], result["inputs"]["page_cached"]),
                         (1 << 30, {}))
        plan = self.plan(self.mnt)
        epochs = result["epochs"]
        self.assertEqual([e["epoch"] for e in epochs], [1, 2, 3])
        self.assertEqual(epochs[0]["bytes_by_source"]["backing"],
                         plan["per_epoch"][0]["backing"]["bytes"])
        # Epoch 1: 2 MB at 1 MB/s against 0.4 s of compute (40 samples at 100/s).
        self.assertAlmostEqual(epochs[0]["time"], 2.0, places=6)
        self.assertAlmostEqual(epochs[0]["stall"], 1.6, places=6)
        staged = 40 * 50000 - plan["tiers"][0]["bytes"]
        self.assertAlmostEqual(epochs[1]["time"], max(0.4, staged / 1e6), places=6)
        # Capacity: the staged bytes less what 0.4 s of compute covers at 1 MB/s.
        extra = result["capacity"]["extra_bytes"]["ram"]
        self.assertAlmostEqual(extra, staged - 0.4e6, delta=(1 << 20))
        self.assertTrue(result["capacity"]["first_epoch_stalls"])
        # The table names every epoch and the answer about capacity.
        rc, out, err = ctl("plan", "--predict", self.mnt, "--compute-rate", "100",
                           "--backing-bw", "1MB/s", "--tiers-held", "0")
        self.assertEqual(rc, 0, err)
        self.assertIn("stall s", out)
        self.assertIn("ram: epochs 2+ stop stalling with", out)
        # The plain `plan` is the JSON as before; missing inputs are a usage error.
        rc, out, err = ctl("plan", self.mnt)
        self.assertEqual(json.loads(out)["per_epoch"], plan["per_epoch"])
        rc, out, err = ctl("plan", "--predict", self.mnt, "--compute-rate", "100")
        self.assertEqual(rc, 2)
        self.assertIn("--backing-bw", err)
        rc, out, err = ctl("plan", "--predict", self.mnt, "--backing-bw", "1MB/s")
        self.assertEqual(rc, 2)
        self.assertIn("--compute-rate", err)
        # No job reads: its pace cannot be measured.
        rc, out, err = ctl("plan", "--predict", self.mnt, "--backing-bw", "1MB/s", "--pace", "0.1")
        self.assertEqual(rc, 2)
        self.assertIn("the job read nothing", err)

    def test_no_plan_nothing_to_predict(self):
        clairfs.unregister(self.mnt, "default")
        rc, out, err = ctl("plan", "--predict", self.mnt, "--compute-rate", "100",
                           "--backing-bw", "1MB/s")
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("no plan registered", err)

    def test_probe_measures_the_backing_store(self):
        tier_dir = self.tmpdir("tier")
        rc, out, err = ctl("plan", "--predict", self.mnt, "--json", "--compute-rate", "100",
                           "--probe", "10", "--backing", self.data, "--probe-tier",
                           f"ram={tier_dir}")
        self.assertEqual(rc, 0, err)
        inputs = json.loads(out)["inputs"]
        probe = inputs["probe"]
        self.assertEqual((probe["objects"], probe["bytes"]), (10, 10 * 50000))
        self.assertAlmostEqual(inputs["backing_bw"], probe["bytes_per_s"])
        tier = inputs["tier_probes"]["ram"]
        self.assertEqual((tier["bytes"], tier["piece"]), ((128 << 20) // 50000 * 50000, 50000))
        self.assertAlmostEqual(inputs["tier_bw"]["ram"], tier["bytes_per_s"])
        self.assertEqual(os.listdir(tier_dir), [])  # its file removed

    def test_probe_reads_objects_of_big_files(self):
        big = os.path.join(self.tmpdir("big"), "shard.bin")
        with open(big, "wb") as f:
            f.write(b"x" * (10 * 4096))
        # One file of 10 pieces: 5 distinct pieces of it; never more than it has.
        p = ctl_predict.probe_backing(os.path.dirname(big), 5, 2, piece=4096)
        self.assertEqual((p["objects"], p["bytes"]), (5, 5 * 4096))
        p = ctl_predict.probe_backing(os.path.dirname(big), 50, 2, piece=4096)
        self.assertEqual((p["objects"], p["bytes"]), (10, 10 * 4096))


if __name__ == "__main__":
    unittest.main()
