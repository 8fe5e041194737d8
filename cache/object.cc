#include "cache/object.h"

#include <xxhash.h>

namespace clairfs {

std::shared_ptr<Blob> Blob::Allocate(size_t n, FileVersion version) {
  auto blob = std::make_shared<Blob>();
  blob->data_ = std::make_unique_for_overwrite<char[]>(n == 0 ? 1 : n);
  blob->size_ = n;
  blob->version_ = version;
  return blob;
}

FileVersion VersionOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_size), st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
          st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec, static_cast<uint64_t>(st.st_ino)};
}

uint64_t HashBytes(const void* data, size_t n) { return XXH3_64bits(data, n); }

void Blob::Seal() { hash_ = HashBytes(data_.get(), size_); }

bool Blob::Verify() const { return HashBytes(data_.get(), size_) == hash_; }

}  // namespace clairfs
