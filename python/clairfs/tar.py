"""Tar shards: the byte range of each member's data in an uncompressed tar archive.

Standard library only (tarfile reads the headers, never the members' data).

    tar_members(path) -> [Record(member name, offset, length)], in archive order

ValueError for what has no trustworthy ranges (compressed, malformed, truncated, sparse).
clairfs.records turns the ranges into a manifest.
"""
import os
import tarfile

from ._record import Record

__all__ = ["tar_members"]


def tar_members(path):
    """The data of each regular-file member of the uncompressed tar archive at `path`.

    Returns a list of Record(member name, offset, length), in archive order: the member's
    data starts at `offset` (after its headers, PAX/GNU long-name headers included) and is
    `length` = its size bytes long. Members of size 0 are left out (a range cannot be empty),
    and so are directories, links (a hard link's data is the earlier member's), devices and
    FIFOs. A name appearing twice is listed twice, as the archive holds it twice.

    Raises ValueError for a compressed or malformed archive, a sparse member (its bytes in
    the archive are not its contents) and a member whose data runs past the end of the file.
    """
    size = os.stat(path).st_size
    try:
        tf = tarfile.open(path, mode="r:")
    except tarfile.ReadError as e:
        raise ValueError(f"{path}: not an uncompressed tar archive ({e}); a compressed one "
                         f"has no per-member byte ranges") from None
    out = []
    with tf:
        try:
            for m in tf:
                if m.issparse():
                    raise ValueError(f"{path}: member {m.name!r} is sparse: its data in the "
                                     f"archive is not its contents, so it has no byte range")
                if not m.isreg() or m.size == 0:
                    continue
                if m.offset_data + m.size > size:
                    raise ValueError(f"{path}: member {m.name!r} runs past the end of the "
                                     f"archive (truncated)")
                out.append(Record(m.name, m.offset_data, m.size))
        except tarfile.TarError as e:
            raise ValueError(f"{path}: malformed tar archive ({e})") from None
    return out
