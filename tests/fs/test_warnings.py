"""Issue 15, item 6: warnings that save a job, in the log and in stats["warnings"]: reads with
no plan registered, a plan whose files the job does not read (another root), a plan the job
reads in another order. (An unregistered rank: tests/mpi/test_cluster.py.)"""
import os
import subprocess
import sys

import harness
from harness import ClairfsCase, config
from test_lifecycle import small_dataset


def files_of(ds, cls):
    d = os.path.join(ds, cls)
    return sorted(f"{cls}/{n}" for n in os.listdir(d))


class _Mounted(ClairfsCase):
    """A dataset of 80 files in class0..class3 and a mount with its log in a file."""

    def setUp(self):
        super().setUp()
        self.base = self.tmpdir("warn")
        self.ds = small_dataset(self.base, n=80)  # class0..class3, 20 files each
        self.mnt = os.path.join(self.base, "mnt")
        os.mkdir(self.mnt)
        self.log = os.path.join(self.base, "clairfs.log")

    def start(self, *options):
        self.mount(self.ds, self.mnt, cfg=config(log_file=self.log), workdir=self.base,
                   extra_args=[a for o in options for a in ("-o", o)])

    def read(self, rel):
        with open(os.path.join(self.mnt, rel), "rb") as f:
            return f.read()

    def logged(self, text):
        with open(self.log, errors="replace") as f:
            return text in f.read()

    def warnings(self):
        return {w["kind"]: w["message"] for w in self.stats(self.mnt)["warnings"]}


class WarningsTest(_Mounted):

    def test_reads_with_no_plan_are_said_once_then_cleared_by_a_registration(self):
        self.start("warn.no_plan_after=0.3")
        names = files_of(self.ds, "class0")

        def said():
            # The job goes on reading, with no plan; its pages dropped, so that its reads
            # reach the daemon (no-open mode: a read the page cache answers is not seen).
            harness.drop_pages(os.path.join(self.mnt, "class0"))
            for rel in names:
                self.read(rel)
            return self.logged("no plan is registered")
        harness.wait_for(said, 20, "the no-plan warning")
        self.assertIn("no_plan", self.warnings())
        self.assertIn(".clairfs/manifest", self.warnings()["no_plan"])
        self.write_manifest(self.mnt, "\n".join(names) + "\n")
        self.assertEqual(self.warnings(), {})
        with open(self.log, errors="replace") as f:
            self.assertEqual(f.read().count("no plan is registered"), 1)

    def test_a_plan_of_other_files_is_said_to_be_another_root(self):
        self.start("warn.check_reads=10")
        self.write_manifest(self.mnt, "\n".join(files_of(self.ds, "class1")) + "\n")
        for rel in files_of(self.ds, "class2")[:10]:
            self.read(rel)
        harness.wait_for(lambda: self.logged("since the plan was registered are not in it"), 10,
                         "the not-in-plan warning")
        msg = self.warnings()["not_in_plan"]
        self.assertIn("10 of the first 10 files", msg)
        self.assertIn("'class2/img", msg)  # the stray read
        self.assertIn("'class1/img", msg)  # the plan's first file

    def test_a_plan_read_in_another_order_is_said_and_in_order_is_not(self):
        self.start("warn.check_reads=10", "warn.order_slack=4")
        order = files_of(self.ds, "class3")
        self.write_manifest(self.mnt, "\n".join(order) + "\n")
        for rel in order[:10]:
            self.read(rel)
        self.assertEqual(self.warnings(), {})
        self.write_manifest(self.mnt, "\n".join(order) + "\n")  # replaced: judged anew
        for rel in reversed(order[10:]):
            self.read(rel)
        harness.wait_for(lambda: "out_of_order" in self.warnings(), 10,
                         "the out-of-order warning")
        self.assertTrue(self.logged("does not read in the order it registered"))
        self.assertNotIn("not_in_plan", self.warnings())
        # clairfs-ctl status shows it.
        out = subprocess.run(
            [sys.executable, "-m", "clairfs", "status", self.mnt], capture_output=True,
            text=True, check=True,
            env=dict(os.environ, PYTHONPATH=os.path.join(harness.REPO, "python"))).stdout
        self.assertIn("WARNING (out_of_order): ", out)
        # And the metrics, for alerts.
        metrics = self.control_read(self.mnt, "metrics").splitlines()
        self.assertIn('clairfs_warning{kind="out_of_order"} 1', metrics)
        self.assertIn('clairfs_warning{kind="no_plan"} 0', metrics)


class FailuresLoggedTest(_Mounted):
    """Issue 15, item 5: a failure that changes what is served is logged with its cause."""

    def test_a_file_changed_since_the_plan_is_read_fresh_and_logged(self):
        self.start()
        names = files_of(self.ds, "class0")
        self.write_manifest(self.mnt, "\n".join(names) + "\n")
        path = os.path.join(self.ds, names[0])
        with open(path, "ab") as f:
            f.write(b"appended after the registration")
        with open(path, "rb") as f:
            fresh = f.read()
        self.assertEqual(self.read(names[0]), fresh)
        self.assertGreater(self.stats(self.mnt)["errors"]["stale"], 0)
        harness.wait_for(lambda: self.logged(f"{names[0]} changed since the plan was made"), 10,
                         "the stale file's log line")
