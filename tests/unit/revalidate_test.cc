// Revalidator (fs/fresh/revalidate.h) over in-memory parts: a MemBacking changed "elsewhere", a
// real InodeTable holding what the kernel was given, and notifications recorded instead of sent.
#include "fs/fresh/revalidate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/mem_backing.h"

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using Change = Revalidator::Change;

class RevalidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mem_.AddFile("d/a", "aaaa", 10);
    mem_.AddFile("d/b", "bbbb", 10);
    mem_.AddFile("top", "t", 10);
    dir_ = Look("d");
    a_ = Look("d/a");
    b_ = Look("d/b");
    struct stat st;
    ASSERT_TRUE(mem_.Lstat("", &st).ok());
    inodes_.Report(InodeTable::kRootId, st);  // the root's getattr
  }
  // A lookup of path as DatasetCore::Lookup makes it: a node, and the attributes the kernel got.
  uint64_t Look(const std::string& path) {
    struct stat st;
    EXPECT_TRUE(mem_.Lstat(path, &st).ok()) << path;
    const uint64_t id = inodes_.Acquire(path, st.st_dev, st.st_ino, st.st_mode);
    inodes_.Report(id, st);
    return id;
  }
  std::unique_ptr<Revalidator> Make(std::chrono::milliseconds interval = 60s) {
    Revalidator::Notify n;
    n.inode = [this](uint64_t id, bool contents) {
      std::lock_guard lock(mu_);
      told_.push_back("inode " + std::to_string(id) + (contents ? " contents" : " attrs"));
    };
    n.entry = [this](uint64_t parent, const std::string& name) {
      std::lock_guard lock(mu_);
      told_.push_back("entry " + std::to_string(parent) + " " + name);
    };
    RevalidateOptions o;
    o.interval = interval;
    o.batch = 2;  // several batches per round even here
    return std::make_unique<Revalidator>(mem_, inodes_, n, o, counters_);
  }
  std::vector<std::string> Told() {
    std::lock_guard lock(mu_);
    auto out = told_;
    told_.clear();
    return out;
  }
  std::string Inode(uint64_t id, bool contents) {
    return "inode " + std::to_string(id) + (contents ? " contents" : " attrs");
  }

  testing::MemBacking mem_;
  InodeTable inodes_;
  FreshStats counters_;
  std::mutex mu_;
  std::vector<std::string> told_;
  uint64_t dir_ = 0, a_ = 0, b_ = 0;
};

TEST_F(RevalidateTest, CompareTellsEachKindOfChange) {
  InodeTable::Shown shown;
  ASSERT_TRUE(inodes_.ShownOf(a_, &shown));
  struct stat st;
  ASSERT_TRUE(mem_.Lstat("d/a", &st).ok());
  const Status ok = Status::Ok();
  EXPECT_EQ(Revalidator::Compare(shown, false, ok, st), Change::kNone);
  struct stat moved = st;
  moved.st_mtim.tv_nsec += 1;
  EXPECT_EQ(Revalidator::Compare(shown, false, ok, moved), Change::kContents);
  struct stat ctime = st;  // a chmod, chown or ACL change elsewhere: ctime moves
  ctime.st_ctim.tv_sec += 1;
  EXPECT_EQ(Revalidator::Compare(shown, false, ok, ctime), Change::kContents);
  struct stat mode = st;
  mode.st_mode = S_IFREG | 0600;
  EXPECT_EQ(Revalidator::Compare(shown, false, ok, mode), Change::kAttributes);
  struct stat owner = st;
  owner.st_uid = 1234;
  EXPECT_EQ(Revalidator::Compare(shown, false, ok, owner), Change::kAttributes);
  struct stat other = st;  // another object at the path (renamed over)
  other.st_ino += 1;
  EXPECT_EQ(Revalidator::Compare(shown, false, ok, other), Change::kGone);
  EXPECT_EQ(Revalidator::Compare(shown, false, Status::FromErrno(ENOENT, "d/a"), st),
            Change::kGone);
  EXPECT_EQ(Revalidator::Compare(shown, false, Status::FromErrno(ENOTDIR, "d/a"), st),
            Change::kGone);
  // No answer is no news: a stalled or dead store never drops what the kernel holds.
  EXPECT_EQ(Revalidator::Compare(shown, false, Status::Error(Code::kTimedOut, "d/a"), st),
            Change::kUnanswered);
  EXPECT_EQ(Revalidator::Compare(shown, false, Status::FromErrno(ENOTCONN, "d/a"), st),
            Change::kUnanswered);
  // Nothing known of a node: nothing to compare with.
  EXPECT_EQ(Revalidator::Compare(InodeTable::Shown{}, false, ok, moved), Change::kNone);
}

TEST_F(RevalidateTest, SweepTellsTheKernelOnceForEachChange) {
  auto r = Make();
  r->SweepOnce();
  EXPECT_TRUE(Told().empty());
  EXPECT_EQ(counters_.swept.load(), 4u);  // root, d, d/a, d/b
  EXPECT_EQ(counters_.rounds.load(), 1u);

  mem_.AddFile("d/a", "AAAA", 20);  // rewritten elsewhere, same size
  mem_.Chmod("d/b", 0600);          // revoked elsewhere (MemBacking keeps ctime)
  r->SweepOnce();
  EXPECT_EQ(Told(), (std::vector<std::string>{Inode(a_, true), Inode(b_, false)}));
  EXPECT_EQ(counters_.invalidated.load(), 2u);
  r->SweepOnce();  // told already: not again
  EXPECT_TRUE(Told().empty());

  // The kernel asks again and is given what the store shows: nothing to tell either.
  struct stat st;
  ASSERT_TRUE(mem_.Lstat("d/a", &st).ok());
  inodes_.Report(a_, st);
  r->SweepOnce();
  EXPECT_TRUE(Told().empty());
}

