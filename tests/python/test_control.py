"""clairfs.control on a real mount: manifests from paths, ManifestError, stats/plan/errors.

These need no torch: the package must work with the standard library alone.
"""
import os
import signal
import subprocess
import sys
import time

import harness

import clairfs

REPO = harness.REPO


class ControlTest(harness.ClairfsCase):
    def setUp(self):
        super().setUp()
        self.data = os.path.join(self.tmpdir("py"), "data")
        self.files = ["a/1.bin", "a/2.bin", "b/3.bin", "#odd/4.bin"]
        for rel in self.files:
            os.makedirs(os.path.dirname(os.path.join(self.data, rel)), exist_ok=True)
            with open(os.path.join(self.data, rel), "wb") as f:
                f.write(rel.encode() * 100)
        self.mount(self.data)  # over the dataset itself, as a job would

    def test_register_paths_replaces_then_appends(self):
        n = clairfs.register_paths(self.data, [self.files, list(reversed(self.files))])
        self.assertEqual(n, 8)
        p = clairfs.plan(self.data)
        self.assertEqual((p["epochs"], p["entries"], p["files"]), (2, 8, 4))
        self.assertEqual(clairfs.errors(self.data), "")
        # Absolute paths under the mount are made relative; '#odd' needs './' and gets it.
        n = clairfs.register_paths(self.data, [[os.path.join(self.data, "#odd/4.bin")]],
                                   append=True)
        self.assertEqual(n, 1)
        self.assertEqual(clairfs.plan(self.data)["epochs"], 3)
        clairfs.register_paths(self.data, [self.files[:1]])
        self.assertEqual(clairfs.plan(self.data)["entries"], 1)

    def test_rejected_manifest_raises_with_the_reason(self):
        clairfs.register_paths(self.data, [self.files])
        with self.assertRaises(clairfs.ManifestError) as cm:
            clairfs.register_paths(self.data, [["a/1.bin", "a/missing.bin"]])
        self.assertIsInstance(cm.exception, ValueError)
        self.assertIn("line 4", cm.exception.errors)  # lines 1, 2: "#begin", "#epoch"
        self.assertIn("missing.bin", str(cm.exception))
        self.assertEqual(clairfs.plan(self.data)["entries"], 4, "a rejected manifest changed the plan")
        self.assertEqual(clairfs.stats(self.data)["errors"]["manifest_rejected"], 1)

    def test_paths_outside_the_root_are_refused_before_writing(self):
        clairfs.register_paths(self.data, [self.files])
        outside = os.path.join(os.path.dirname(self.data), "elsewhere.bin")
        with self.assertRaisesRegex(ValueError, "not inside the dataset root"):
            clairfs.register_paths(self.data, [self.files, [outside]])
        self.assertEqual(clairfs.plan(self.data)["entries"], 4)
        self.assertEqual(clairfs.stats(self.data)["errors"]["manifest_rejected"], 0)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(TypeError, "list of lists"):
            clairfs.register_paths(self.data, self.files)  # a flat list: not an epoch list
        with self.assertRaisesRegex(ValueError, "newline"):
            clairfs.register_paths(self.data, [["a/1.bin\nb/3.bin"]])
        with self.assertRaises(FileNotFoundError):
            clairfs.stats(os.path.dirname(self.data))  # not a clairfs mount

    def test_a_failing_producer_leaves_the_plan_alone(self):
        clairfs.register_paths(self.data, [self.files])

        def epochs():
            yield [clairfs.manifest_line(p) for p in self.files]
            raise RuntimeError("producer broke")

        with self.assertRaisesRegex(RuntimeError, "producer broke"):
            clairfs.write_manifest(self.data, epochs())
        self.assertEqual(clairfs.plan(self.data)["entries"], 4)
        with self.assertRaisesRegex(ValueError, "epoch 1 is empty"):
            clairfs.write_manifest(self.data, [[b"a/1.bin\n"], []])
        self.assertEqual(clairfs.plan(self.data)["entries"], 4)

    def test_a_registration_killed_mid_write_installs_nothing(self):
        clairfs.register_paths(self.data, [self.files])
        before = clairfs.plan(self.data)
        # More than one write() of whole lines gets out before the producer dies: without the
        # trailer, that valid prefix would become the plan when the killed process's
        # descriptor is closed.
        code = ("import os, signal, sys, clairfs\n"
                "def epochs():\n"
                "    yield [clairfs.manifest_line('a/1.bin')] * 300000\n"
                "    os.kill(os.getpid(), signal.SIGKILL)\n"
                "    yield []\n"
                "clairfs.write_manifest(sys.argv[1], epochs())\n")
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        r = subprocess.run([sys.executable, "-c", code, self.data], env=env, timeout=120)
        self.assertEqual(r.returncode, -signal.SIGKILL)
        deadline = time.monotonic() + 10
        while "trailer" not in clairfs.errors(self.data):
            self.assertLess(time.monotonic(), deadline, "the cut-off text was never validated")
            time.sleep(0.01)
        self.assertEqual(clairfs.plan(self.data), before, "a cut-off registration became the plan")
        # The same registration, complete, carries its trailer and is accepted.
        self.assertEqual(clairfs.write_manifest(self.data, [[clairfs.manifest_line("a/1.bin")] * 3]), 3)
        self.assertEqual(clairfs.plan(self.data)["entries"], 3)

    def test_a_named_stream_and_unregister(self):
        # Accepted by every clairfs that parses '#stream' (test_streams checks that other
        # streams are untouched, on a daemon with streams).
        self.assertEqual(clairfs.register_paths(self.data, [self.files], stream="job-1"), 4)
        self.assertEqual(clairfs.errors(self.data), "")
        self.assertEqual(clairfs.plan(self.data)["entries"], 4)
        self.assertEqual(clairfs.unregister(self.data, "job-1"), 0)
        self.assertEqual(clairfs.errors(self.data), "")
        self.assertEqual(clairfs.plan(self.data)["entries"], 0)
        with self.assertRaisesRegex(ValueError, "outside"):
            clairfs.register_paths(self.data, [self.files], stream="job 1")
        self.assertEqual(clairfs.stats(self.data)["errors"]["manifest_rejected"], 0)

    def test_stats_count_opens(self):
        clairfs.register_paths(self.data, [self.files])
        before = clairfs.stats(self.data)
        for rel in self.files:
            with open(os.path.join(self.data, rel), "rb") as f:
                self.assertEqual(f.read(), rel.encode() * 100)
        after = clairfs.stats(self.data)
        self.assertEqual(after["file_reads"] - before["file_reads"], 4)
        self.assertEqual(after["unplanned_file_reads"], 0)
        self.assertEqual(after["prefetch"]["position"], 4)


class ImportTest(harness.ClairfsCase):
    def test_importing_the_package_does_not_import_torch(self):
        code = ("import sys; import clairfs; clairfs.manifest_line('x'); "
                "sys.exit('torch' in sys.modules)")
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        r = subprocess.run([sys.executable, "-c", code], env=env, timeout=60,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, f"torch was imported, or: {r.stderr}")
