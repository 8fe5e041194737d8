"""The Record type: one record of a big file, as each record-format module gives it (tar,
tfrecord, lmdb_pages, fixed, npy, hdf5) and clairfs.records registers it."""
import collections

Record = collections.namedtuple("Record", ["name", "offset", "length"])
Record.__doc__ = """One record of a big file: bytes [offset, offset + length) of it, length >= 1.

name identifies the record inside its file: a tar member's name, an LMDB key (bytes), or the
record's index (int) for TFRecord, fixed-size and .npy records."""
