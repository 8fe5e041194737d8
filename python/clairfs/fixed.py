"""Flat files of fixed-size records: record i is bytes [header + i * size, +size) of the file.

Standard library only; only the file's size is read.

    fixed_records(path, record_size, header=0, count=None) -> [Record(index, offset, size)]

ValueError when the file cannot hold the records asked for. clairfs.records turns the ranges
into a manifest; a .npy array's rows are clairfs.npy's.
"""
import os

from ._record import Record

__all__ = ["fixed_records"]


def _count(what, v, least):
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{what} must be an int, not {type(v).__name__}")
    if v < least:
        raise ValueError(f"{what} must be >= {least}, got {v}")
    return v


def fixed_records(path, record_size, header=0, count=None):
    """Records of `record_size` bytes each, back to back after a `header` of that many bytes.

    count: how many records; None for as many as fill the rest of the file, which must then
      be a whole number of records (pass count= when a trailer follows them).

    Returns a list of Record(index, header + index * record_size, record_size). Raises
    ValueError when the file is too short for them, or its body is not a multiple of
    record_size and count is None.
    """
    _count("record_size", record_size, 1)
    _count("header", header, 0)
    size = os.stat(path).st_size
    if count is None:
        body = size - header
        if body < 0:
            raise ValueError(f"{path}: {size} bytes, shorter than the {header}-byte header")
        if body % record_size:
            raise ValueError(f"{path}: {body} bytes after the header are not a whole number of "
                             f"{record_size}-byte records; pass count= if a trailer follows")
        count = body // record_size
    else:
        _count("count", count, 0)
        if header + count * record_size > size:
            raise ValueError(f"{path}: {size} bytes, too short for a {header}-byte header and "
                             f"{count} records of {record_size} bytes")
    return [Record(i, header + i * record_size, record_size) for i in range(count)]
