#include "cache/object.h"

#include <sys/mman.h>
#include <xxhash.h>

#include <new>

namespace clairfs {

void BlobRelease::operator()(char* p) const {
  if (mapped != 0) {
    munmap(p, mapped);
  } else {
    delete[] p;
  }
}

std::shared_ptr<Blob> Blob::Allocate(size_t n, FileVersion version) {
  auto blob = std::make_shared<Blob>();
  if (n >= kMappedFrom) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    blob->data_ = std::unique_ptr<char[], BlobRelease>(static_cast<char*>(p), BlobRelease{n});
  } else {
    blob->data_ = std::unique_ptr<char[], BlobRelease>(new char[n == 0 ? 1 : n], BlobRelease{0});
  }
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
