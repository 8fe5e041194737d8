// StatAhead over a real backing store (a temporary directory): stats made ahead stand for a
// read's own only under the rules of cache/backing/stat_ahead.h.
#include "cache/backing/stat_ahead.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using namespace std::chrono_literals;

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

class StatAheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(mkdir(Path("w").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(Path("u").c_str(), 0755), 0);
    for (const char* p : {"w/a", "w/b", "w/c", "u/x"}) WriteFile(Path(p), p);
    ASSERT_EQ(mkdir(Path("w/dir").c_str(), 0755), 0);
    auto b = PosixBacking::Open(tmp_.path());
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backing_ = std::move(b.value());
    upcoming_ = {"w/a", "w/b", "w/missing", "w/dir", "u/x"};
    watched_ = {"w"};
  }
  void TearDown() override {
    if (ahead_) ahead_->Stop();
  }
  std::string Path(const std::string& rel) const { return tmp_.path() + "/" + rel; }

  void Start(std::chrono::milliseconds max_age = 60s, bool fresh = false) {
    StatAhead::Hooks h;
    h.upcoming = [this](const UpcomingQuery& query, UpcomingFiles* files) {
      std::lock_guard lock(mu_);
      asked_.push_back(query.ahead);
      // A "plan" of the paths in upcoming_, each one's object id its index.
      files->plan = plan_;
      for (uint32_t i = 0; i < upcoming_.size(); ++i) {
        if (query.skip && query.skip(plan_, i)) {
          ++files->skipped;
          ++skips_;
          continue;
        }
        files->paths.push_back(upcoming_[i]);
        files->ids.push_back(i);
      }
      if (query.posts) files->posts.insert(files->posts.end(), posts_.begin(), posts_.end());
    };
    if (signposts_) {
      h.post = [this](const std::string& path) {
        if (post_hook_) post_hook_(path);
        std::lock_guard lock(mu_);
        ++posted_[path];
        return held_.count(path) > 0;
      };
      h.sighted = [this](const Signpost& post) {
        std::lock_guard lock(mu_);
        sighted_.push_back(post.path);
        return true;
      };
    }
    h.watched = [this](const std::string& dir) {
      if (during_batch_) during_batch_();
      std::lock_guard lock(mu_);
      return watched_.count(dir) > 0;
    };
    h.quiet = [this] { return quiet_.load(); };
    StatAheadOptions o;
    o.ahead = 4;
    o.max_reach = max_reach_;
    o.max_age = max_age;
    if (fresh) {  // as ClairFs sets it unless fuse.immutable
      o.check_all = true;
      o.idle_refresh = max_age;
      h.checked = [this](const std::vector<std::string>& paths, const std::vector<struct stat>&,
                         const std::vector<Status>& status) {
        std::lock_guard lock(mu_);
        for (size_t i = 0; i < paths.size() && i < status.size(); ++i) {
          if (status[i].ok()) ++checked_[paths[i]];
        }
      };
    }
    ahead_ = std::make_unique<StatAhead>(*backing_, h, o, counters_);
    ahead_->Start();
  }
  // What the last batch asked Hooks::upcoming for.
  uint32_t LastAsked() {
    std::lock_guard lock(mu_);
    return asked_.back();
  }
  // Starts with signposts: a first batch, then a reader at a post in the last quarter of its
  // stretch (w/a), then at the next batch's (w/b). What upcoming was asked for after each.
  std::vector<uint32_t> ReachTwoLastPosts(std::chrono::milliseconds max_age) {
    signposts_ = true;
    posts_ = {Signpost{"w/a", 1, 5, true}};
    held_ = {"w/a", "w/b"};
    Start(max_age, true);
    std::vector<uint32_t> asked;
    AwaitBatch();
    asked.push_back(LastAsked());
    {
      std::lock_guard lock(mu_);
      posts_ = {Signpost{"w/b", 1, 9, true}};
    }
    EXPECT_TRUE(ahead_->Reached("w/a"));  // waits for a batch begun after it
    asked.push_back(LastAsked());
    EXPECT_TRUE(testing::WaitFor([&] { return ahead_->Armed(); }, 10s));
    EXPECT_TRUE(ahead_->Reached("w/b"));
    asked.push_back(LastAsked());
    return asked;
  }
  // Wakes the thread (a read consumed a position) and waits for its batch to land.
  void AwaitBatch() {
    const uint64_t batches = counters_.batches.load();
    ahead_->Consumed();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (counters_.batches.load() == batches) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no batch";
      std::this_thread::sleep_for(1ms);
    }
  }

  // Reads until the thread makes a batch (Consumed wakes it after kMinReads reads at most),
  // and waits for that batch to land (each stats w/missing at least, so each is counted).
  void AwaitNextBatch() {
    const uint64_t batches = counters_.batches.load();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (counters_.batches.load() == batches) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no batch";
      ahead_->Consumed();
      std::this_thread::sleep_for(1ms);
    }
  }
  size_t Skips() {
    std::lock_guard lock(mu_);
    return skips_;
  }

  testing::TempDir tmp_;
  std::unique_ptr<PosixBacking> backing_;
  std::mutex mu_;
  std::vector<std::string> upcoming_;
  uint64_t plan_ = 1;  // bumped with upcoming_'s paths (object ids are indices into it)
  size_t skips_ = 0;   // positions the batches' skip vouched for
  std::set<std::string> watched_;
  std::atomic<bool> quiet_{true};
  std::map<std::string, int> checked_;  // fresh: stats passed to Hooks::checked, per path
  std::function<void()> during_batch_;
  // Signposts: what upcoming offers, the files the "kernel" holds, what was posted and sighted.
  bool signposts_ = false;
  uint32_t max_reach_ = 2048;  // StatAheadOptions::max_reach
  std::vector<Signpost> posts_;
  std::set<std::string> held_;
  std::map<std::string, int> posted_;
  std::vector<std::string> sighted_;
  std::function<void(const std::string&)> post_hook_;  // called as the kernel is told
  std::vector<uint32_t> asked_;                        // the `ahead` of each upcoming call
  Stats::StatAhead counters_;
  std::unique_ptr<StatAhead> ahead_;
};

