// OpenContents and ReadContents: what an open file of the mount holds (as Bind bound it,
// fs/core/dataset_core.h), and the bytes a READ of it gets: from a whole object (a cached file),
// from the backing descriptor, or chunk by chunk through the prefetcher for a chunked file
// (cache/base/object_key.h). No FUSE types: the adapter (fs/clairfs_fs.cc) turns a ReadReply
// into one fuse_reply_iov.
#pragma once

#include <sys/stat.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/backing/backing.h"
#include "cache/base/object.h"
#include "cache/base/stats.h"
#include "cache/base/status.h"
#include "cache/prefetch/prefetcher.h"
#include "fs/core/fs_stats.h"

namespace clairfs {

// The contents side of an open file. Exactly one of: blob (whole contents), chunked (reads go
// through Prefetcher::ReadChunk; store serves the chunks the plan does not name), or store
// alone (read directly). Every call on store runs on the backing's I/O threads, with their
// deadline, and its last reference closes it there (cache/backing/store_handle.h).
struct OpenContents {
  BlobPtr blob;
  StoreHandlePtr store;
  bool chunked = false;
  bool dataset = false;     // a dataset file: its reads count in bytes_read
  std::string path;         // a dataset file: its canonical path
  uint64_t chunk_size = 0;  // chunked: the file's grid when opened
  struct stat st {};        // a dataset file: the stat of the file opened, at open
  // A dataset file opened with a handle (per_open mode): the version its READs serve, and
  // InodeTable::OpenedVersionChanges() as of its open (DatasetCore::MarkServed).
  FileVersion version{};
  uint64_t opened_changes = 0;
  // chunked: the chunk (its offset) the last read began in; a read beginning in another one
  // is an object read (consumes it in the plan). Reads of one handle may run concurrently.
  std::atomic<uint64_t> last_chunk{UINT64_MAX};
  // chunked: the last cached chunk read and its offset, so that the many reads inside one
  // chunk (128 KiB each from the kernel) do not each look it up in the tiers (an SSD tier
  // would read and verify the whole chunk every time). chunk_mu is a leaf.
  std::mutex chunk_mu;
  BlobPtr chunk;
  uint64_t chunk_offset = 0;

  OpenContents() = default;
  OpenContents(const OpenContents&) = delete;
  OpenContents& operator=(const OpenContents&) = delete;
};

// The pieces of one READ's reply, kept alive until the reply was sent.
struct ReadReply {
  std::vector<iovec> iov;
  std::vector<BlobPtr> blobs;                 // the blobs iov points into
  std::vector<std::unique_ptr<char[]>> bufs;  // the buffers of direct reads iov points into
  size_t bytes = 0;
};

// True iff s says that the bytes are not of the version bound any more.
inline bool NotTheVersionBound(const Status& s) { return s.code() == Code::kStale; }

// The bytes [off, off+size) of f (fewer only at the end of the version opened), into *out, all
// of that version. Errors: the backing store's (direct reads through backing, kTimedOut at its
// deadline), a chunk fetch's, or kStale (ESTALE) when bytes read from the backing
// descriptor are not of the version opened (PosixBacking::ReadAtVersion: truncated, changed,
// or a write may be in progress), counted in errors.stale: never a short read or a mix.
// first: bytes [off, off+size) read with f's open (DatasetCore::Bind), used instead of a read
// of f's descriptor when present.
Status ReadContents(OpenContents& f, const PosixBacking& backing, Prefetcher& prefetcher,
                    Stats& stats, FsStats& fs_stats, size_t size, uint64_t off, ReadReply* out,
                    std::optional<PosixBacking::Bytes>* first = nullptr);

}  // namespace clairfs
