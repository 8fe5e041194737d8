"""Issue 15, item 5: the daemon's log file rotates by size (log.max_size, log.max_files),
every line whole in one file, and SIGHUP still reopens it; -o log_level= is covered by
test_mount_cli."""
import os
import signal

import harness
from harness import ClairfsCase, config
from test_lifecycle import small_dataset


class LogRotationTest(ClairfsCase):

    def test_rotates_by_size_and_keeps_max_files(self):
        base = self.tmpdir("logrot")
        ds = small_dataset(base, n=4)
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        log = os.path.join(base, "clairfs.log")
        d = self.mount(ds, mnt, cfg=config(log_file=log), workdir=base,
                       extra_args=["-o", "log.max_size=4096,log.max_files=2"])
        n = 0

        def rotated_twice():
            # Each rejected manifest logs one warning with its reason.
            nonlocal n
            for _ in range(20):
                n += 1
                with self.assertRaises(OSError):
                    self.write_manifest(mnt, f"no/such/file-{n}.jpg\n")
            return os.path.exists(log + ".2")
        harness.wait_for(rotated_twice, 60, "the log to rotate twice")
        # More lines: the oldest file is dropped, never a .3.
        for _ in range(60):
            n += 1
            with self.assertRaises(OSError):
                self.write_manifest(mnt, f"no/such/file-{n}.jpg\n")
        self.assertFalse(os.path.exists(log + ".3"), "log.max_files=2 kept a third file")
        files = [log + ".2", log + ".1", log]
        lines = []
        for path in files:
            with open(path) as f:
                text = f.read()
            self.assertLessEqual(len(text.encode()), 4096 + 1024, path)
            # A record (some span lines: a rejection's reason) is never split across files.
            self.assertTrue(text.startswith("[20"), f"{path} starts inside a record")
            self.assertTrue(text.endswith("\n"), f"{path} ends inside a line")
            lines += text.splitlines()
        self.assertEqual(oct(os.stat(log).st_mode & 0o777), oct(0o640))
        # In order across the files: the rejected paths' numbers only grow.
        numbers = [int(l.split("file-")[1].split(".jpg")[0]) for l in lines if "file-" in l]
        self.assertEqual(numbers, sorted(numbers))
        self.assertGreater(len(numbers), 20)
        # SIGHUP still reopens the current file.
        os.kill(d.proc.pid, signal.SIGHUP)

        def reopened():
            with open(log) as f:
                return "reopened the log file" in f.read()
        harness.wait_for(reopened, 10, "SIGHUP to reopen the log")