TEST_F(StatAheadTest, RecordsTheRegularFilesOfWatchedDirectoriesOnly) {
  Start();
  struct stat st;
  EXPECT_FALSE(ahead_->Recent("w/a", &st));  // nothing statted yet
  AwaitBatch();
  struct stat real;
  ASSERT_EQ(lstat(Path("w/a").c_str(), &real), 0);
  ASSERT_TRUE(ahead_->Recent("w/a", &st));
  EXPECT_EQ(st.st_ino, real.st_ino);
  EXPECT_EQ(st.st_size, real.st_size);
  EXPECT_EQ(st.st_mtim.tv_nsec, real.st_mtim.tv_nsec);
  EXPECT_TRUE(ahead_->Recent("w/b", &st));
  EXPECT_FALSE(ahead_->Recent("w/c", &st));        // not upcoming
  EXPECT_FALSE(ahead_->Recent("w/missing", &st));  // a failed stat records nothing
  EXPECT_FALSE(ahead_->Recent("w/dir", &st));      // not a regular file
  EXPECT_FALSE(ahead_->Recent("u/x", &st));        // its directory is not watched
  EXPECT_EQ(ahead_->size(), 2u);
  EXPECT_EQ(counters_.stats.load(), 2u);
  EXPECT_EQ(counters_.used.load(), 2u);
  EXPECT_EQ(counters_.missed.load(), 5u);
}

// The directories of the upcoming paths are recorded too (once each per batch, vouched when
// the directory they lie in is watched), for the lookups below them; not counted as files.
TEST_F(StatAheadTest, RecordsTheDirectoriesOfUpcomingPathsOnce) {
  watched_ = {"", "w"};
  Start();
  AwaitBatch();
  struct stat st, real;
  ASSERT_TRUE(ahead_->Recent("w", &st, /*count=*/false));
  ASSERT_EQ(lstat(Path("w").c_str(), &real), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_ino, real.st_ino);
  EXPECT_TRUE(ahead_->Recent("u", &st, false));                    // "" is watched: vouched for
  EXPECT_FALSE(ahead_->Recent("u/x", &st, false));                 // "u" is not
  EXPECT_EQ(ahead_->size(), 4u);                                   // w/a, w/b, w, u
  EXPECT_EQ(counters_.stats.load(), 2u);                           // files only
  EXPECT_EQ(counters_.used.load() + counters_.missed.load(), 0u);  // uncounted questions
  ahead_->Forget("w/c");  // a name of w changed: so did w's own attributes
  EXPECT_FALSE(ahead_->Recent("w", &st, false));
  EXPECT_TRUE(ahead_->Recent("w/a", &st, false));
}

