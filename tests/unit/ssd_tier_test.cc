#include "cache/ssd_tier.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using testing::MakeBlob;

class SsdTierTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }
  std::unique_ptr<SsdTier> Open(uint64_t capacity) {
    auto t = SsdTier::Open("ssd", dir_, capacity);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? std::move(t.value()) : nullptr;
  }
  testing::TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

TEST_F(SsdTierTest, PutGetVersionAndDelete) {
  auto t = Open(1 << 20);
  const std::string data(100'000, 'x');
  ASSERT_TRUE(t->Put("a/b.jpg", MakeBlob(data, 7)).ok());
  auto r = t->Get("a/b.jpg", {data.size(), 7});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(std::string(r.value()->data(), r.value()->size()), data);
  EXPECT_TRUE(r.value()->Verify());
  EXPECT_TRUE(t->Contains("a/b.jpg", {data.size(), 7}));
  EXPECT_EQ(t->Get("missing", {1, 1}).status().code(), Code::kNotFound);
  // A changed backing file (other mtime) is a miss, and the stale copy is gone for good.
  EXPECT_EQ(t->Get("a/b.jpg", {data.size(), 8}).status().code(), Code::kNotFound);
  EXPECT_FALSE(t->Contains("a/b.jpg", {data.size(), 7}));
  EXPECT_EQ(t->used_bytes(), 0u);
}

TEST_F(SsdTierTest, CapacityIsBytesOfDataStored) {
  auto t = Open(250);
  ASSERT_TRUE(t->Put("a", MakeBlob(std::string(100, 'a'))).ok());
  ASSERT_TRUE(t->Put("b", MakeBlob(std::string(100, 'b'))).ok());
  EXPECT_EQ(t->Put("c", MakeBlob(std::string(100, 'c'))).code(), Code::kNoSpace);
  EXPECT_EQ(t->used_bytes(), 200u);
  ASSERT_TRUE(t->Put("a", MakeBlob(std::string(150, 'A'))).ok());  // replacement
  EXPECT_EQ(t->used_bytes(), 250u);
  t->RetainOnly([](std::string_view p, const FileVersion&) { return p == "b"; });
  EXPECT_EQ(t->used_bytes(), 100u);
  EXPECT_EQ(t->objects(), 1u);
  EXPECT_TRUE(t->Put("c", MakeBlob(std::string(100, 'c'))).ok());
}

TEST_F(SsdTierTest, ObjectsSurviveReopen) {
  {
    auto t = Open(1 << 20);
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(
          t->Put("f" + std::to_string(i), MakeBlob(std::string(1000 + i, 'a' + i % 26), i)).ok());
    }
  }
  auto t = Open(1 << 20);
  EXPECT_EQ(t->objects(), 50u);
  uint64_t expected = 0;
  for (int i = 0; i < 50; ++i) expected += 1000 + i;
  EXPECT_EQ(t->used_bytes(), expected);
  auto r = t->Get("f7", {1007, 7});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::string(r.value()->data(), 1007), std::string(1007, 'h'));
}

TEST_F(SsdTierTest, CorruptionIsDetectedDeletedAndCounted) {
  auto t = Open(1 << 20);
  ASSERT_TRUE(t->Put("good", MakeBlob(std::string(5000, 'g'))).ok());
  ASSERT_TRUE(t->Put("bad", MakeBlob(std::string(5000, 'b'))).ok());
  ASSERT_TRUE(t->CorruptForTest("bad").ok());
  auto r = t->Get("bad", {5000, 1});
  EXPECT_EQ(r.status().code(), Code::kCorruption);
  EXPECT_EQ(t->corruptions(), 1u);
  EXPECT_FALSE(t->Contains("bad", {5000, 1}));
  EXPECT_EQ(t->used_bytes(), 5000u);
  EXPECT_TRUE(t->Get("good", {5000, 1}).ok());
}

TEST_F(SsdTierTest, SecondOpenOfTheSameDirectoryIsRefused) {
  auto t = Open(1 << 20);
  auto second = SsdTier::Open("ssd", dir_, 1 << 20);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use"), std::string::npos)
      << second.status().message();
}

}  // namespace
}  // namespace clairfs
