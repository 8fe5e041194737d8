"""`.clairfs/metrics`: the stats in the Prometheus text format, parsed by prometheus_client's
own parser (Debian's python3-prometheus-client), its values agreeing with `.clairfs/stats`;
and the daemon's derived stats keys (hit rates, readiness, stall seconds)."""
import os
import stat

import harness
from harness import ClairfsCase, config
from test_lifecycle import small_dataset

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # tools/setup.sh installs it
    text_string_to_metric_families = None

# Keys whose values only change while files are read or fetched: once the prefetch is done
# and no reader runs they hold still, so stats and metrics read one after the other agree.
STABLE = ("file_reads", "bytes_read", "served", "object_reads", "hit_rates", "hit_rate",
          "readiness", "backing_reads", "backing_bytes", "stall_ns", "tiers", "errors")


def stable(stats):
    view = {k: stats[k] for k in STABLE}
    p = stats["prefetch"]
    view["prefetch"] = {k: p[k] for k in ("position", "positions", "epoch", "planned_files",
                                          "fetches", "staging_bytes", "staging_capacity")}
    return view


def families(text):
    """{family name: {(sample name, sorted label items): value}} and {name: type}."""
    values, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            values.setdefault(fam.name, {})[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values, types


class MetricsTest(ClairfsCase):

    def setUp(self):
        super().setUp()
        if text_string_to_metric_families is None:
            self.skipTest("python3-prometheus-client is not installed")

    def test_metrics_parse_and_agree_with_stats(self):
        base = self.tmpdir("metrics")
        ds = small_dataset(base, n=40)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        # 1 MiB of RAM for about 2 MiB of files: part tiered, part staged.
        self.mount(ds, mnt, cfg=config(ram="1MiB", staging="16MiB"))
        files = sorted(os.path.join(d[len(ds) + 1:], f) for d, _, fs in os.walk(ds) for f in fs
                       if f.endswith(".jpg"))
        planned, unplanned = files[:30], files[30:]

        ctl = os.path.join(mnt, ".clairfs")
        self.assertIn("metrics", os.listdir(ctl))
        self.assertNotIn(".clairfs", os.listdir(mnt))
        st = os.stat(os.path.join(ctl, "metrics"))
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(st.st_mode & 0o777, 0o444)

        # Before any read: the ratios are undefined, not 0; nothing is planned: ready.
        before = self.stats(mnt)
        self.assertIsNone(before["hit_rate"])
        self.assertEqual(before["readiness"], {"tiers": 1.0, "window": 1.0, "ready": 1.0})
        values, _ = families(self.control_read(mnt, "metrics"))
        hit = values["clairfs_hit_ratio"][("clairfs_hit_ratio", ())]
        self.assertNotEqual(hit, hit, "hit ratio before any read should be NaN")

        self.write_manifest(mnt, "".join(p + "\n" for p in planned))
        harness.wait_for(lambda: self.stats(mnt)["readiness"]["ready"] >= 1.0, 30,
                         "the tiers and the staging window to fill")
        for rel in files:
            with open(os.path.join(mnt, rel), "rb") as f:
                f.read()

        # The prefetch is done and nothing reads: stats hold still between two reads, and the
        # metrics read between them show that state.
        seen = []

        def settled():
            a = self.stats(mnt)
            text = self.control_read(mnt, "metrics")
            seen[:] = [a, text]
            return stable(a) == stable(self.stats(mnt))
        harness.wait_for(settled, 30, "the stats to settle")
        st, text = seen
        values, types = families(text)

        def one(name, **labels):
            return values[name][(name + ("_total" if types[name] == "counter" else ""),
                                 tuple(sorted(labels.items())))]

        self.assertEqual(types["clairfs_file_reads"], "counter")
        self.assertEqual(types["clairfs_tier_used_bytes"], "gauge")
        self.assertEqual(one("clairfs_file_reads"), st["file_reads"])
        self.assertEqual(st["file_reads"], 40)
        self.assertEqual(one("clairfs_read_bytes"), st["bytes_read"])
        self.assert_bytes_read(st["bytes_read"],
                               sum(os.path.getsize(os.path.join(ds, p)) for p in files),
                               st["read_requests"] - st["file_reads"], st)
        self.assertEqual(one("clairfs_read_requests"), st["read_requests"])
        self.assertGreaterEqual(st["read_requests"], st["file_reads"], st)  # one READ at least
        for source, n in st["served"].items():
            self.assertEqual(one("clairfs_object_reads", source=source), n, source)
            self.assertAlmostEqual(one("clairfs_served_ratio", source=source),
                                   st["hit_rates"][source], source)
        self.assertEqual(st["object_reads"], sum(st["served"].values()))
        # The 10 unplanned files came from the backing store, the planned ones did not.
        self.assertEqual(st["served"]["backing"], len(unplanned), st["served"])
        self.assertAlmostEqual(st["hit_rate"], 30 / 40)
        self.assertAlmostEqual(one("clairfs_hit_ratio"), st["hit_rate"])
        self.assertGreater(st["served"]["ram"], 0)
        self.assertGreater(st["served"]["staging"], 0)
        self.assertEqual(one("clairfs_backing_reads"), st["backing_reads"])
        self.assertEqual(one("clairfs_backing_read_bytes"), st["backing_bytes"])
        self.assertAlmostEqual(one("clairfs_stall_seconds"), st["stall_ns"] / 1e9)
        self.assertAlmostEqual(st["stall_seconds"], st["stall_ns"] / 1e9)
        for t in st["tiers"]:
            self.assertEqual(one("clairfs_tier_used_bytes", tier=t["name"]), t["bytes"])
            self.assertEqual(one("clairfs_tier_capacity_bytes", tier=t["name"]), t["capacity"])
            self.assertEqual(one("clairfs_tier_on", tier=t["name"]), 1.0)
            self.assertEqual(one("clairfs_tier_fills", tier=t["name"]), t["fetched"])
        p = st["prefetch"]
        self.assertEqual(one("clairfs_plan_position"), p["position"])
        self.assertEqual(one("clairfs_plan_positions"), p["positions"])
        self.assertEqual((p["position"], p["positions"]), (30, 30))
        self.assertEqual(one("clairfs_plan_epoch"), p["epoch"])
        self.assertEqual(one("clairfs_staging_capacity_bytes"), p["staging_capacity"])
        self.assertEqual(one("clairfs_prefetch_fetches"), p["fetches"])
        for part in ("tiers", "window", "ready"):
            self.assertAlmostEqual(one("clairfs_readiness_ratio", part=part),
                                   st["readiness"][part], part)
        for kind, n in st["errors"].items():
            self.assertEqual(one("clairfs_errors", kind=kind), n, kind)
        self.assertEqual(one("clairfs_peer_bytes", direction="in"), 0)
