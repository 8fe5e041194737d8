// The offline check of an SSD cache (cache/tiers/ssd_verify.h), the cache's description
// (cache/tiers/cache_info.h) and what a failed start takes back (SsdTier::Abandon), on a real
// SsdTier in a temporary directory.
#include "cache/tiers/ssd_verify.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>

#include "cache/base/object_key.h"
#include "cache/tiers/cache_info.h"
#include "cache/tiers/ssd_tier.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

namespace fs = std::filesystem;
using testing::MakeBlob;

class SsdVerifyTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()); }
  std::unique_ptr<SsdTier> Open(const std::string& dir, const std::string& dataset = "") {
    SsdOptions o;
    o.dataset = dataset;
    auto t = SsdTier::Open("ssd", dir, 16 << 20, o);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? std::move(t.value()) : nullptr;
  }
  // A cache of four objects (one a chunk of a larger file): 10000 + 20000 + 30000 + 4096 bytes.
  void Fill() {
    auto t = Open(dir_, "/data/set");
    ASSERT_TRUE(t);
    ASSERT_TRUE(t->Put("a.bin", MakeBlob(std::string(10000, 'a'))).ok());
    ASSERT_TRUE(t->Put("b.bin", MakeBlob(std::string(20000, 'b'))).ok());
    ASSERT_TRUE(t->Put("c.bin", MakeBlob(std::string(30000, 'c'))).ok());
    auto chunk = Blob::Allocate(4096, {1 << 20, 5});
    std::fill(chunk->mutable_data(), chunk->mutable_data() + 4096, 'd');
    chunk->Seal();
    ASSERT_TRUE(t->Put(ObjectKey("big.bin", {8192, 4096}), chunk).ok());
  }
  testing::TempDir tmp_;
  const std::string dir_ = tmp_.path() + "/cache";
};

TEST_F(SsdVerifyTest, ASoundCacheIsClean) {
  Fill();
  auto r = VerifySsdCache(dir_, VerifyMode::kCheck);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r.value().clean());
  EXPECT_EQ(r.value().objects, 4u);
  EXPECT_EQ(r.value().bytes, 10000u + 20000u + 30000u + 4096u);
  EXPECT_EQ(r.value().deleted, 0u);
}

TEST_F(SsdVerifyTest, FindsACorruptObjectAndRepairDeletesOnlyIt) {
  Fill();
  {
    auto t = Open(dir_);
    ASSERT_TRUE(t);
    ASSERT_TRUE(t->CorruptForTest("b.bin").ok());
    ASSERT_TRUE(t->CorruptForTest(ObjectKey("big.bin", {8192, 4096})).ok());
  }
  for (int pass = 0; pass < 2; ++pass) {  // a check changes nothing: the same twice
    auto r = VerifySsdCache(dir_, VerifyMode::kCheck);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r.value().objects, 4u);
    ASSERT_EQ(r.value().bad.size(), 2u);
    EXPECT_EQ(r.value().bad[0].key, "b.bin");
    EXPECT_NE(r.value().bad[0].reason.find("checksum"), std::string::npos);
    EXPECT_EQ(r.value().bad[1].key, DisplayKey(ObjectKey("big.bin", {8192, 4096})));
    EXPECT_EQ(r.value().deleted, 0u);
  }
  auto repaired = VerifySsdCache(dir_, VerifyMode::kRepair);
  ASSERT_TRUE(repaired.ok()) << repaired.status().message();
  EXPECT_EQ(repaired.value().deleted, 2u);
  auto after = VerifySsdCache(dir_, VerifyMode::kCheck);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after.value().clean());
  EXPECT_EQ(after.value().objects, 2u);
  auto t = Open(dir_);
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->Contains("b.bin", {20000, 1}));
  auto a = t->Get("a.bin", {10000, 1});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(std::string(a.value()->data(), a.value()->size()), std::string(10000, 'a'));
}

