"""Records inside big files, read through the mount in a shuffled order the manifest names as
record-range entries: TFRecord (CRC-checked), tar shards (tarfile), LMDB (liblmdb over a
memory map of data.mdb, so its reads arrive as page faults). Exact bytes every epoch; once the
tiers hold the data, later epochs read nothing from the backing store."""
import io
import os
import random
import tarfile
import unittest

from chunkutil import CHUNK, ChunkCase, chunk_config, chunk_count, chunks_of, clairfs
import treeutil as tu

try:
    import lmdb  # Debian's python3-lmdb, under /usr/bin/python3
except ImportError as e:
    lmdb, LMDB_MISSING = None, f"lmdb not importable: {e}"


def shuffled(items, rng):
    out = list(items)
    rng.shuffle(out)
    return out


class ChunkRecordsTest(ChunkCase):
    def new_dataset(self):
        ds = os.path.join(self.tmpdir("rec"), "ds")
        os.makedirs(ds)
        return ds

    def check_range_plan(self, mnt, epochs, path_size):
        """The plan of `epochs` of (path, offset, length) entries over files of the sizes in
        path_size: entries, range entries and the chunks they overlap."""
        plan = self.plan(mnt)
        n = sum(len(e) for e in epochs)
        chunks = {p: chunks_of([(o, ln) for e in epochs for q, o, ln in e if q == p])
                  for p in path_size}
        want = {"epochs": len(epochs), "entries": n, "range_entries": n,
                "files": len(path_size), "chunked_files": len(path_size),
                "chunks": sum(map(len, chunks.values()))}
        self.assertEqual({k: plan[k] for k in want}, want, plan)
        self.assertEqual(plan["objects"], plan["chunks"], plan)
        self.assertEqual(plan["tiers"][0]["objects"], plan["objects"], plan)  # all in RAM
        return plan, chunks

    def epochs_without_backing(self, mnt, epochs, read_epoch):
        """Waits for the tier fill, then reads every epoch with read_epoch(entries): the tiers
        hold every planned chunk, so backing_bytes stays what the fill read."""
        plan = self.plan(mnt)
        st = self.wait_tiers(mnt, plan)
        fill = st["backing_bytes"]
        self.assertEqual(fill, plan["bytes"], st)  # each chunk read once, by the fill
        for i, entries in enumerate(epochs):
            read_epoch(entries)
            after = self.stats(mnt)
            self.assertEqual(after["backing_bytes"], fill, f"epoch {i}: {after}")
            self.assertGreater(after["chunk_reads"], st["chunk_reads"], f"epoch {i}: {after}")
            self.assertEqual(after["unplanned_chunk_reads"], 0, after)
            st = after
        self.assertEqual(st["errors"]["stale"] + st["errors"]["fetch"], 0, st)

    def test_tfrecord_records_in_shuffled_order(self):
        rng = random.Random(6403)
        ds = self.new_dataset()
        payloads = [rng.randbytes(rng.randint(1000, 6000)) for _ in range(700)]
        rel = "train.tfrecord"
        recs = clairfs.write_tfrecord(os.path.join(ds, rel), payloads)
        size = os.path.getsize(os.path.join(ds, rel))
        self.assertEqual(clairfs.tfrecord_records(os.path.join(ds, rel)), recs)
        mnt = self.mount_at(ds, chunk_config(ram="8MiB"))
        epochs = [[(rel, r.offset, r.length) for r in shuffled(recs, rng)] for _ in range(3)]
        self.assertEqual(clairfs.register_records(mnt, epochs), 3 * len(recs))
        plan, chunks = self.check_range_plan(mnt, epochs, {rel: size})
        self.assertEqual(len(chunks[rel]), chunk_count(size))
        self.assertEqual(plan["bytes"], size, plan)

        index = {r.offset: r.name for r in recs}

        def read_epoch(entries):
            with open(os.path.join(mnt, rel), "rb") as f:
                for _, off, length in entries:
                    data = clairfs.read_tfrecord_at(f, off)  # both CRCs checked
                    i = index[off]
                    self.assertEqual(len(data) + 16, length)
                    self.assertTrue(data == payloads[i], f"record {i} at {off}: wrong bytes")
        self.epochs_without_backing(mnt, epochs, read_epoch)

    def test_tar_members_in_shuffled_order(self):
        rng = random.Random(6404)
        ds = self.new_dataset()
        os.makedirs(os.path.join(ds, "shards"))
        contents = {}
        for s in range(2):
            rel = f"shards/shard-{s}.tar"
            with tarfile.open(os.path.join(ds, rel), "w", format=tarfile.PAX_FORMAT) as tf:
                d = tarfile.TarInfo(f"s{s}")
                d.type = tarfile.DIRTYPE
                tf.addfile(d)
                for i in range(60):
                    # A long name needs a PAX header: the data starts after it.
                    name = f"s{s}/{i:03d}" + ("-" + "x" * 120 if i % 17 == 0 else "") + ".bin"
                    data = b"" if i == 30 else rng.randbytes(rng.randint(500, 20_000))
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
                    contents[(rel, name)] = data
        members = {}
        for s in range(2):
            rel = f"shards/shard-{s}.tar"
            recs = clairfs.tar_members(os.path.join(ds, rel))
            self.assertEqual(len(recs), 59)  # the directory and the empty member have no range
            members.update({(rel, r.name): r for r in recs})
        sizes = {rel: os.path.getsize(os.path.join(ds, rel)) for rel, _ in members}
        mnt = self.mount_at(ds, chunk_config(ram="8MiB"))
        epochs = [[(rel, r.offset, r.length) for (rel, _), r in shuffled(members.items(), rng)]
                  for _ in range(2)]
        names = {(rel, r.offset): name for (rel, name), r in members.items()}
        clairfs.register_records(mnt, epochs)
        self.check_range_plan(mnt, epochs, sizes)
        self.wait_tiers(mnt, self.plan(mnt))
        for entries in epochs:
            shards = {rel: tarfile.open(os.path.join(mnt, rel), "r:") for rel in sizes}
            try:
                index = {rel: {m.name: m for m in tf.getmembers()} for rel, tf in shards.items()}
                for rel, off, length in entries:
                    m = index[rel][names[(rel, off)]]
                    self.assertEqual((m.offset_data, m.size), (off, length), m.name)
                    data = shards[rel].extractfile(m).read()
                    self.assertTrue(data == contents[(rel, m.name)], f"{rel}: {m.name}")
                empty = [m for m in index["shards/shard-0.tar"].values() if m.size == 0 and m.isreg()]
                self.assertEqual(shards["shards/shard-0.tar"].extractfile(empty[0]).read(), b"")
            finally:
                for tf in shards.values():
                    tf.close()
        st = self.stats(mnt)
        self.assertGreater(st["chunk_reads"], 0, st)
        self.assertEqual(st["errors"]["stale"] + st["errors"]["fetch"], 0, st)

    @unittest.skipIf(lmdb is None, "python3-lmdb is not installed")
    def test_lmdb_values_through_the_mapped_data_file(self):
        rng = random.Random(6405)
        ds = self.new_dataset()
        env_path = os.path.join(ds, "train.lmdb")
        values = {}
        for i in range(1200):
            big = rng.random() < 0.15  # > 4 KiB: stored in overflow pages
            values[b"%08d" % rng.randrange(10**8)] = rng.randbytes(
                rng.randint(4500, 20_000) if big else rng.randint(50, 3000))
        env = lmdb.open(env_path, map_size=64 << 20)
        with env.begin(write=True) as txn:
            for k, v in values.items():
                txn.put(k, v)
        env.close()
        data_rel = os.path.relpath(clairfs.lmdb_data_path(env_path), ds)
        size = os.path.getsize(os.path.join(ds, data_rel))
        self.assertGreater(size, 3 << 20)
        self.assertTrue(any(len(v) > 4096 for v in values.values()))
        orders = [shuffled(values, rng) for _ in range(2)]
        epochs = []
        for order in orders:
            recs = clairfs.lmdb_records(env_path, order)
            self.assertEqual([r.name for r in recs], order)
            epochs.append([(data_rel, r.offset, r.length) for r in recs])
        mnt = self.mount_at(ds, chunk_config(ram="16MiB"))
        clairfs.register_records(mnt, epochs)
        _, chunks = self.check_range_plan(mnt, epochs, {data_rel: size})
        # The values' pages lie in every chunk of data.mdb: LMDB's other reads (meta and
        # branch pages) and the kernel's read-ahead stay inside planned chunks.
        self.assertEqual(chunks[data_rel], set(range(chunk_count(size))), size)

        def read_epoch(entries):
            order = orders[epochs.index(entries)]
            env = lmdb.open(os.path.join(mnt, "train.lmdb"), readonly=True, lock=False)
            try:
                with env.begin(buffers=True) as txn:
                    for k in order:
                        v = txn.get(k)
                        self.assertIsNotNone(v, k)
                        self.assertTrue(bytes(v) == values[k], f"key {k!r}: wrong value")
            finally:
                env.close()
        self.epochs_without_backing(mnt, epochs, read_epoch)
