// Cached file contents and their identity.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace clairfs {

// Identity of a backing file version: a cached object is valid only while the backing file's
// size, mtime, ctime and inode number all still equal these. mtime can be set by any writer
// (`touch -r`, `cp -p`, `rsync -a`, `tar x`); ctime and the inode number cannot be set by user
// tools: every write, chmod, rename-over or replacement changes at least one of them. A value
// of {} means "unknown". docs/reliability.md states the rule and its limits (network file
// systems report what their client's attribute cache holds).
struct FileVersion {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t ino = 0;
  bool operator==(const FileVersion&) const = default;
};

// The version of the file whose stat is st.
FileVersion VersionOf(const struct stat& st);

// Frees a Blob's storage: BlobMemory::Put of `mapped` bytes, or delete[] when mapped is 0.
struct BlobRelease {
  size_t mapped = 0;
  void operator()(char* p) const;
};

// The whole contents of one file, immutable once published, with the xxh3-64 of its bytes.
// Storage of BlobMemory::kMappedFrom bytes or more is mapped memory (cache/base/blob_memory.h) that
// goes back to the system when the blob goes, beyond a small pool kept for reuse: through
// malloc it would stay in glibc's heaps, and a daemon under a memory limit would keep tens of
// MiB it no longer uses (docs/reliability.md, "Memory limits").
class Blob {
 public:
  // Uninitialized storage of n bytes for a producer to fill before Seal(). Throws
  // std::bad_alloc when the system has no memory for it, as new does.
  static std::shared_ptr<Blob> Allocate(size_t n, FileVersion version);
  char* mutable_data() { return data_.get(); }
  const char* data() const { return data_.get(); }
  size_t size() const { return size_; }
  const FileVersion& version() const { return version_; }
  uint64_t hash() const { return hash_; }
  // Computes the hash of the current bytes; call once after filling.
  void Seal();
  // True iff the bytes still hash to hash().
  bool Verify() const;

 private:
  std::unique_ptr<char[], BlobRelease> data_;
  size_t size_ = 0;
  FileVersion version_;
  uint64_t hash_ = 0;
};

using BlobPtr = std::shared_ptr<const Blob>;

uint64_t HashBytes(const void* data, size_t n);

}  // namespace clairfs