TEST_F(SsdVerifyTest, RefusesACacheInUse) {
  Fill();
  auto t = Open(dir_);
  ASSERT_TRUE(t);
  auto r = VerifySsdCache(dir_, VerifyMode::kCheck);
  EXPECT_EQ(r.status().code(), Code::kLocked);
  EXPECT_EQ(LockHolderPid(dir_), static_cast<long>(getpid()));
}

TEST_F(SsdVerifyTest, RefusesWhatIsNotACacheAndLeavesItAlone) {
  const std::string plain = tmp_.path() + "/plain";
  ASSERT_TRUE(fs::create_directory(plain));
  EXPECT_EQ(VerifySsdCache(plain, VerifyMode::kCheck).status().code(), Code::kNotFound);
  EXPECT_TRUE(fs::is_empty(plain));  // no lock file made in it
  EXPECT_EQ(VerifySsdCache(tmp_.path() + "/missing", VerifyMode::kCheck).status().code(),
            Code::kNotFound);
  Fill();
  const std::string link = tmp_.path() + "/link";
  ASSERT_EQ(symlink(dir_.c_str(), link.c_str()), 0);
  EXPECT_EQ(VerifySsdCache(link, VerifyMode::kCheck).status().code(), Code::kNotFound);
}

TEST_F(SsdVerifyTest, TheTierDescribesItsDirectory) {
  const int64_t before = static_cast<int64_t>(std::time(nullptr));
  Fill();
  auto info = ReadCacheInfo(dir_);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info.value().dataset, "/data/set");
  EXPECT_EQ(info.value().version, CLAIRFS_VERSION);
  EXPECT_GE(info.value().created, before);
  EXPECT_GE(info.value().last_used, info.value().created);
  struct stat st;
  ASSERT_EQ(lstat((dir_ + "/" + kCacheInfoFile).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // A later use keeps the creation time; one that does not name the dataset keeps it too.
  CacheInfo old = info.value();
  old.created = 1000;
  old.last_used = 2000;
  ASSERT_TRUE(WriteCacheInfo(dir_, old).ok());
  { auto t = Open(dir_); }
  info = ReadCacheInfo(dir_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info.value().created, 1000);
  EXPECT_GE(info.value().last_used, before);
  EXPECT_EQ(info.value().dataset, "/data/set");
}

TEST_F(SsdVerifyTest, TheDescriptionIsNeverWrittenThroughALink) {
  ASSERT_TRUE(fs::create_directory(dir_));
  const std::string victim = tmp_.path() + "/victim";
  { std::ofstream(victim) << "keep"; }
  ASSERT_EQ(symlink(victim.c_str(), (dir_ + "/" + kCacheInfoFile).c_str()), 0);
  ASSERT_EQ(symlink(victim.c_str(), (dir_ + "/.clairfs.json.tmp").c_str()), 0);
  EXPECT_EQ(ReadCacheInfo(dir_).status().code(), Code::kCorruption);
  ASSERT_TRUE(WriteCacheInfo(dir_, {"/d", "v", 1, 2}).ok());
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "keep");
  auto info = ReadCacheInfo(dir_);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info.value().dataset, "/d");
}

TEST_F(SsdVerifyTest, AbandonRemovesOnlyWhatTheStartMade) {
  const std::string deep = tmp_.path() + "/x/y/cache";
  auto t = Open(deep);
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->created_dir());
  ASSERT_TRUE(t->Put("a", MakeBlob("abc")).ok());
  t->Abandon();
  t.reset();
  EXPECT_FALSE(fs::exists(tmp_.path() + "/x"));
  EXPECT_TRUE(fs::exists(tmp_.path()));

  Fill();  // an existing cache: never removed
  t = Open(dir_);
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->created_dir());
  t->Abandon();
  t.reset();
  auto r = VerifySsdCache(dir_, VerifyMode::kCheck);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().objects, 4u);
}

}  // namespace
}  // namespace clairfs
