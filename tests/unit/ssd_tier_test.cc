#include "cache/tiers/ssd_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "cache/tiers/ssd_dir.h"
#include "conf/config.h"
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

// ---------------------------------------------------------------- the directory

namespace fs = std::filesystem;

class SsdDirTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& rel) const { return tmp_.path() + "/" + rel; }
  // The message of a refused Open of dir; "" if it was accepted.
  std::string Refusal(const std::string& dir) {
    auto t = SsdTier::Open("ssd", dir, 1 << 20);
    return t.ok() ? "" : t.status().message();
  }
  static mode_t ModeOf(const std::string& p) {
    struct stat st {};
    EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  testing::TempDir tmp_;
};

TEST_F(SsdDirTest, CreatedPrivateWithEveryMissingAncestorAndPrivateFiles) {
  const mode_t old = umask(0);  // the modes must not depend on the umask
  const std::string dir = Path("a/b/db");
  {
    auto t = SsdTier::Open("ssd", dir, 1 << 20);
    umask(old);
    ASSERT_TRUE(t.ok()) << t.status().message();
    ASSERT_TRUE(t.value()->Put("x", MakeBlob(std::string(5000, 'x'))).ok());
  }
  EXPECT_EQ(ModeOf(Path("a")), 0700u);
  EXPECT_EQ(ModeOf(Path("a/b")), 0700u);
  EXPECT_EQ(ModeOf(dir), 0700u);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(ModeOf(e.path()) & 077, 0u) << e.path() << " is open to group or others";
  }
  EXPECT_GT(files, 3u);
  EXPECT_FALSE(fs::exists(dir + "/LOG")) << "RocksDB's info log goes to the daemon's log";
}

TEST_F(SsdDirTest, ReadableByOthersIsNarrowed) {
  const std::string dir = Path("db");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  EXPECT_EQ(Refusal(dir), "");
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST_F(SsdDirTest, SymlinkIsRefused) {
  ASSERT_EQ(mkdir(Path("real").c_str(), 0700), 0);
  ASSERT_EQ(symlink(Path("real").c_str(), Path("link").c_str()), 0);
  const std::string why = Refusal(Path("link"));
  EXPECT_NE(why.find("symbolic link"), std::string::npos) << why;
  EXPECT_NE(why.find(Path("link")), std::string::npos) << why;
  EXPECT_TRUE(fs::is_empty(Path("real"))) << "nothing may be written through the link";
}

TEST_F(SsdDirTest, DirectoryOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "chown needs root";
  const std::string dir = Path("db");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chown(dir.c_str(), 12345, 12345), 0);
  const std::string why = Refusal(dir);
  EXPECT_NE(why.find("owned by uid 12345"), std::string::npos) << why;
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST_F(SsdDirTest, WritableByOthersIsRefused) {
  const std::string dir = Path("db");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  const std::string why = Refusal(dir);
  EXPECT_NE(why.find("writable by group or others"), std::string::npos) << why;
  EXPECT_NE(why.find("0777"), std::string::npos) << why;
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST_F(SsdDirTest, BadAncestorIsRefused) {
  ASSERT_EQ(mkdir(Path("open").c_str(), 0700), 0);
  ASSERT_EQ(chmod(Path("open").c_str(), 0777), 0);
  std::string why = Refusal(Path("open/x/db"));
  EXPECT_NE(why.find("ancestor '" + Path("open") + "'"), std::string::npos) << why;
  EXPECT_FALSE(fs::exists(Path("open/x"))) << "nothing is created below a bad ancestor";
  // Sticky, as /tmp and /var/tmp: others cannot replace our entries, so it is fine.
  ASSERT_EQ(chmod(Path("open").c_str(), 01777), 0);
  EXPECT_EQ(Refusal(Path("open/x/db")), "");
  if (geteuid() == 0) {
    ASSERT_EQ(mkdir(Path("theirs").c_str(), 0755), 0);
    ASSERT_EQ(chown(Path("theirs").c_str(), 12345, 12345), 0);
    why = Refusal(Path("theirs/db"));
    EXPECT_NE(why.find("owned by uid 12345"), std::string::npos) << why;
  }
}

TEST_F(SsdDirTest, SecondOpenOrPrepareFailsWhileLocked) {
  const std::string dir = Path("db");
  {
    auto first = SsdTier::Open("ssd", dir, 1 << 20);
    ASSERT_TRUE(first.ok()) << first.status().message();
    for (int i = 0; i < 2; ++i) {
      auto second =
          i == 0 ? SsdTier::Open("ssd", dir, 1 << 20) : SsdTier::Prepare("ssd", dir, 1 << 20);
      ASSERT_FALSE(second.ok());
      EXPECT_EQ(second.status().code(), Code::kLocked);
      EXPECT_NE(second.status().message().find("in use by another clairfs (pid " +
                                               std::to_string(getpid()) + ")"),
                std::string::npos)
          << second.status().message();
    }
  }
  {
    auto prepared = SsdTier::Prepare("ssd", dir, 1 << 20);  // the lock went with the tier
    ASSERT_TRUE(prepared.ok()) << prepared.status().message();
    EXPECT_FALSE(SsdTier::Open("ssd", dir, 1 << 20).ok());  // held before RocksDB opens
    ASSERT_TRUE(prepared.value()->Reopen().ok());
    EXPECT_TRUE(prepared.value()->Put("a", MakeBlob("abc")).ok());
  }
}

// Two starts racing on a directory neither finds: one of them makes it, either may win the
// lock. The loser must not take back a directory the winner uses, even if the loser made it
// (it did, with remove_all, until CI caught the winner's lock file gone).
TEST_F(SsdDirTest, LoserOfARaceLeavesTheWinnersDirectory) {
  for (int round = 0; round < 40; ++round) {
    const std::string dir = Path("race" + std::to_string(round) + "/cache/db");
    std::atomic<int> ready{0};
    Result<std::unique_ptr<SsdTier>> results[2] = {Status::Error(Code::kIoError, "not run"),
                                                   Status::Error(Code::kIoError, "not run")};
    std::vector<std::thread> starts;
    for (int i = 0; i < 2; ++i) {
      starts.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < 2) std::this_thread::yield();
        if ((round + i) % 3 == 0) std::this_thread::yield();  // vary who is first
        results[i] = SsdTier::Prepare("ssd", dir, 1 << 20);
      });
    }
    for (auto& t : starts) t.join();
    const int winners = results[0].ok() + results[1].ok();
    ASSERT_EQ(winners, 1) << "round " << round;
    const int loser = results[0].ok() ? 1 : 0;
    EXPECT_EQ(results[loser].status().code(), Code::kLocked) << results[loser].status().message();
    auto& tier = results[1 - loser].value();
    EXPECT_TRUE(fs::exists(dir + "/clairfs.lock")) << "round " << round;
    EXPECT_GT(LockHolderPid(dir), 0) << "round " << round;
    ASSERT_TRUE(tier->Reopen().ok()) << "round " << round;
    EXPECT_TRUE(tier->Put("a", MakeBlob("abc")).ok()) << "round " << round;
  }
}