// A batch walks past the files it recorded less than max_age / 2 ago without looking them up
// (Hooks::upcoming's skip, by object id); after a reported change, or for another plan, it
// looks at every file again.
TEST_F(StatAheadTest, RecordedFilesAreSkippedUntilAChangeOrAnotherPlan) {
  Start();  // max_age 60 s: nothing ages here
  AwaitBatch();
  EXPECT_EQ(counters_.stats.load(), 2u);  // w/a, w/b
  EXPECT_EQ(Skips(), 0u);
  AwaitNextBatch();
  EXPECT_EQ(Skips(), 2u);  // w/a and w/b: neither looked up nor statted
  EXPECT_EQ(counters_.stats.load(), 2u);
  struct stat st;
  EXPECT_TRUE(ahead_->Recent("w/a", &st, false));
  ahead_->Forget("w/a");
  AwaitNextBatch();  // every file looked at again: w/a statted anew, w/b's record young
  EXPECT_EQ(Skips(), 2u);
  EXPECT_EQ(counters_.stats.load(), 3u);
  EXPECT_TRUE(ahead_->Recent("w/a", &st, false));
  AwaitNextBatch();
  EXPECT_EQ(Skips(), 4u);  // both again, w/b by its record's time
  {
    std::lock_guard lock(mu_);
    ++plan_;  // another plan: its ids name other files
  }
  AwaitNextBatch();
  EXPECT_EQ(Skips(), 4u);
  EXPECT_EQ(counters_.stats.load(), 3u);  // looked up: the records are young, no stat
  AwaitNextBatch();
  EXPECT_EQ(Skips(), 6u);
}

// A file recorded max_age / 2 ago or more is statted again, as without the skip.
TEST_F(StatAheadTest, ASkippedFileIsStattedAgainOnceHalfMaxAgeOld) {
  Start(200ms);
  AwaitBatch();
  EXPECT_EQ(counters_.stats.load(), 2u);
  const auto recorded = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      testing::WaitFor([&] { return std::chrono::steady_clock::now() - recorded > 110ms; }, 10s));
  AwaitNextBatch();
  EXPECT_EQ(Skips(), 0u);
  EXPECT_EQ(counters_.stats.load(), 4u);
}

// Freshness: every upcoming path is statted again about every max_age without any read
// waking the thread, also in a directory not watched (whose stats Recent never uses).
TEST_F(StatAheadTest, FreshRestatsEveryUpcomingPathWithoutReads) {
  Start(100ms, true);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (checked_["u/x"] >= 3 && checked_["w/a"] >= 3) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no refresh without reads";
    std::this_thread::sleep_for(1ms);
  }
  struct stat st;
  EXPECT_FALSE(ahead_->Recent("u/x", &st));  // statted, but no watch vouches for it
}

TEST_F(StatAheadTest, NothingIsUsedWhileAReportedChangeIsNotApplied) {
  Start();
  AwaitBatch();
  struct stat st;
  ASSERT_TRUE(ahead_->Recent("w/a", &st));
  quiet_ = false;  // the watch has an event queued or is applying it
  EXPECT_FALSE(ahead_->Recent("w/a", &st));
  quiet_ = true;
  ahead_->Forget("w/a");  // ... and the event named w/a
  EXPECT_FALSE(ahead_->Recent("w/a", &st));
  EXPECT_TRUE(ahead_->Recent("w/b", &st));
  ahead_->ForgetAll();  // events lost
  EXPECT_FALSE(ahead_->Recent("w/b", &st));
}

TEST_F(StatAheadTest, ABatchDuringWhichAChangeWasReportedIsDropped) {
  Start();
  // Reported between the batch's start and its stats: the stat may predate the change's
  // report, so none of the batch is kept.
  std::atomic<bool> once{false};
  during_batch_ = [&] {
    if (!once.exchange(true)) ahead_->Forget("w/elsewhere");
  };
  const uint64_t batches = counters_.batches.load();
  ahead_->Consumed();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (counters_.batches.load() == batches) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(1ms);
  }
  ahead_->Stop();  // the batch has ended: what it stored (nothing) stays
  struct stat st;
  EXPECT_EQ(ahead_->size(), 0u);
  EXPECT_EQ(counters_.stats.load(), 0u);
  EXPECT_FALSE(ahead_->Recent("w/a", &st));
}

TEST_F(StatAheadTest, AStatOlderThanMaxAgeIsNotUsed) {
  Start(100ms);
  AwaitBatch();
  struct stat st;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (ahead_->Recent("w/a", &st)) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "a stale stat is still used";
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_GT(counters_.missed.load(), 0u);
}

