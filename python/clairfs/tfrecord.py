"""TFRecord files without TensorFlow: where each record lies, a writer and a small reader.

Standard library only. The format (as TensorFlow writes a TFRecord file, stated in full), per
record, nothing between records and no file header:

    uint64 length (little-endian)
    uint32 masked CRC-32C of those 8 length bytes
    length bytes of data
    uint32 masked CRC-32C of the data

where masked(crc) = ((crc >> 15 | crc << 17) + 0xa282ead8) mod 2**32 and CRC-32C is the
Castagnoli CRC (reflected polynomial 0x82F63B78), computed here in pure Python from a table.
Compressed TFRecord files (GZIP/ZLIB options) have no per-record byte ranges and are refused.
"""
import os
import struct

from ._record import Record

_HEAD = struct.Struct("<QI")
_FOOT = struct.Struct("<I")
FRAMING = _HEAD.size + _FOOT.size  # 16 bytes around each record's data
_MASK_DELTA = 0xA282EAD8


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return tuple(t)


_TABLE = _table()


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli) of `data` (bytes-like), continuing from `crc`; crc32c(b"123456789")
    is 0xE3069283. Pure Python: about 10 MB/s, so verifying big files takes a while."""
    t = _TABLE
    c = crc ^ 0xFFFFFFFF
    for b in bytes(data):
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    """The CRC TFRecord stores: crc32c(data) rotated right by 15 bits plus 0xa282ead8."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def write_tfrecord(path, payloads):
    """Writes the bytes-like `payloads` as a TFRecord file at `path` (replacing it).

    Returns the list of Record(index, offset, length) of what was written, as
    tfrecord_records(path) would return it.
    """
    out = []
    offset = 0
    with open(path, "wb") as f:
        for i, data in enumerate(payloads):
            data = bytes(data)
            head = struct.pack("<Q", len(data))
            f.write(head + _FOOT.pack(masked_crc32c(head)) + data + _FOOT.pack(masked_crc32c(data)))
            out.append(Record(i, offset, FRAMING + len(data)))
            offset += FRAMING + len(data)
    return out


def _header(f, offset, where):
    # (data length) of the record whose header is at `offset`; checks the length's CRC.
    f.seek(offset)
    raw = f.read(_HEAD.size)
    if len(raw) != _HEAD.size:
        raise ValueError(f"{where}: truncated record header at byte {offset}")
    length, crc = _HEAD.unpack(raw)
    if masked_crc32c(raw[:8]) != crc:
        raise ValueError(f"{where}: bad length CRC at byte {offset}: not a TFRecord file, "
                         f"a compressed one, or corrupt")
    return length


def read_tfrecord_at(f, offset):
    """The data of the record whose framing starts at byte `offset` of the binary file `f`.

    Both CRCs are checked: ValueError for a corrupt or truncated record, or an offset that is
    not the start of one.
    """
    where = getattr(f, "name", "TFRecord file")
    length = _header(f, offset, where)
    raw = f.read(length + _FOOT.size)
    if len(raw) != length + _FOOT.size:
        raise ValueError(f"{where}: record at byte {offset} is truncated ({length} bytes announced)")
    data = raw[:length]
    if masked_crc32c(data) != _FOOT.unpack_from(raw, length)[0]:
        raise ValueError(f"{where}: bad data CRC in the record at byte {offset}")
    return data


def iter_tfrecord(path):
    """Yields the data of each record of the TFRecord file at `path`, in order, CRCs checked."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        offset = 0
        while offset < size:
            data = read_tfrecord_at(f, offset)
            yield data
            offset += FRAMING + len(data)


def tfrecord_records(path, verify=False):
    """Where each record of the TFRecord file at `path` lies: a list of Record(index, offset,
    length), the range covering the whole framed record (16 + data length bytes), in order.

    Only the record headers are read (and their length CRC checked), so this is fast on big
    files; verify=True also reads every record's data and checks its CRC. Raises ValueError
    for a file that is not a sequence of whole TFRecord records (bad length CRC, truncated
    last record), so a range is never returned for bytes that are not a record.
    """
    out = []
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        offset = 0
        while offset < size:
            if verify:
                length = len(read_tfrecord_at(f, offset))
            else:
                length = _header(f, offset, path)
            end = offset + FRAMING + length
            if end > size:
                raise ValueError(f"{path}: record {len(out)} at byte {offset} is truncated "
                                 f"({length} bytes announced, the file ends at {size})")
            out.append(Record(len(out), offset, FRAMING + length))
            offset = end
    return out
