// BackingWatch on a real directory and a real inotify instance: changes made to the backing
// tree become the invalidations that make the kernel ask again.
#include "fs/fresh/backing_watch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using Scope = BackingWatch::Scope;

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

// Node ids by path (as an inode table would give them), and what the watch asked for.
class Recorder {
 public:
  void Name(const std::string& path, uint64_t id) {
    std::lock_guard lock(mu_);
    ids_[path] = id;
  }
  BackingWatch::Hooks Hooks() {
    BackingWatch::Hooks h;
    h.node_of = [this](const std::string& path) -> uint64_t {
      std::lock_guard lock(mu_);
      auto it = ids_.find(path);
      return it == ids_.end() ? 0 : it->second;
    };
    h.invalidate = [this](uint64_t id, Scope scope) {
      std::lock_guard lock(mu_);
      nodes_.insert({id, scope});
      cv_.notify_all();
    };
    h.invalidate_entry = [this](uint64_t parent, const std::string& name) {
      std::lock_guard lock(mu_);
      entries_.insert({parent, name});
      cv_.notify_all();
    };
    h.changed = [this](const std::string& path) {
      std::lock_guard lock(mu_);
      changed_.insert(path);
      cv_.notify_all();
    };
    h.lost = [this] {
      std::lock_guard lock(mu_);
      ++lost_;
      cv_.notify_all();
    };
    return h;
  }
  bool AwaitChanged(const std::string& path) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return changed_.count(path) > 0; });
  }
  bool AwaitLost() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return lost_ > 0; });
  }
  // Waits (10 s at most) until node id was invalidated with scope.
  bool AwaitNode(uint64_t id, Scope scope) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return nodes_.count({id, scope}) > 0; });
  }
  bool AwaitEntry(uint64_t parent, const std::string& name) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return entries_.count({parent, name}) > 0; });
  }
  bool AnyEntryOf(uint64_t parent) {
    std::lock_guard lock(mu_);
    for (const auto& e : entries_) {
      if (e.first == parent) return true;
    }
    return false;
  }
  bool Changed(const std::string& path) {
    std::lock_guard lock(mu_);
    return changed_.count(path) > 0;
  }
  void Clear() {
    std::lock_guard lock(mu_);
    nodes_.clear();
    entries_.clear();
    changed_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, uint64_t> ids_;
  std::set<std::pair<uint64_t, Scope>> nodes_;
  std::set<std::pair<uint64_t, std::string>> entries_;
  std::set<std::string> changed_;
  int lost_ = 0;
};

class BackingWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(mkdir(Path("d").c_str(), 0755), 0);
    WriteFile(Path("d/a"), "alpha");
    WriteFile(Path("top"), "top");
    auto b = PosixBacking::Open(tmp_.path());
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backing_ = std::move(b.value());
    rec_.Name("d/a", 100);
    rec_.Name("top", 101);
    rec_.Name("d", 50);
    auto w = BackingWatch::Start(*backing_, rec_.Hooks(), 1, counters_);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    watch_ = std::move(w.value());
  }
  void TearDown() override {
    if (watch_) watch_->Stop();
  }
  std::string Path(const std::string& rel) const { return tmp_.path() + "/" + rel; }
  // Watch() returns before the watch exists: waits until the thread has added n.
  void AwaitWatches(uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (watch_->counters().directories.load() < n) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "watches not added";
      std::this_thread::sleep_for(1ms);
    }
  }

  testing::TempDir tmp_;
  std::unique_ptr<PosixBacking> backing_;
  Recorder rec_;
  WatchStats counters_;
  std::unique_ptr<BackingWatch> watch_;
};

TEST_F(BackingWatchTest, ChmodOfAFileDropsItsAttributes) {
  AwaitWatches(1);  // the root
  ASSERT_EQ(chmod(Path("top").c_str(), 0600), 0);
  EXPECT_TRUE(rec_.AwaitNode(101, Scope::kAttributes));
}

TEST_F(BackingWatchTest, OnlyLookedUpDirectoriesAreWatched) {
  AwaitWatches(1);
  watch_->Watch(50, "d");
  watch_->Watch(50, "d");  // asked once
  AwaitWatches(2);
  ASSERT_EQ(chmod(Path("d/a").c_str(), 0600), 0);
  EXPECT_TRUE(rec_.AwaitNode(100, Scope::kAttributes));
  // The directory's own mode: an event of the directory (in it, and in its parent).
  ASSERT_EQ(chmod(Path("d").c_str(), 0700), 0);
  EXPECT_TRUE(rec_.AwaitNode(50, Scope::kAttributes));
  EXPECT_EQ(watch_->counters().directories.load(), 2u);
}

TEST_F(BackingWatchTest, AWriteDropsPagesAndANewNameDropsTheEntry) {
  watch_->Watch(50, "d");
  AwaitWatches(2);
  WriteFile(Path("d/a"), "changed");
  EXPECT_TRUE(rec_.AwaitNode(100, Scope::kContents));
  // Replaced under its name (a rename over it): the kernel's entry goes, whatever node it had.
  WriteFile(Path("d/a.tmp"), "new");
  ASSERT_EQ(std::rename(Path("d/a.tmp").c_str(), Path("d/a").c_str()), 0);
  EXPECT_TRUE(rec_.AwaitEntry(50, "a"));
  ASSERT_EQ(unlink(Path("top").c_str()), 0);
  EXPECT_TRUE(rec_.AwaitEntry(1, "top"));
}

