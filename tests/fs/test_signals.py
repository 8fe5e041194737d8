"""What clairfs can observe when the kernel serves reads from its page cache, and that the
daemon holds no descriptor per file."""
import os
import resource

from harness import ClairfsCase, config
import treeutil as tu


def put(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tu.write_file(path, data)


class PageCacheSignalsTest(ClairfsCase):
    def test_open_is_seen_when_reads_are_not(self):
        ds = os.path.join(self.tmpdir("sig"), "ds")
        files = {f"f{i}.bin": os.urandom(50_000 + i) for i in range(20)}
        for rel, data in files.items():
            put(os.path.join(ds, rel), data)
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        self.mount(ds, mnt, cfg=config(keep_cache=True))
        names = sorted(files)
        self.write_manifest(mnt, "#epoch\n" + "\n".join(names) + "\n#epoch\n" + "\n".join(names) + "\n")
        for epoch in range(2):
            for rel in names:
                with open(os.path.join(mnt, rel), "rb") as f:
                    self.assertEqual(f.read(), files[rel])
            if epoch == 0:
                first = self.stats(mnt)
        stats = self.stats(mnt)
        total = sum(len(d) for d in files.values())
        # Every open reaches the daemon, so the plan advances through both epochs ...
        self.assertEqual(stats["files_opened"], 40, stats)
        self.assertEqual(stats["prefetch"]["position"], 40, stats)
        self.assertEqual(stats["prefetch"]["epoch"], 2, stats)
        # ... but the second epoch's bytes came from the page cache without a read() call.
        self.assertEqual(first["bytes_read"], total, first)
        self.assertEqual(stats["bytes_read"], total, stats)


class NoDescriptorPerFileTest(ClairfsCase):
    NFILES = 5000

    def test_many_files_under_a_small_descriptor_limit(self):
        ds = os.path.join(self.tmpdir("fd"), "ds")
        for i in range(self.NFILES):
            put(os.path.join(ds, f"d{i % 50:02d}", f"f{i:05d}"), b"%d\n" % i)
        mnt = os.path.join(self.tmpdir("mnt"), "m")
        os.mkdir(mnt)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # inherited by the daemon
        try:
            d = self.mount(ds, mnt, cfg=config())
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        with open(f"/proc/{d.proc.pid}/limits") as f:
            limit = next(line for line in f if line.startswith("Max open files"))
        self.assertEqual(int(limit.split()[3]), 256, limit)
        names = sorted(f"d{i % 50:02d}/f{i:05d}" for i in range(self.NFILES))
        self.write_manifest(mnt, "\n".join(names) + "\n")
        seen = sorted(os.path.relpath(os.path.join(r, n), mnt)
                      for r, _, ns in os.walk(mnt) for n in ns)
        self.assertEqual(seen, names)
        held = [open(os.path.join(mnt, n), "rb") for n in names[:100]]
        try:
            for rel in names:
                with open(os.path.join(mnt, rel), "rb") as f:
                    self.assertEqual(f.read(), b"%d\n" % int(rel[-5:]))
        finally:
            for f in held:
                f.close()
        fds = len(os.listdir(f"/proc/{d.proc.pid}/fd"))
        self.assertLess(fds, 64, f"daemon holds {fds} descriptors")
        stats = self.stats(mnt)
        self.assertEqual(stats["files_opened"], self.NFILES + 100, stats)
        self.assertEqual(stats["errors"]["fetch"], 0, stats)
