#include "cache/base/blob_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <iterator>

#include "cache/base/sanitizers.h"

namespace clairfs {
namespace {

// ThreadSanitizer intercepts mmap and munmap but not mremap: pages mremap moves keep no history
// at their new address, which keeps that of whatever was mapped there before, so a recycled
// mapping would be reported racing with another mapping's last reader. Under it a mapping too
// small is replaced (unmapped, then a new one mapped) instead of grown in place.
constexpr bool kGrowInPlace = !kThreadSanitizer;

}  // namespace

BlobMemory& BlobMemory::Instance() {
  static BlobMemory* instance = new BlobMemory;  // never destroyed: see the header
  return *instance;
}

size_t BlobMemory::MappedSize(size_t n) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

void* BlobMemory::Get(size_t n) {
  const size_t want = MappedSize(n);
  void* p = nullptr;
  size_t have = 0;
  {
    std::lock_guard lock(mu_);
    auto it = free_.lower_bound(want);
    if (it == free_.end() && !free_.empty()) it = std::prev(free_.end());
    if (it != free_.end()) {
      have = it->first;
      p = it->second;
      kept_ -= have;
      free_.erase(it);
    }
  }
  if (p == nullptr) {
    p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  if (have > want) {
    munmap(static_cast<char*>(p) + want, have - want);  // the tail goes back to the system
    return p;
  }
  if (have < want && !kGrowInPlace) {
    munmap(p, have);
    p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  if (have < want) {
    void* grown = mremap(p, have, want, MREMAP_MAYMOVE);
    if (grown == MAP_FAILED) {
      munmap(p, have);
      return nullptr;
    }
    return grown;
  }
  return p;
}

void BlobMemory::Put(void* p, size_t size) {
  {
    std::lock_guard lock(mu_);
    if (kept_ + size <= kKeptBytes && free_.size() < kKeptMappings) {
      free_.emplace(size, p);
      kept_ += size;
      return;
    }
  }
  munmap(p, size);
}

size_t BlobMemory::kept_bytes() const {
  std::lock_guard lock(mu_);
  return kept_;
}

}  // namespace clairfs