TEST_F(StatAheadTest, IdleWithoutReadsAndAnsweringNothingOnceStopped) {
  Start();
  // No read consumed anything: no batch is made.
  EXPECT_EQ(counters_.batches.load(), 0u);
  AwaitBatch();
  ahead_->Stop();
  struct stat st;
  EXPECT_FALSE(ahead_->Recent("w/a", &st));
  ahead_->Stop();  // idempotent
}

TEST_F(StatAheadTest, ConcurrentReadsForgetsAndBatchesStayConsistent) {
  Start(5ms);
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      struct stat st;
      for (int i = 0; i < 3000; ++i) {
        ahead_->Consumed();
        if (ahead_->Recent(i % 2 ? "w/a" : "w/b", &st)) {
          EXPECT_TRUE(S_ISREG(st.st_mode));
        }
        if ((i + t) % 97 == 0) ahead_->Forget("w/a");
        if ((i + t) % 997 == 0) ahead_->ForgetAll();
      }
    });
  }
  for (auto& th : threads) th.join();
  ahead_->Stop();
  EXPECT_LE(ahead_->size(), 2u);
}

// Signposts: armed once their batch is done, only for files the kernel holds; a reader
// reaching one moves the stream (sighted) and wakes a batch; one in the last quarter of its
// stretch waits for a batch begun after it, at most max_age.
TEST_F(StatAheadTest, SignpostsAreArmedAfterTheirBatchAndReachedOnce) {
  signposts_ = true;
  posts_ = {Signpost{"w/a", 1, 5, false}, Signpost{"w/b", 1, 7, true},
            Signpost{"w/c", 1, 9, false}};
  held_ = {"w/a", "w/b"};  // w/c: the kernel holds no attributes of it
  Start(60s, true);
  EXPECT_FALSE(ahead_->Armed());
  AwaitBatch();
  EXPECT_TRUE(ahead_->Armed());
  EXPECT_EQ(counters_.signposts.load(), 2u);
  EXPECT_FALSE(ahead_->Reached("w/c"));  // not armed
  EXPECT_FALSE(ahead_->Reached("u/x"));  // not a post
  {
    std::lock_guard lock(mu_);
    posts_.clear();  // the next batches pick none
  }
  // Not in the last quarter: returns at once, and a batch follows.
  uint64_t batches = counters_.batches.load();
  EXPECT_TRUE(ahead_->Reached("w/a"));
  EXPECT_FALSE(ahead_->Reached("w/a"));  // reached once
  ASSERT_TRUE(testing::WaitFor([&] { return counters_.batches.load() > batches; }, 10s))
      << "no batch";
  // In the last quarter: a batch begun after the call has landed when it returns.
  batches = counters_.batches.load();
  EXPECT_TRUE(ahead_->Reached("w/b"));
  EXPECT_GT(counters_.batches.load(), batches);
  EXPECT_FALSE(ahead_->Armed());
  EXPECT_EQ(counters_.reached.load(), 2u);
  std::lock_guard lock(mu_);
  EXPECT_EQ(sighted_, (std::vector<std::string>{"w/a", "w/b"}));
  EXPECT_EQ(posted_["w/a"], 1);  // armed posts are not dropped again by later batches
}

// The kernel drops a post's attributes and a reader at that file asks for them at once, before
// the batch's other posts are dropped: the post is armed already when the reader's getattr
// arrives, so the reader is seen there (were it armed after the drop, the reader would take
// fresh attributes and pass it unseen, as would every reader after it).
TEST_F(StatAheadTest, APostIsArmedBeforeTheKernelIsTold) {
  signposts_ = true;
  posts_ = {Signpost{"w/a", 1, 5, false}, Signpost{"w/b", 1, 6, false},
            Signpost{"w/c", 1, 7, false}};
  held_ = {"w/a", "w/b"};  // w/c: the kernel holds no attributes of it
  std::mutex seen_mu;
  std::map<std::string, bool> seen;  // what a reader's getattr right after the drop found
  // Runs on StatAhead's thread, which Reached may not wait on (these posts are not in their
  // stretch's last quarter, so it does not).
  post_hook_ = [&](const std::string& path) {
    {
      std::lock_guard lock(mu_);
      posts_.clear();  // the batches the reaches wake pick none
    }
    const bool found = ahead_->Reached(path);
    std::lock_guard lock(seen_mu);
    seen[path] = found;
  };
  Start(60s, true);
  AwaitBatch();
  ahead_->Stop();  // no batch runs the hook after this
  std::lock_guard lock(seen_mu);
  EXPECT_EQ(seen, (std::map<std::string, bool>{{"w/a", true}, {"w/b", true}, {"w/c", true}}));
  EXPECT_EQ(counters_.reached.load(), 3u);
  EXPECT_EQ(counters_.signposts.load(), 2u);  // w/c was reached, then found unheld
  EXPECT_FALSE(ahead_->Armed());
}

