#include "fs/core/file_read.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace clairfs {

namespace {

// [off, off+n) of f's descriptor, read on an I/O thread, appended to out; the bytes read
// (fewer only at the end of the version opened). A dataset file's bytes are checked to be of
// the version opened (PosixBacking::ReadAtVersion): a read that comes back shorter than that
// version, or overlaps a change, fails with ESTALE (counted in errors.stale) instead of
// returning bytes the kernel would pad with zeros or mix with another version's.
Result<size_t> ReadDirect(const OpenContents& f, const PosixBacking& backing, Stats& stats,
                          size_t n, uint64_t off, ReadReply* out,
                          std::optional<PosixBacking::Bytes>* first = nullptr) {
  auto read = [&]() -> Result<PosixBacking::Bytes> {
    if (first && *first) {  // [off, off+n) read with the open, of the version opened
      PosixBacking::Bytes bytes = std::move(**first);
      first->reset();
      return bytes;
    }
    if (f.st.st_mode != 0) return backing.ReadAtVersion(f.store, f.path, n, off, VersionOf(f.st));
    return backing.ReadAt(f.store, f.path, n, off);
  };
  auto r = read();
  if (!r.ok()) {
    if (NotTheVersionBound(r.status())) {
      stats.errors.stale.fetch_add(1, std::memory_order_relaxed);
    }
    return r.status();
  }
  const size_t done = r.value().size;
  out->iov.push_back({r.value().data.get(), done});
  out->bufs.push_back(std::move(r.value().data));
  out->bytes += done;
  stats.backing_bytes.fetch_add(done, std::memory_order_relaxed);
  return done;
}

void AddBlob(const BlobPtr& blob, size_t begin, size_t n, ReadReply* out) {
  if (n == 0) return;
  out->iov.push_back({const_cast<char*>(blob->data()) + begin, n});
  out->blobs.push_back(blob);
  out->bytes += n;
}

Status ReadChunked(OpenContents& f, const PosixBacking& backing, Prefetcher& prefetcher,
                   Stats& stats, size_t size, uint64_t off, ReadReply* out) {
  const FileVersion version = VersionOf(f.st);
  const uint64_t end = std::min<uint64_t>(version.size, off + size);
  const uint64_t chunk = f.chunk_size ? f.chunk_size : UINT64_MAX;  // 0: never (Open sets it)
  for (uint64_t pos = off; pos < end;) {
    const uint64_t start = pos - pos % chunk;
    const bool consume = f.last_chunk.exchange(start, std::memory_order_relaxed) != start;
    if (!consume) {
      BlobPtr held;
      {
        std::lock_guard lock(f.chunk_mu);
        if (f.chunk && f.chunk_offset == start) held = f.chunk;
      }
      if (held) {  // the chunk this handle is reading: no lookup
        const uint64_t piece_end = std::min(end, start + held->size());
        AddBlob(held, pos - start, piece_end - pos, out);
        pos = piece_end;
        continue;
      }
    }
    auto r = prefetcher.ReadChunk(f.path, version, pos, consume);
    if (!r.ok()) return r.status();
    const ByteRange range = r.value().range;
    const uint64_t piece_end = range.length == 0 ? end : std::min(end, range.offset + range.length);
    if (r.value().blob) {
      AddBlob(r.value().blob, pos - range.offset, piece_end - pos, out);
      std::lock_guard lock(f.chunk_mu);
      f.chunk = r.value().blob;
      f.chunk_offset = range.offset;
    } else {
      // The chunks come from the version opened: bytes read directly are checked to be of
      // it too (end <= version.size: never fewer than asked).
      auto n = ReadDirect(f, backing, stats, piece_end - pos, pos, out);
      if (!n.ok()) return n.status();
    }
    pos = piece_end;
  }
  return Status::Ok();
}

}  // namespace

Status ReadContents(OpenContents& f, const PosixBacking& backing, Prefetcher& prefetcher,
                    Stats& stats, FsStats& fs_stats, size_t size, uint64_t off, ReadReply* out,
                    std::optional<PosixBacking::Bytes>* first) {
  Status s = Status::Ok();
  if (f.dataset) fs_stats.read_requests.fetch_add(1, std::memory_order_relaxed);
  if (f.chunked) {
    s = ReadChunked(f, backing, prefetcher, stats, size, off, out);
  } else if (!f.store) {
    const size_t total = f.blob ? f.blob->size() : 0;
    if (off < total) AddBlob(f.blob, off, std::min<uint64_t>(size, total - off), out);
  } else {
    auto n = ReadDirect(f, backing, stats, size, off, out, first);
    if (!n.ok()) return n.status();
  }
  if (s.ok() && f.dataset) fs_stats.bytes_read.fetch_add(out->bytes, std::memory_order_relaxed);
  return s;
}

}  // namespace clairfs
