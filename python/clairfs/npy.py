""".npy arrays, as numpy.save writes them: the byte range of each row along axis 0.

Standard library only: the header (magic, format version 1.0, 2.0 or 3.0, its dict read with
ast.literal_eval) is parsed here, NumPy is not needed.

    npy_records(path) -> [Record(row index, offset, row bytes)], in order
    npy_header(path)  -> (data offset, descr, fortran_order, shape, itemsize)

ValueError for a malformed header and for arrays without contiguous fixed-size rows (see
npy_records). clairfs.records turns the ranges into a manifest.
"""
import ast
import os
import re
import struct

from ._record import Record

__all__ = ["npy_header", "npy_records"]


_NPY_MAGIC = b"\x93NUMPY"
_TYPESTR = re.compile(r"[<>|=]?([a-zA-Z])(\d*)(\[\w+\])?")


def _itemsize(descr, path):
    # Bytes per element of a .npy 'descr': a type string or a structured dtype's field list.
    if isinstance(descr, str):
        m = _TYPESTR.fullmatch(descr)
        if not m:
            raise ValueError(f"{path}: dtype {descr!r} is not one this parser knows")
        kind = m.group(1)
        if kind == "O":
            raise ValueError(f"{path}: object arrays (pickled Python objects) have no "
                             f"fixed-size rows")
        if not m.group(2):
            raise ValueError(f"{path}: dtype {descr!r} is not one this parser knows")
        n = int(m.group(2))
        if kind == "U":
            return 4 * n
        if kind not in "biufcmMSVa" or (m.group(3) and kind not in "mM"):
            raise ValueError(f"{path}: dtype {descr!r} is not one this parser knows")
        return n
    if isinstance(descr, list) and descr:
        total = 0
        for field in descr:
            if not isinstance(field, tuple) or len(field) not in (2, 3):
                raise ValueError(f"{path}: malformed structured dtype field {field!r}")
            n = _itemsize(field[1], path)
            for dim in (field[2] if len(field) == 3 else ()):
                if not isinstance(dim, int) or dim < 0:
                    raise ValueError(f"{path}: malformed field shape in {field!r}")
                n *= dim
            total += n
        return total
    raise ValueError(f"{path}: dtype {descr!r} is not one this parser knows")


def npy_header(path):
    """(data offset, descr, fortran_order, shape, itemsize) of the .npy file at `path`,
    parsed from its header (format versions 1.0, 2.0 and 3.0). ValueError if malformed."""
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 10 or head[:6] != _NPY_MAGIC:
            raise ValueError(f"{path}: not a .npy file (no \\x93NUMPY magic)")
        major = head[6]
        if major == 1:
            hlen, start, enc = struct.unpack_from("<H", head, 8)[0], 10, "latin1"
        elif major in (2, 3) and len(head) == 12:
            hlen, start = struct.unpack_from("<I", head, 8)[0], 12
            enc = "utf8" if major == 3 else "latin1"
        else:
            raise ValueError(f"{path}: .npy format version {major}.{head[7]} is not supported")
        f.seek(start)
        raw = f.read(hlen)
    if len(raw) != hlen:
        raise ValueError(f"{path}: truncated .npy header")
    try:
        d = ast.literal_eval(raw.decode(enc))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError) as e:
        raise ValueError(f"{path}: malformed .npy header ({e})") from None
    if not isinstance(d, dict) or set(d) != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"{path}: malformed .npy header {d!r}")
    shape, fortran = d["shape"], d["fortran_order"]
    if (not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape)
            or not isinstance(fortran, bool)):
        raise ValueError(f"{path}: malformed .npy header {d!r}")
    return start + hlen, d["descr"], fortran, shape, _itemsize(d["descr"], path)


def npy_records(path):
    """One Record(row index, offset, row bytes) per row along axis 0 of the .npy array at
    `path` (as written by numpy.save), in order; [] for an array of 0 rows.

    The header is parsed here (magic, version 1/2/3, its dict via ast.literal_eval), NumPy
    is not needed. Raises ValueError for a 0-d array, rows of 0 bytes, Fortran order (a row
    is not contiguous), object arrays (elements are pickled: no fixed size), a dtype the
    parser does not know, and a file shorter than its header says.
    """
    offset, descr, fortran, shape, itemsize = npy_header(path)
    if not shape:
        raise ValueError(f"{path}: a 0-d array has no rows")
    if fortran and len(shape) > 1:
        raise ValueError(f"{path}: Fortran-order array: a row along axis 0 is not contiguous")
    row = itemsize
    for n in shape[1:]:
        row *= n
    if row == 0 and shape[0]:
        raise ValueError(f"{path}: rows of 0 bytes (shape {shape}, dtype {descr!r}) have no range")
    size = os.stat(path).st_size
    if offset + shape[0] * row > size:
        raise ValueError(f"{path}: {size} bytes, shorter than the {shape[0]} rows of {row} "
                         f"bytes its header announces after byte {offset}")
    return [Record(i, offset + i * row, row) for i in range(shape[0])]