TEST_F(RevalidateTest, DeletedOrReplacedNamesAreDroppedInTheirParent) {
  auto r = Make();
  mem_.Remove("d/a");
  mem_.Remove("d/b");
  mem_.AddDir("d/b");              // another object (a directory) under the same name
  mem_.AddFile("d/new", "n", 30);  // the directory changes too: its listing is dropped
  r->SweepOnce();
  auto told = Told();
  std::sort(told.begin(), told.end());
  std::vector<std::string> want = {"entry " + std::to_string(dir_) + " a",
                                   "entry " + std::to_string(dir_) + " b"};
  // MemBacking's directories keep their mtime: the listing is not dropped here.
  EXPECT_EQ(told, want);
  EXPECT_EQ(counters_.entries.load(), 2u);
  r->SweepOnce();  // a gone node is not told again, nor statted
  EXPECT_TRUE(Told().empty());
  // A fresh lookup of the name gives the kernel a new node, compared from then on.
  const uint64_t b2 = Look("d/b");
  EXPECT_NE(b2, b_);
  r->SweepOnce();
  EXPECT_TRUE(Told().empty());
}

TEST_F(RevalidateTest, ForgottenNodesAreNotStatted) {
  auto r = Make();
  inodes_.Forget(a_, 1);
  inodes_.Forget(b_, 1);
  r->SweepOnce();
  EXPECT_EQ(counters_.swept.load(), 2u);  // root and d
}

TEST_F(RevalidateTest, CheckComparesStatsMadeAheadWithWhatTheKernelHolds) {
  auto r = Make();
  mem_.AddFile("d/a", "AAAA", 20);
  mem_.Chmod("top", 0600);  // no node: the kernel holds nothing of it
  std::vector<std::string> paths = {"d/a", "d/b", "top", "d/missing"};
  std::vector<struct stat> st(paths.size());
  std::vector<Status> status;
  for (size_t i = 0; i < paths.size(); ++i) status.push_back(mem_.Lstat(paths[i], &st[i]));
  r->Check(paths, st, status);
  EXPECT_EQ(Told(), std::vector<std::string>{Inode(a_, true)});
  EXPECT_EQ(counters_.checked.load(), 2u);  // d/a and d/b: the nodes the kernel holds
  EXPECT_EQ(counters_.swept.load(), 0u);
}

TEST_F(RevalidateTest, AStoreThatDoesNotAnswerDropsNothing) {
  auto r = Make();
  std::vector<std::string> paths = {"d/a"};
  std::vector<struct stat> st(1);
  std::vector<Status> status = {Status::Error(Code::kTimedOut, "d/a")};
  r->Check(paths, st, status);
  EXPECT_TRUE(Told().empty());
  EXPECT_EQ(counters_.failed.load(), 1u);
}

TEST_F(RevalidateTest, TheSweepThreadSeesAChangeWithinTheInterval) {
  const auto interval = 400ms;
  auto r = Make(interval);
  r->Start();
  // Let a round pass unchanged first, so the change lands at an arbitrary point of a round.
  const auto deadline0 = std::chrono::steady_clock::now() + 10s;
  while (counters_.rounds.load() < 1) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline0);
    std::this_thread::sleep_for(1ms);
  }
  mem_.AddFile("d/b", "BBBB", 40);
  const auto changed = std::chrono::steady_clock::now();
  std::vector<std::string> told;
  while (told.empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), changed + 10s) << "never told";
    std::this_thread::sleep_for(1ms);
    told = Told();
  }
  const auto seen = std::chrono::steady_clock::now() - changed;
  EXPECT_EQ(told, std::vector<std::string>{Inode(b_, true)});
  EXPECT_LE(seen, interval + 100ms);
  r->Stop();  // returns with the thread ended
}

// The sweep's thread, checks ahead and the kernel's lookups, replies and forgets at once
// (run under ThreadSanitizer too): every change is still told, nothing is told of a node
// the table no longer holds.
TEST_F(RevalidateTest, ConcurrentLookupsForgetsChecksAndSweeps) {
  for (int i = 0; i < 32; ++i) mem_.AddFile("c/f" + std::to_string(i), "x", 10);
  auto r = Make(20ms);
  r->Start();
  std::atomic<bool> stop{false};
  std::thread kernel([&] {
    for (int round = 0; !stop.load(); ++round) {
      for (int i = 0; i < 32; ++i) {
        const std::string path = "c/f" + std::to_string(i);
        const uint64_t id = Look(path);
        if ((i + round) % 3 == 0) inodes_.Forget(id, 1);
      }
    }
  });
  std::thread ahead([&] {
    std::vector<std::string> paths;
    for (int i = 0; i < 32; ++i) paths.push_back("c/f" + std::to_string(i));
    while (!stop.load()) {
      std::vector<struct stat> st(paths.size());
      std::vector<Status> status;
      for (size_t i = 0; i < paths.size(); ++i) status.push_back(mem_.Lstat(paths[i], &st[i]));
      r->Check(paths, st, status);
    }
  });
  for (int v = 11; v < 40; ++v) {
    mem_.AddFile("c/f" + std::to_string(v % 32), "y", v);
    std::this_thread::sleep_for(2ms);
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (counters_.rounds.load() < 3) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(1ms);
  }
  stop = true;
  kernel.join();
  ahead.join();
  r->Stop();
  EXPECT_GT(counters_.invalidated.load(), 0u);
  EXPECT_GT(counters_.checked.load(), 0u);
}

}  // namespace
}  // namespace clairfs