TEST_F(BackingWatchTest, ADirectoryThatGoesIsForgottenAndAskedForAgain) {
  watch_->Watch(50, "d");
  AwaitWatches(2);
  ASSERT_EQ(unlink(Path("d/a").c_str()), 0);
  ASSERT_EQ(rmdir(Path("d").c_str()), 0);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (watch_->counters().directories.load() != 1) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the removed watch is still counted";
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(mkdir(Path("d").c_str(), 0755), 0);
  watch_->Watch(50, "d");  // the same id, a new directory: watched again
  AwaitWatches(2);
  WriteFile(Path("d/b"), "b");
  EXPECT_TRUE(rec_.AwaitEntry(50, "b"));
}

// What StatAhead relies on: a change made through this node is queued before the call that
// made it returns, so Quiet() is false from then until the changed hook named its path.
TEST_F(BackingWatchTest, QuietOnlyOnceEveryQueuedChangeWasReported) {
  watch_->Watch(50, "d");
  AwaitWatches(2);
  EXPECT_TRUE(watch_->Watched(""));
  EXPECT_TRUE(watch_->Watched("d"));
  EXPECT_FALSE(watch_->Watched("e"));
  for (int i = 0; i < 50; ++i) {
    rec_.Clear();
    WriteFile(Path("d/a"), "changed " + std::to_string(i));
    // Right after the write: either not quiet, or the change was already reported.
    const bool quiet = watch_->Quiet();
    EXPECT_TRUE(!quiet || rec_.Changed("d/a")) << i;
    EXPECT_TRUE(rec_.AwaitChanged("d/a")) << i;
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!watch_->Quiet()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "never quiet";
    std::this_thread::sleep_for(1ms);
  }
}

// The batch path's readers reach no kernel node: their directories are watched by path, and
// a change in them reaches the stats made ahead (changed) without touching any kernel node.
TEST_F(BackingWatchTest, ADirectoryWatchedByPathReportsChangesButNoNode) {
  AwaitWatches(1);
  watch_->WatchPath("d");
  watch_->WatchPath("d");  // asked once
  AwaitWatches(2);
  EXPECT_TRUE(watch_->Watched("d"));
  WriteFile(Path("d/new"), "new");
  EXPECT_TRUE(rec_.AwaitChanged("d/new"));
  // The file's own node (100, named by node_of) hears of its change, applied after the new
  // name's event; the directory has no node, so no entry of it is dropped.
  WriteFile(Path("d/a"), "changed");
  EXPECT_TRUE(rec_.AwaitChanged("d/a"));
  EXPECT_TRUE(rec_.AwaitNode(100, Scope::kContents));
  EXPECT_FALSE(rec_.AnyEntryOf(0));
}

// A LOOKUP's watch takes over one asked for by path; one asked for by path never takes over
// a LOOKUP's, whose events the kernel must hear of.
TEST_F(BackingWatchTest, ALookedUpDirectoryKeepsItsNodeWhateverTheOrder) {
  AwaitWatches(1);
  watch_->Watch(50, "d");
  watch_->WatchPath("d");  // asked while the node's watch may still be pending
  AwaitWatches(2);
  WriteFile(Path("d/b"), "b");
  EXPECT_TRUE(rec_.AwaitEntry(50, "b"));
  EXPECT_EQ(watch_->counters().directories.load(), 2u);
}

TEST_F(BackingWatchTest, ADirectoryRenamedIsNoLongerWatchedUnderItsPath) {
  watch_->Watch(50, "d");
  AwaitWatches(2);
  ASSERT_EQ(std::rename(Path("d").c_str(), Path("e").c_str()), 0);
  EXPECT_TRUE(rec_.AwaitLost());
  EXPECT_TRUE(rec_.AwaitChanged("d"));
  EXPECT_FALSE(watch_->Watched("d"));
  EXPECT_FALSE(watch_->Watched("e"));  // watched again only once looked up there
  EXPECT_TRUE(watch_->Watched(""));
}

TEST_F(BackingWatchTest, NeverQuietOnceStopped) {
  AwaitWatches(1);
  watch_->Stop();
  EXPECT_FALSE(watch_->Quiet());
}

TEST_F(BackingWatchTest, APathThatIsNotADirectoryIsRefusedAndCounted) {
  AwaitWatches(1);
  watch_->Watch(101, "top");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (watch_->counters().refused.load() < 1) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(watch_->counters().directories.load(), 1u);
}

TEST_F(BackingWatchTest, StopsPromptlyAndWatchAfterStopIsIgnored) {
  AwaitWatches(1);
  const auto start = std::chrono::steady_clock::now();
  watch_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  watch_->Watch(50, "d");  // no thread any more: nothing happens, nothing waits
  watch_->Stop();
}

}  // namespace
}  // namespace clairfs
