"""clairfs-ctl serve-metrics (clairfs/ctl/metrics.py) on real mounts: the HTTP endpoint scraped
with urllib and parsed with prometheus_client's parser, one label per mount, clairfs_up 0 for
a mount that is gone (the server keeps serving); the textfile for node_exporter written whole."""
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request

import harness
import test_cli

import clairfs

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # tools/setup.sh installs python3-prometheus-client
    text_string_to_metric_families = None


def samples(text):
    """{(sample name, sorted label items): value} of an exposition text."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


class ServeMetricsTest(harness.ClairfsCase):
    def setUp(self):
        super().setUp()
        if text_string_to_metric_families is None:
            self.skipTest("python3-prometheus-client is not installed")
        self.base = self.tmpdir("prom")
        self.mounts = []
        for name in ("a", "b"):
            data = os.path.join(self.base, "data-" + name)
            os.makedirs(os.path.join(data, "c"))
            for i in range(5):
                with open(os.path.join(data, "c", f"{i}.bin"), "wb") as f:
                    f.write(bytes([i]) * (1000 + i))
            mnt = os.path.join(self.base, "mnt-" + name)
            os.mkdir(mnt)
            d = self.mount(data, mnt, workdir=self.base)
            self.mounts.append((mnt, d))

    def read_files(self, mnt, n):
        for i in range(n):
            with open(os.path.join(mnt, "c", f"{i}.bin"), "rb") as f:
                f.read()

    def start_server(self, *mounts):
        """Starts serve-metrics on a free port (--port 0); returns (process, port)."""
        argv = [sys.executable, "-m", "clairfs", "serve-metrics", *mounts, "--port", "0"]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ, PYTHONPATH=test_cli.PKG))
        harness.register_proc(p)
        self.addCleanup(self.stop_server, p)
        deadline = time.monotonic() + 30
        line = b""
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            if p.poll() is not None:
                self.fail(f"serve-metrics exited {p.returncode}: {p.stderr.read().decode()}")
            if select.select([p.stdout], [], [], 0.1)[0]:
                line += os.read(p.stdout.fileno(), 4096)
        self.assertIn("/metrics", line.decode(), "serve-metrics did not say where it serves")
        return p, int(line.decode().rsplit(":", 1)[1].split("/")[0])

    @staticmethod
    def stop_server(p):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        finally:
            harness.release_proc(p, grace=0)
            p.stdout.close()
            p.stderr.close()

    @staticmethod
    def scrape(port):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20) as r:
            return r.read().decode()

    def test_serves_every_mount_and_survives_one_gone(self):
        (a, _), (b, daemon_b) = self.mounts
        self.read_files(a, 3)
        self.read_files(b, 5)
        gone = os.path.join(self.base, "no-such-mount")
        p, port = self.start_server(a, b, gone)
        got = samples(self.scrape(port))
        self.assertEqual(got[("clairfs_up", (("mount", a),))], 1)
        self.assertEqual(got[("clairfs_up", (("mount", b),))], 1)
        self.assertEqual(got[("clairfs_up", (("mount", gone),))], 0)
        # Several mounts: every sample names its mount; the values are the daemons'.
        for mnt, opened in ((a, 3), (b, 5)):
            st = clairfs.stats(mnt)
            self.assertEqual(st["file_reads"], opened)
            self.assertEqual(got[("clairfs_file_reads_total", (("mount", mnt),))], opened)
            self.assertEqual(got[("clairfs_tier_capacity_bytes",
                                  (("mount", mnt), ("tier", "ram")))], st["tiers"][0]["capacity"])
        self.assertFalse([k for k in got if k[0] != "clairfs_up" and "mount" not in dict(k[1])])
        # Scraped afresh: more opens show at the next scrape (pages dropped: in no-open mode a
        # read the page cache answers reaches no daemon).
        harness.drop_pages(a)
        self.read_files(a, 5)
        got = samples(self.scrape(port))
        self.assertEqual(got[("clairfs_file_reads_total", (("mount", a),))], 8)
        # A daemon stopped under the server: its mount reads as down, the others still export.
        daemon_b.stop()
        got = samples(self.scrape(port))
        self.assertEqual(got[("clairfs_up", (("mount", b),))], 0)
        self.assertEqual(got[("clairfs_up", (("mount", a),))], 1)
        self.assertNotIn(("clairfs_file_reads_total", (("mount", b),)), got)
        self.assertEqual(got[("clairfs_file_reads_total", (("mount", a),))], 8)
        self.assertIsNone(p.poll())
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 0, err)
        self.assertNotIn("Traceback", err.decode())
        # Logged once when a mount went down, not at every scrape.
        self.assertEqual(err.decode().count(f"{b}: metrics not readable"), 1, err)
        self.assertEqual(err.decode().count(f"{gone}: metrics not readable"), 1, err)

    def test_textfile_is_written_whole_and_parses(self):
        (a, _), _ = self.mounts
        self.read_files(a, 2)
        out = os.path.join(self.base, "textfile")
        os.mkdir(out)
        path = os.path.join(out, "clairfs.prom")
        rc, _, err = test_cli.ctl("serve-metrics", a, "--textfile", path, "--once")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(os.listdir(out), ["clairfs.prom"])  # no temp file left
        with open(path) as f:
            got = samples(f.read())
        # One mount: no mount label on its samples, clairfs_up still names it.
        self.assertEqual(got[("clairfs_up", (("mount", a),))], 1)
        self.assertEqual(got[("clairfs_file_reads_total", ())], 2)
        self.assertEqual(got[("clairfs_object_reads_total", (("source", "backing"),))],
                         clairfs.stats(a)["served"]["backing"])
        # A mount that is not there: written anyway, with up 0.
        rc, _, err = test_cli.ctl("serve-metrics", self.base, "--textfile", path, "--once")
        self.assertEqual(rc, 0, err)
        self.assertIn("not readable", err)
        with open(path) as f:
            self.assertEqual(samples(f.read()), {("clairfs_up", (("mount", self.base),)): 0})

    def test_usage(self):
        (a, _), _ = self.mounts
        self.assertEqual(test_cli.ctl("serve-metrics", a)[0], 2)  # neither --port nor --textfile
        self.assertEqual(test_cli.ctl("serve-metrics", a, "--port", "0", "--textfile", "x")[0], 2)
