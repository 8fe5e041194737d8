#include "cache/base/object.h"

#include <xxhash.h>

#include <new>

#include "cache/base/blob_memory.h"
#include "cache/base/sanitizers.h"

namespace clairfs {

void BlobRelease::operator()(char* p) const {
  if (mapped != 0) {
    BlobMemory::Instance().Put(p, mapped);
  } else {
    delete[] p;
  }
}

namespace {
// Under AddressSanitizer every object comes from new[], whose redzones catch a read past an
// object's end; mappings would hide it up to the page's end.
constexpr bool kMapObjects = !kAddressSanitizer;
}  // namespace

std::shared_ptr<Blob> Blob::Allocate(size_t n, FileVersion version) {
  auto blob = std::make_shared<Blob>();
  if (kMapObjects && n >= BlobMemory::kMappedFrom) {
    void* p = BlobMemory::Instance().Get(n);
    if (p == nullptr) throw std::bad_alloc();
    blob->data_ = std::unique_ptr<char[], BlobRelease>(static_cast<char*>(p),
                                                       BlobRelease{BlobMemory::MappedSize(n)});
  } else {
    blob->data_ = std::unique_ptr<char[], BlobRelease>(new char[n == 0 ? 1 : n], BlobRelease{0});
  }
  blob->size_ = n;
  blob->version_ = version;
  return blob;
}

FileVersion VersionOf(const struct stat& st) {
  return {
      static_cast<uint64_t>(st.st_size), st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
      st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec, static_cast<uint64_t>(st.st_ino)};
}

uint64_t HashBytes(const void* data, size_t n) { return XXH3_64bits(data, n); }

void Blob::Seal() { hash_ = HashBytes(data_.get(), size_); }

bool Blob::Verify() const { return HashBytes(data_.get(), size_) == hash_; }

}  // namespace clairfs
