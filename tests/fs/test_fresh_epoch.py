"""Planned reads fresh whatever answers them: a change made where no watch sees it (another
node of a network file system; the stand-in of test_freshness.py) is seen by the planned read
of the changed file also when the kernel's page cache answered every read of the epoch before
it, so that the daemon saw none of them (no-open mode). The changes lie deep into an epoch
(positions 390, 393 and 396 of 400), far past the stretch the daemon statted ahead of the last
read it saw; they are made once before epoch 2 and once again, to other files, before epoch 3.

Per epoch: one file rewritten (same size, new bytes), one chmod 600 (another user is refused),
one deleted (ENOENT). Read in plan order by 1 and by 4 threads; in no-open and per_open modes.
The changes are made PLANNED_BOUND (docs/reliability.md) before the epoch's first read."""
import errno
import os
import random
import sys
import threading
import time
import unittest

import harness
import test_freshness as tf

FILES = 400
EPOCHS = 3
VICTIMS = (390, 393, 396)  # epoch positions: rewritten, revoked, deleted


class FreshEpoch(tf.FreshnessBase):
    def layout(self):
        return [f"e{i % 8}/f{i:03d}" for i in range(FILES)], []

    def data_for(self, rel, version):
        size = 2048 + (int(rel[-3:]) * 97) % (38 * 1024)  # 2-40 KiB
        block = f"{rel}:{version}:".encode()
        return (block * (size // len(block) + 1))[:size]

    def orders(self):
        """EPOCHS orders of the files, each a seeded shuffle."""
        rng = random.Random(37)
        out = []
        for _ in range(EPOCHS):
            order = list(self.planned)
            rng.shuffle(order)
            out.append(order)
        return out

    def read_epoch(self, order, threads, expect):
        """Reads order in plan order (threads take the next position in turn). expect maps a
        path to what its read must give: bytes, or ("errno", n), or ("other user", text).
        Returns the failures seen, as text."""
        bad = []
        lock = threading.Lock()
        nxt = iter(range(len(order)))

        def worker():
            while True:
                with lock:
                    i = next(nxt, None)
                if i is None:
                    return
                rel = order[i]
                want = expect.get(rel)
                if isinstance(want, tuple) and want[0] == "other user":
                    got = tf.read_as(tf.NOBODY, self.at(rel))
                    if got != want[1]:
                        with lock:
                            bad.append(f"{rel} (position {i}) as another user: {got}")
                    continue
                try:
                    got = tf.read(self.at(rel))
                except OSError as e:
                    got = ("errno", e.errno)
                if want is None:
                    want = self.current[rel]
                if got != want:
                    shown = got if isinstance(got, tuple) else f"{len(got)} bytes, " + (
                        "the old version" if got == self.data_for(rel, 1) else "other bytes")
                    with lock:
                        bad.append(f"{rel} (position {i}): {shown}")

        pool = [threading.Thread(target=worker) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(120)
            self.assertFalse(t.is_alive(), "a reader hung")
        return bad

    def change(self, order, version):
        """Changes the files at VICTIMS of order in the underlying directory; returns what
        their reads must give."""
        rewritten, revoked, deleted = (order[p] for p in VICTIMS)
        harness.rewrite_in_place(os.path.join(self.src, rewritten),
                                 self.data_for(rewritten, version))
        self.current[rewritten] = self.data_for(rewritten, version)
        os.chmod(os.path.join(self.src, revoked), 0o600)
        os.unlink(os.path.join(self.src, deleted))
        self.gone.add(deleted)
        return {rewritten: self.data_for(rewritten, version),
                revoked: ("other user", f"ERRNO {errno.EACCES}"),
                deleted: ("errno", errno.ENOENT)}

    def run_case(self, threads, open_mode=None):
        fuse = {"revalidate_interval": 3600}  # the sweep cannot explain what is seen
        if open_mode:
            fuse["open_mode"] = open_mode
        self.start(**fuse)
        orders = self.orders()
        text = "".join("#epoch\n" + "\n".join(o) + "\n" for o in orders)
        self.write_manifest(self.mnt, text)
        self.current = {rel: self.data_for(rel, 1) for rel in self.planned}
        self.gone = set()
        t0 = time.monotonic()
        bad = self.read_epoch(orders[0], threads, {})
        self.assertEqual(bad, [], "epoch 1")
        took = [time.monotonic() - t0]
        for epoch in range(1, EPOCHS):
            expect = self.change(orders[epoch], epoch + 1)
            changed = time.monotonic()
            # Files deleted in an earlier epoch stay gone.
            for rel in self.gone:
                expect.setdefault(rel, ("errno", errno.ENOENT))
            harness.wait_for(lambda: time.monotonic() - changed >= tf.PLANNED_BOUND, 10,
                             "the documented bound to pass")
            t0 = time.monotonic()
            bad = self.read_epoch(orders[epoch], threads, expect)
            took.append(time.monotonic() - t0)
            if bad:
                self.fail(f"epoch {epoch + 1}: {bad}; stats {self.stats(self.mnt)}")
        stats = self.stats(self.mnt)
        print(f"\n  {FILES} files x {EPOCHS} epochs, {threads} thread(s), "
              f"{open_mode or 'no-open'}: epochs in " + ", ".join(f"{t:.2f}" for t in took) +
              f" s; stat_ahead {stats['stat_ahead']}; fresh {stats['fresh']}", file=sys.stderr)
        return stats

    def test_no_open_one_reader(self):
        stats = self.run_case(1)
        # The page cache answered the epochs: the signposts are what the daemon saw.
        self.assertGreater(stats["stat_ahead"]["reached"], 0, stats["stat_ahead"])

    def test_no_open_four_readers(self):
        self.run_case(4)

    def test_per_open_one_reader(self):
        self.run_case(1, "per_open")

    def test_per_open_four_readers(self):
        self.run_case(4, "per_open")


if __name__ == "__main__":
    unittest.main()
