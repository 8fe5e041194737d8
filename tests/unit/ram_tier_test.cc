#include "cache/tiers/ram_tier.h"

#include <gtest/gtest.h>

#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using testing::MakeBlob;

TEST(RamTier, GetReturnsOnlyTheMatchingVersion) {
  RamTier t("ram", 100);
  ASSERT_TRUE(t.Put("a", MakeBlob("hello", 7)).ok());
  auto hit = t.Get("a", {5, 7});
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(std::string(hit.value()->data(), 5), "hello");
  EXPECT_EQ(t.Get("a", {5, 8}).status().code(), Code::kNotFound);  // other mtime
  EXPECT_EQ(t.Get("a", {6, 7}).status().code(), Code::kNotFound);  // other size
  EXPECT_EQ(t.Get("b", {5, 7}).status().code(), Code::kNotFound);
  EXPECT_TRUE(t.Contains("a", {5, 7}));
  EXPECT_FALSE(t.Contains("a", {5, 8}));
}

TEST(RamTier, CapacityIsEnforcedInBytesOfData) {
  RamTier t("ram", 10);
  ASSERT_TRUE(t.Put("a", MakeBlob("123456")).ok());
  EXPECT_EQ(t.Put("b", MakeBlob("12345")).code(), Code::kNoSpace);
  ASSERT_TRUE(t.Put("b", MakeBlob("1234")).ok());
  EXPECT_EQ(t.used_bytes(), 10u);
  // Replacing an object accounts for the one it replaces.
  ASSERT_TRUE(t.Put("a", MakeBlob("12")).ok());
  EXPECT_EQ(t.used_bytes(), 6u);
  EXPECT_EQ(t.Put("c", MakeBlob("12345")).code(), Code::kNoSpace);
}

TEST(RamTier, RetainOnlyEvictsAndFreesCapacity) {
  RamTier t("ram", 10);
  ASSERT_TRUE(t.Put("a", MakeBlob("12345")).ok());
  ASSERT_TRUE(t.Put("b", MakeBlob("12345")).ok());
  t.RetainOnly([](std::string_view p, const FileVersion&) { return p == "b"; });
  EXPECT_FALSE(t.Contains("a", {5, 1}));
  EXPECT_TRUE(t.Contains("b", {5, 1}));
  EXPECT_EQ(t.used_bytes(), 5u);
  EXPECT_TRUE(t.Put("c", MakeBlob("12345")).ok());
}

TEST(Blob, VerifyDetectsChangedBytes) {
  auto b = Blob::Allocate(4, {4, 1});
  std::copy_n("abcd", 4, b->mutable_data());
  b->Seal();
  EXPECT_TRUE(b->Verify());
  b->mutable_data()[2] = 'X';
  EXPECT_FALSE(b->Verify());
}

}  // namespace
}  // namespace clairfs
