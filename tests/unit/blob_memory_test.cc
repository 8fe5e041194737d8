// BlobMemory: mapped storage for file data, recycled up to a bound, returned beyond it.
#include "cache/base/blob_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cache/base/object.h"

namespace clairfs {
namespace {

constexpr size_t kMiB = 1 << 20;

TEST(BlobMemory, FreedMappingsAreReusedAndTheRestReturned) {
  BlobMemory m;
  void* a = m.Get(4 * kMiB);
  ASSERT_NE(a, nullptr);
  std::memset(a, 1, 4 * kMiB);
  m.Put(a, BlobMemory::MappedSize(4 * kMiB));
  EXPECT_EQ(m.kept_bytes(), 4 * kMiB);
  // The next object of that size or smaller gets the same (already faulted) pages.
  void* b = m.Get(3 * kMiB + 5);
  EXPECT_EQ(b, a);
  EXPECT_EQ(m.kept_bytes(), 0u);
  std::memset(b, 2, 3 * kMiB + 5);
  m.Put(b, BlobMemory::MappedSize(3 * kMiB + 5));
  // A larger one grows the largest kept mapping; all of it is writable.
  void* c = m.Get(6 * kMiB);
  ASSERT_NE(c, nullptr);
  std::memset(c, 3, 6 * kMiB);
  EXPECT_EQ(m.kept_bytes(), 0u);
  m.Put(c, BlobMemory::MappedSize(6 * kMiB));
  // Never more than kKeptBytes kept: what is freed beyond goes back to the system.
  std::vector<void*> many;
  for (int i = 0; i < 8; ++i) many.push_back(m.Get(4 * kMiB));
  for (void* p : many) m.Put(p, BlobMemory::MappedSize(4 * kMiB));
  EXPECT_LE(m.kept_bytes(), BlobMemory::kKeptBytes);
  EXPECT_GE(m.kept_bytes(), BlobMemory::kKeptBytes - 6 * kMiB);
}

TEST(BlobMemory, BlobsOfEverySizeHoldTheirBytes) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4096}, BlobMemory::kMappedFrom - 1,
                   BlobMemory::kMappedFrom, size_t{1} << 20, (size_t{4} << 20) + 3}) {
    std::vector<std::shared_ptr<Blob>> blobs;
    for (int i = 0; i < 3; ++i) {
      auto blob = Blob::Allocate(n, FileVersion{n, 1, 2, 3});
      std::memset(blob->mutable_data(), 'a' + i, n);
      blob->Seal();
      blobs.push_back(blob);
    }
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(blobs[i]->size(), n);
      EXPECT_TRUE(blobs[i]->Verify());
      if (n > 0) {
        EXPECT_EQ(blobs[i]->data()[n - 1], 'a' + i);
      }
    }
  }
}

}  // namespace
}  // namespace clairfs