// ---------------------------------------------------------------- deletes racing reads (14/12)

TEST_F(SsdTierTest, EraseAndReplaceRacingGetAreNotCorruptions) {
  auto t = Open(1ull << 30);
  constexpr int kKeys = 4;
  // Two versions per key, of one size and different bytes.
  const auto content = [](int key, int v) {
    return std::string(20'000, static_cast<char>('a' + key * 2 + v));
  };
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> hits{0}, wrong{0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    for (uint64_t i = 0; !stop.load(); ++i) {
      const int key = i % kKeys, v = (i / kKeys) % 2;
      if (i % 3 == 2) {
        t->Erase("k" + std::to_string(key));
      } else {
        (void)t->Put("k" + std::to_string(key), MakeBlob(content(key, v), 1 + v));
      }
    }
  });
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      for (uint64_t i = r; !stop.load(); ++i) {
        const int key = i % kKeys, v = (i / 7) % 2;
        auto got = t->Get("k" + std::to_string(key), {20'000, 1 + v});
        if (!got.ok()) continue;
        hits.fetch_add(1);
        if (std::string(got.value()->data(), got.value()->size()) != content(key, v)) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the duration of the run, not a sync
  stop.store(true);
  for (auto& th : threads) th.join();
  EXPECT_GT(hits.load(), 0u);
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(t->corruptions(), 0u) << "a delete or replacement racing a Get is a miss";
  EXPECT_EQ(t->Health().io_errors, 0u);
  EXPECT_EQ(t->Health().state, TierState::kOn);
}

// ---------------------------------------------------------------- a full file system (14/10)

// A real small tmpfs as the cache file system, unmounted when the test ends.
class SmallFs {
 public:
  SmallFs(const std::string& dir, const std::string& size) : dir_(dir) {
    if (mkdir(dir.c_str(), 0700) != 0) return;
    const std::string opts = "size=" + size + ",mode=0700";
    mounted_ = mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0;
  }
  ~SmallFs() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// Fills a file at path with `bytes`; false if the file system refused.
bool Fill(const std::string& path, size_t bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const std::string chunk(1 << 20, 'f');
  bool ok = true;
  for (size_t done = 0; ok && done < bytes; done += chunk.size()) {
    ok = write(fd, chunk.data(), chunk.size()) == static_cast<ssize_t>(chunk.size());
  }
  close(fd);
  return ok;
}

TEST_F(SsdTierTest, FullFileSystemSwitchesTheTierOffAndBackOn) {
  SmallFs small(dir_ + "/fs", "64m");
  if (!small.mounted()) GTEST_SKIP() << "cannot mount a tmpfs (needs root)";
  ASSERT_TRUE(Fill(dir_ + "/fs/filler", 40ull << 20));
  SsdOptions opts;
  opts.retry_after = std::chrono::milliseconds(100);
  opts.resume_free_bytes = 32ull << 20;
  auto opened = SsdTier::Open("ssd", dir_ + "/fs/db", 1ull << 30, opts);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  SsdTier& t = *opened.value();
  const auto content = [](int i) { return std::string(1 << 20, static_cast<char>('A' + i % 50)); };
  std::vector<int> stored;
  Status failure;
  for (int i = 0; i < 100 && failure.ok(); ++i) {
    failure = t.Put("f" + std::to_string(i), MakeBlob(content(i), i + 1));
    if (failure.ok()) stored.push_back(i);
  }
  ASSERT_FALSE(failure.ok()) << "the 24 MiB left never ran out";
  ASSERT_FALSE(stored.empty());
  TierHealth h = t.Health();
  EXPECT_EQ(h.state, TierState::kOff);
  EXPECT_EQ(h.disabled, 1u);
  EXPECT_GE(h.io_errors, 1u);
  EXPECT_NE(h.cause.find("No space"), std::string::npos) << h.cause;
  // Off: misses and refusals, without I/O and without counting corruption.
  const int first = stored.front();
  EXPECT_FALSE(t.Contains("f" + std::to_string(first), {1 << 20, first + 1}));
  EXPECT_EQ(t.Get("f" + std::to_string(first), {1 << 20, first + 1}).status().code(),
            Code::kNotFound);
  EXPECT_EQ(t.Put("late", MakeBlob("late")).code(), Code::kUnavailable);
  t.Erase("f" + std::to_string(stored.back()));  // applied when the tier comes back
  EXPECT_EQ(t.corruptions(), 0u);
  EXPECT_EQ(t.Health().disabled, 1u) << "switched off once, not once per refusal";

  // Space comes back: the tier reopens by itself.
  ASSERT_EQ(unlink((dir_ + "/fs/filler").c_str()), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (t.Health().state != TierState::kOn && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling, with a deadline
  }
  h = t.Health();
  ASSERT_EQ(h.state, TierState::kOn) << h.cause;
  EXPECT_EQ(h.disabled, 1u);
  EXPECT_FALSE(t.Contains("f" + std::to_string(stored.back()), {1 << 20, stored.back() + 1}));
  size_t served = 0;
  for (int i : stored) {
    auto r = t.Get("f" + std::to_string(i), {1 << 20, i + 1});
    if (!r.ok()) continue;
    ++served;
    EXPECT_TRUE(std::string(r.value()->data(), r.value()->size()) == content(i)) << i;
  }
  EXPECT_EQ(served, stored.size() - 1) << "every acknowledged object but the erased one";
  EXPECT_TRUE(t.Put("after", MakeBlob("after")).ok());
  EXPECT_EQ(t.corruptions(), 0u);
}

// ---------------------------------------------------------------- default directory names

TEST(DefaultSsdDirTest, NamedByXxh3OfThePathStableAcrossBuilds) {
  // XXH3-64 of "/data/imagenet" is a constant of the algorithm, not of this build.
  const std::string want = "imagenet-ad5557f8d0c40345";
  const std::string dir = DefaultSsdDir("/data/imagenet");
  const std::string rank = DefaultSsdDir("/data/imagenet", 3);
  if (geteuid() == 0) {
    EXPECT_EQ(dir, "/var/tmp/clairfs/" + want);
    EXPECT_EQ(rank, "/var/tmp/clairfs/" + want + "-rank3");
  } else {
    EXPECT_NE(dir.find("/clairfs/" + want), std::string::npos) << dir;
  }
  EXPECT_NE(DefaultSsdDir("/data/imagenet2"), dir);
}

}  // namespace
}  // namespace clairfs