// A reader that waits at a post reads faster than stretches are statted: the batches after it
// ask for twice the positions (at most max_reach); batches of the idle refresh halve them
// again, down to `ahead`.
TEST_F(StatAheadTest, AWaitAtASignpostLengthensTheStretchUntilTheReadersPause) {
  // ahead 4, max_reach 2048; an idle refresh every second
  EXPECT_EQ(ReachTwoLastPosts(1s), (std::vector<uint32_t>{4, 8, 16}));
  // Nothing reached any more: the idle refresh halves it back to 4.
  ASSERT_TRUE(testing::WaitFor([&] { return LastAsked() == 4u; }, 10s)) << LastAsked();
}

// The stretch grows no further than max_reach: a longer one would be statted before readers
// at these rates reach it, and its stats would age out unused.
TEST_F(StatAheadTest, TheStretchGrowsNoFurtherThanMaxReach) {
  max_reach_ = 8;
  EXPECT_EQ(ReachTwoLastPosts(60s), (std::vector<uint32_t>{4, 8, 8}));
}

// A reader waiting at a post in the last quarter arms that stretch's spares past it (its
// stream's only, those the kernel holds), so the other readers stop at the next file they
// reach; a post not in the last quarter arms none.
TEST_F(StatAheadTest, AWaitArmsTheSparesOfItsStretch) {
  signposts_ = true;
  posts_ = {Signpost{"w/a", 1, 5, false},        Signpost{"w/b", 1, 7, true},
            Signpost{"u/x", 1, 6, true, true},   Signpost{"w/c", 1, 8, true, true},
            Signpost{"w/dir", 1, 9, true, true}, Signpost{"w/other", 2, 9, true, true}};
  held_ = {"w/a", "w/b", "w/c", "u/x", "w/other"};  // w/dir: the kernel holds none of it
  Start(60s, true);
  AwaitBatch();
  {
    std::lock_guard lock(mu_);
    // The next batches (the reach of w/a wakes one, which may run before w/b is reached) offer
    // the same spares again but no post.
    std::erase_if(posts_, [](const Signpost& p) { return !p.spare; });
    EXPECT_EQ(posted_.count("w/c"), 0u);  // spares wait
  }
  EXPECT_EQ(counters_.signposts.load(), 2u);
  EXPECT_TRUE(ahead_->Reached("w/a"));   // not in the last quarter: no spare armed
  EXPECT_FALSE(ahead_->Reached("w/c"));  // not armed
  EXPECT_TRUE(ahead_->Reached("w/b"));   // waits: the spares past 7 of stream 1 armed
  {
    std::lock_guard lock(mu_);
    EXPECT_EQ(posted_["w/c"], 1);
    EXPECT_EQ(posted_.count("u/x"), 0u);      // before the post
    EXPECT_EQ(posted_.count("w/other"), 0u);  // another stream's
  }
  EXPECT_EQ(counters_.signposts.load(), 3u);
  EXPECT_TRUE(ahead_->Reached("w/c"));  // the next reader stops there
  EXPECT_FALSE(ahead_->Armed());
}

TEST_F(StatAheadTest, AReaderAtASignpostWaitsABoundedTime) {
  signposts_ = true;
  posts_ = {Signpost{"w/a", 1, 5, true}};
  held_ = {"w/a"};
  // Once `stall` is set, batches stall (a store that hangs) until the gate opens.
  std::atomic<bool> stall{false};
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool open = false;
  during_batch_ = [&] {
    if (!stall.load()) return;
    std::unique_lock lock(gate_mu);
    gate_cv.wait(lock, [&] { return open; });
  };
  Start(200ms, true);
  AwaitBatch();
  ASSERT_TRUE(ahead_->Armed());
  stall = true;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(ahead_->Reached("w/a"));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, StatAhead::kWaitAges * 200ms - 50ms);
  EXPECT_LT(waited, 10s);
  {
    std::lock_guard lock(gate_mu);
    open = true;
  }
  gate_cv.notify_all();
  ahead_->Stop();  // before the gate's state goes: the thread's batches use it
}

}  // namespace
}  // namespace clairfs
