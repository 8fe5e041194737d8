// BlobMemory: storage for file data (Blob, cache/base/object.h) that goes back to the system when
// freed, without paying a page fault per page for every new object.
//
// Through malloc, freed file data stays in glibc's heaps (its mmap threshold rises to the
// largest block freed), so a daemon under a memory limit keeps memory it no longer uses;
// mapped on its own and unmapped at free, every new object faults in all its pages again,
// which costs more than copying the bytes (measured: docs/reliability.md, "Memory limits").
// So mappings are recycled, boundedly:
// - Get(n) returns page-aligned writable storage of at least n bytes (n >= kMappedFrom), of
//   MappedSize(n) bytes: a recycled mapping when one is free (the smallest that is large enough,
//   its tail beyond MappedSize(n) unmapped; else the largest, grown with mremap, so that only
//   the new pages fault), otherwise a new one. nullptr when the system has no memory.
// - Put(p, size) takes back what Get returned: kept for reuse while the recycled mappings hold
//   at most kKeptBytes (and kKeptMappings), else unmapped at once. So freed file data beyond
//   kKeptBytes is always returned to the system.
// Thread-safe; mu_ is a leaf. The instance lives for the whole process (never destroyed, so
// that blobs freed during exit still find it).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

namespace clairfs {

class BlobMemory {
 public:
  static constexpr size_t kMappedFrom = 64 << 10;  // smaller objects come from malloc
  static constexpr size_t kKeptBytes = 16 << 20;   // freed mappings kept for reuse, at most
  static constexpr size_t kKeptMappings = 64;

  static BlobMemory& Instance();
  static size_t MappedSize(size_t n);  // n rounded up to whole pages

  void* Get(size_t n);
  void Put(void* p, size_t size);
  size_t kept_bytes() const;

 private:
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // size -> mapping
  size_t kept_ = 0;                    // sum of free_'s sizes
};

}  // namespace clairfs
