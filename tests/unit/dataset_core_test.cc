// DatasetCore (fs/core/dataset_core.h) without FUSE: a PosixBacking over a temporary directory,
// a prefetcher with a RAM tier and no plan, and the kernel's caches recorded instead of told.
// The identity (kStale) rules, the open access re-check, binding to a version, and the rule for
// a store that does not answer.
#include "fs/core/dataset_core.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "cache/tiers/ram_tier.h"
#include "fs/status_errno.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using namespace std::chrono_literals;

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// Records what the core tells the kernel's caches.
class RecordingKernel : public KernelCache {
 public:
  void InvalidateAttrs(uint64_t node) override {
    std::lock_guard lock(mu_);
    attrs_.push_back(node);
  }
  bool DropPages(uint64_t node, uint64_t /*from*/) override {
    std::lock_guard lock(mu_);
    pages_.push_back(node);
    return true;
  }
  std::vector<uint64_t> attrs() {
    std::lock_guard lock(mu_);
    return attrs_;
  }

 private:
  std::mutex mu_;
  std::vector<uint64_t> attrs_, pages_;
};

class DatasetCoreTest : public ::testing::Test {
 protected:
  // The core over dir_ (files made before), with backing io options io.
  void Make(IoOptions io = {}) {
    auto b = PosixBacking::Open(dir_.path(), io, &stats_);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backing_ = std::move(b.value());
    ram_ = std::make_unique<RamTier>("ram", 1 << 20);
    PrefetchOptions po;
    po.staging_capacity = 1 << 20;
    prefetcher_ =
        std::make_unique<Prefetcher>(*backing_, std::vector<Tier*>{ram_.get()}, po, &stats_);
    access_ = std::make_unique<AccessRules>(*backing_, options_, fs_stats_, OwnCredentials(),
                                            geteuid() == 0 && CanSwitchIdentity());
    core_ = std::make_unique<DatasetCore>(*backing_, *prefetcher_, *access_, stats_, fs_stats_,
                                          options_, std::vector<std::string>{dir_.path()}, "/ctl",
                                          kernel_);
  }
  void TearDown() override {
    core_.reset();
    if (prefetcher_) prefetcher_->Stop();
  }
  std::string P(const std::string& rel) const { return dir_.path() + "/" + rel; }
  uint64_t Look(uint64_t parent, const std::string& name) {
    auto e = core_->Lookup(parent, name);
    EXPECT_TRUE(e.ok()) << name << ": " << e.status().ToString();
    return e.ok() ? e.value().node : 0;
  }
  // The caller of uid (its primary group the same number, no supplementary group).
  static Caller As(uid_t uid) {
    Caller c;
    c.uid = uid;
    c.gid = uid;
    c.pid = 1;
    c.groups = [](std::vector<gid_t>* out) {
      out->clear();
      return Status::Ok();
    };
    return c;
  }
  Caller Self() const { return As(geteuid()); }
  // Opens node as a read-only open of the daemon's own user does.
  Result<DatasetCore::Opened> OpenAsSelf(uint64_t node) {
    InodeTable::NodeInfo info;
    if (Status s = core_->MayOpen(node, O_RDONLY, Self(), &info); !s.ok()) return s;
    return core_->Open(node, info);
  }
  // A handle-less READ of node (no_open mode): its bytes, *s its status.
  std::string ReadNode(uint64_t node, uint64_t off, size_t size, Status* s) {
    ReadReply reply;
    bool drop = false;
    *s = core_->ReadNode(node, size, off, 7, &reply, &drop);
    std::string out;
    for (const iovec& v : reply.iov) out.append(static_cast<const char*>(v.iov_base), v.iov_len);
    return out;
  }
  std::string ReadAll(uint64_t node, OpenContents& h, size_t size) {
    ReadReply reply;
    Status s = core_->Read(node, h, size, 0, &reply);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::string out;
    for (const iovec& v : reply.iov) out.append(static_cast<const char*>(v.iov_base), v.iov_len);
    return out;
  }

  testing::TempDir dir_;
  Stats stats_;
  FsStats fs_stats_;
  FsOptions options_;
  RecordingKernel kernel_;
  std::unique_ptr<PosixBacking> backing_;
  std::unique_ptr<RamTier> ram_;
  std::unique_ptr<Prefetcher> prefetcher_;
  std::unique_ptr<AccessRules> access_;
  std::unique_ptr<DatasetCore> core_;
};

constexpr uint64_t kRoot = InodeTable::kRootId;

TEST_F(DatasetCoreTest, FileReplacedByAnotherInodeAtItsPathIsStale) {
  WriteFile(P("a"), "first");
  WriteFile(P("b"), "second, another inode");
  Make();
  const uint64_t a = Look(kRoot, "a");
  ASSERT_TRUE(core_->GetAttr(a, nullptr).ok());
  ASSERT_EQ(rename(P("b").c_str(), P("a").c_str()), 0);

  auto attr = core_->GetAttr(a, nullptr);
  EXPECT_EQ(attr.status().code(), Code::kStale) << attr.status().ToString();
  EXPECT_EQ(ToErrno(attr.status()), ESTALE);
  auto opened = OpenAsSelf(a);
  EXPECT_EQ(opened.status().code(), Code::kStale) << opened.status().ToString();
  EXPECT_EQ(core_->ReadLink(a).status().code(), Code::kStale);
  EXPECT_GE(fs_stats_.errors.stale_node.load(), 2u);
  // A fresh lookup of the name gets a node for the new object, which opens.
  const uint64_t again = Look(kRoot, "a");
  EXPECT_NE(again, a);
  auto fresh = OpenAsSelf(again);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(ReadAll(again, *fresh.value().contents, 100), "second, another inode");
}

TEST_F(DatasetCoreTest, FileRemovedIsStaleAndAnUnknownNodeToo) {
  WriteFile(P("a"), "x");
  Make();
  const uint64_t a = Look(kRoot, "a");
  ASSERT_EQ(unlink(P("a").c_str()), 0);
  EXPECT_EQ(core_->GetAttr(a, nullptr).status().code(), Code::kStale);
  EXPECT_EQ(OpenAsSelf(a).status().code(), Code::kStale);
  EXPECT_EQ(core_->GetAttr(12345, nullptr).status().code(), Code::kStale);
  EXPECT_EQ(core_->Lookup(12345, "x").status().code(), Code::kStale);
  // A name that is not there is no stale node: kNotFound.
  auto missing = core_->Lookup(kRoot, "a");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(ToErrno(missing.status()), ENOENT);
}

TEST_F(DatasetCoreTest, DirectorySwappedForAFileIsStale) {
  ASSERT_EQ(mkdir(P("d").c_str(), 0755), 0);
  WriteFile(P("d/x"), "in d");
  Make();
  const uint64_t d = Look(kRoot, "d");
  ASSERT_NE(Look(d, "x"), 0u);
  ASSERT_EQ(unlink(P("d/x").c_str()), 0);
  ASSERT_EQ(rmdir(P("d").c_str()), 0);
  WriteFile(P("d"), "a file now");

  EXPECT_EQ(core_->Lookup(d, "x").status().code(), Code::kStale);
  EXPECT_EQ(core_->OpenDir(d).status().code(), Code::kStale);
  EXPECT_EQ(core_->GetAttr(d, nullptr).status().code(), Code::kStale);
  // The new object at the path is a file: a lookup below it is ENOTDIR, not stale.
  const uint64_t f = Look(kRoot, "d");
  auto below = core_->Lookup(f, "x");
  EXPECT_EQ(ToErrno(below.status()), ENOTDIR) << below.status().ToString();
}

TEST_F(DatasetCoreTest, AFileSwappedForADirectoryIsStaleAtOpen) {
  WriteFile(P("a"), "x");
  Make();
  const uint64_t a = Look(kRoot, "a");
  ASSERT_EQ(unlink(P("a").c_str()), 0);
  ASSERT_EQ(mkdir(P("a").c_str(), 0755), 0);
  EXPECT_EQ(OpenAsSelf(a).status().code(), Code::kStale);
}

TEST_F(DatasetCoreTest, ControlLinkAndReadOnlyRules) {
  WriteFile(P("a"), "x");
  Make();
  auto link = core_->Lookup(kRoot, ".clairfs");
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(link.value().node, DatasetCore::kControlLink);
  EXPECT_TRUE(S_ISLNK(link.value().attr.st_mode));
  EXPECT_EQ(core_->ReadLink(DatasetCore::kControlLink).value(), "/ctl");
  EXPECT_EQ(ToErrno(core_->Lookup(DatasetCore::kControlLink, "x").status()), ENOTDIR);
  InodeTable::NodeInfo info;
  EXPECT_EQ(ToErrno(core_->MayOpen(DatasetCore::kControlLink, O_RDONLY, Self(), &info)), ELOOP);
  const uint64_t a = Look(kRoot, "a");
  EXPECT_EQ(core_->MayOpen(a, O_RDWR, Self(), &info).code(), Code::kReadOnly);
  EXPECT_EQ(core_->MayOpen(a, O_RDONLY | O_TRUNC, Self(), &info).code(), Code::kReadOnly);
  EXPECT_EQ(DatasetCore::Access(W_OK).code(), Code::kReadOnly);
  EXPECT_TRUE(DatasetCore::Access(R_OK).ok());
  EXPECT_EQ(ToErrno(core_->Xattr(a, "trusted.x").status()), ENODATA);
}

TEST_F(DatasetCoreTest, ModeNarrowedByAnotherOwnerDeniesOtherUsers) {
  if (geteuid() != 0 || !CanSwitchIdentity()) {
    GTEST_SKIP() << "needs root with CAP_SETUID/CAP_SETGID to check as another user";
  }
  constexpr uid_t kOwner = 4242, kOther = 4343;
  WriteFile(P("a"), "secret");
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);  // mkdtemp makes it 0700
  ASSERT_EQ(chmod(P("a").c_str(), 0644), 0);
  Make();
  const uint64_t a = Look(kRoot, "a");
  InodeTable::NodeInfo info;
  EXPECT_TRUE(core_->MayOpen(a, O_RDONLY, As(kOther), &info).ok());
  // Another owner takes the file and narrows it to 0600 (the kernel's cached check would let
  // the open through): the re-check with the caller's credentials refuses it.
  ASSERT_EQ(chown(P("a").c_str(), kOwner, kOwner), 0);
  ASSERT_EQ(chmod(P("a").c_str(), 0600), 0);
  const Status denied = core_->MayOpen(a, O_RDONLY, As(kOther), &info);
  EXPECT_EQ(denied.code(), Code::kPermissionDenied) << denied.ToString();
  EXPECT_EQ(ToErrno(denied), EACCES);
  EXPECT_EQ(fs_stats_.open_denied.load(), 1u);
  EXPECT_TRUE(core_->MayOpen(a, O_RDONLY, As(kOwner), &info).ok());
  EXPECT_TRUE(core_->MayOpen(a, O_RDONLY, Self(), &info).ok());  // the daemon's own user
  // A member of the owner's group through a supplementary group: still 0600, refused.
  Caller member = As(kOther);
  member.groups = [](std::vector<gid_t>* out) {
    *out = {kOwner};
    return Status::Ok();
  };
  EXPECT_EQ(core_->MayOpen(a, O_RDONLY, member, &info).code(), Code::kPermissionDenied);
  ASSERT_EQ(chmod(P("a").c_str(), 0640), 0);
  EXPECT_TRUE(core_->MayOpen(a, O_RDONLY, member, &info).ok());
}

TEST_F(DatasetCoreTest, FileRewrittenInPlaceBindsToTheNewVersion) {
  WriteFile(P("a"), "version one");
  Make();
  const uint64_t a = Look(kRoot, "a");
  auto first = OpenAsSelf(a);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(ReadAll(a, *first.value().contents, 100), "version one");
  EXPECT_TRUE(kernel_.attrs().empty());  // the lookup reported this version

  struct stat before;
  ASSERT_EQ(stat(P("a").c_str(), &before), 0);
  WriteFile(P("a"), "version two, longer");  // same inode, truncated and rewritten
  struct stat after;
  ASSERT_EQ(stat(P("a").c_str(), &after), 0);
  ASSERT_EQ(before.st_ino, after.st_ino);

  auto second = OpenAsSelf(a);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second.value().contents->version, VersionOf(after));
  EXPECT_EQ(ReadAll(a, *second.value().contents, 100), "version two, longer");
  EXPECT_FALSE(second.value().keep_cache);               // the page cache holds the other version
  EXPECT_EQ(kernel_.attrs(), std::vector<uint64_t>{a});  // its size must be asked again
  // The first open's reads are refused now: the pages they put back would be read by the
  // second open's reader beside its own (version two's).
  ReadReply reply;
  const uint64_t stale = stats_.errors.stale.load();
  EXPECT_EQ(core_->Read(a, *first.value().contents, 100, 0, &reply).code(), Code::kStale);
  EXPECT_EQ(stats_.errors.stale.load(), stale + 1);
  // The next open of the same version keeps the pages; its reads and the second's are served.
  auto third = OpenAsSelf(a);
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third.value().keep_cache);
  EXPECT_EQ(ReadAll(a, *second.value().contents, 100), "version two, longer");
  EXPECT_EQ(ReadAll(a, *third.value().contents, 100), "version two, longer");
}

TEST_F(DatasetCoreTest, NoOpenReadBindsAtTheStartOfEachRead) {
  WriteFile(P("a"), "version one");
  Make();
  const uint64_t a = Look(kRoot, "a");
  auto read = [&](uint64_t off, size_t size, Status* s) { return ReadNode(a, off, size, s); };
  Status s;
  EXPECT_EQ(read(0, 4096, &s), "version one");
  ASSERT_TRUE(s.ok()) << s.ToString();
  WriteFile(P("a"), "version two, longer");
  EXPECT_EQ(read(0, 4096, &s), "version two, longer");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(kernel_.attrs(), std::vector<uint64_t>{a});
}

TEST_F(DatasetCoreTest, AnUnplannedReadOpensAndReadsInOneWaitOnTheStore) {
  // No plan, no stat made ahead: the file is opened and its first READ read in one call on the
  // I/O threads (not three: stat, open, read). Its bytes are the version opened, and a change
  // before the next read is bound afresh.
  WriteFile(P("a"), std::string(5000, 'x'));
  Make();
  const uint64_t a = Look(kRoot, "a");
  auto read = [&](uint64_t off, size_t size, Status* s) { return ReadNode(a, off, size, s); };
  Status s;
  const uint64_t before = backing_->WaitedCalls();
  EXPECT_EQ(read(0, 8192, &s), std::string(5000, 'x'));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(backing_->WaitedCalls() - before, 1u);
  EXPECT_EQ(stats_.backing_bytes.load(), 5000u);
  EXPECT_EQ(stats_.served_backing.load(), 1u);
  // A read in two READs: the second one reads the descriptor bound by the first.
  const uint64_t mid = backing_->WaitedCalls();
  EXPECT_EQ(read(0, 4096, &s), std::string(4096, 'x'));
  EXPECT_EQ(read(4096, 4096, &s), std::string(904, 'x'));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(backing_->WaitedCalls() - mid, 2u);
  WriteFile(P("a"), "version two");
  EXPECT_EQ(read(0, 4096, &s), "version two");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(kernel_.attrs(), std::vector<uint64_t>{a});
}

TEST_F(DatasetCoreTest, APlannedFileIsStillLookedUpInTheTiersFirst) {
  // A file the plan names is stat'ed first (no stat made ahead here), then served from the
  // tier: no descriptor opened, no byte read from the store for the READ.
  WriteFile(P("p"), "planned bytes");
  Make();
  auto plan = testing::PlanOfEpochs(*backing_, {{0}}, [](int) { return std::string("p"); });
  prefetcher_->Start();
  prefetcher_->Install(plan);
  ASSERT_TRUE(testing::WaitFor([&] { return stats_.fetched_objects.load() == 1; }, 10s));
  const uint64_t p = Look(kRoot, "p");
  ReadReply reply;
  bool drop = false;
  const uint64_t before = backing_->WaitedCalls();
  const uint64_t bytes = stats_.backing_bytes.load();
  ASSERT_TRUE(core_->ReadNode(p, 4096, 0, 7, &reply, &drop).ok());
  ASSERT_EQ(reply.blobs.size(), 1u);
  EXPECT_EQ(backing_->WaitedCalls() - before, 1u);  // the stat
  EXPECT_EQ(stats_.backing_bytes.load(), bytes);
}

// A store that does not answer: every backing call times out while its one I/O thread is held
// by a check that waits for `release`.
class StalledStore {
 public:
  explicit StalledStore(const PosixBacking& backing) {
    holder_ = std::thread([&backing, this, released = released_] {
      (void)backing.CheckAccess("", R_OK, [this, released](const std::function<Status()>& check) {
        entered_.set_value();
        released.wait();
        return check();
      });
    });
    entered_.get_future().wait();
  }
  ~StalledStore() {
    release_.set_value();
    holder_.join();
  }

 private:
  std::promise<void> entered_, release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::thread holder_;
};

TEST_F(DatasetCoreTest, UnreachableStoreServesTheLastReportedVersionOnlyFromATier) {
  WriteFile(P("held"), "in the tier");
  WriteFile(P("absent"), "not in any tier");
  Make({.timeout = 300ms, .max_threads = 1, .stalled_timeout = 100ms});
  const uint64_t held = Look(kRoot, "held");
  const uint64_t absent = Look(kRoot, "absent");
  auto blob = backing_->Read("held", ByteRange::Whole());
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  ASSERT_TRUE(ram_->Put("held", blob.value()).ok());

  StalledStore stalled(*backing_);
  auto opened = OpenAsSelf(held);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_NE(opened.value().contents->blob, nullptr);
  EXPECT_EQ(ReadAll(held, *opened.value().contents, 100), "in the tier");
  EXPECT_EQ(fs_stats_.served_unverified.load(), 1u);
  auto failed = OpenAsSelf(absent);
  EXPECT_TRUE(StoreUnreachable(failed.status())) << failed.status().ToString();
  EXPECT_EQ(fs_stats_.served_unverified.load(), 1u);
}

// Lookups with stats made ahead (cache/backing/stat_ahead.h): a real StatAhead over the same
// store, its watch stood in for by the test (every directory watched, quiet; the test reports
// the changes it makes as the watch would, or not, for a change no watch sees).
class LookupAheadTest : public DatasetCoreTest {
 protected:
  void StartAhead(std::chrono::milliseconds max_age = 60s) {
    StatAhead::Hooks h;
    h.upcoming = [this](const UpcomingQuery&, UpcomingFiles* files) {  // no ids: none skipped
      files->paths.insert(files->paths.end(), planned_.begin(), planned_.end());
    };
    h.watched = [](const std::string&) { return true; };
    h.quiet = [] { return true; };
    StatAheadOptions o;
    o.ahead = 8;
    o.max_age = max_age;
    ahead_ = std::make_unique<StatAhead>(*backing_, h, o, stats_.stat_ahead);
    ahead_->Start();
    core_->SetWatchers(ahead_.get(), nullptr);
    Batch();
  }
  // Wakes the thread as a read would and waits for its batch to be done.
  void Batch() {
    const uint64_t n = stats_.stat_ahead.batches.load();
    ahead_->Consumed();
    ASSERT_TRUE(testing::WaitFor([&] { return stats_.stat_ahead.batches.load() > n; }, 10s));
  }
  void TearDown() override {
    if (ahead_) ahead_->Stop();
    DatasetCoreTest::TearDown();
  }
  uint64_t ReaderStats() const { return fs_stats_.metadata.reader_stats.load(); }

  std::vector<std::string> planned_ = {"d/a", "d/b"};
  std::unique_ptr<StatAhead> ahead_;  // after backing_: stopped and gone before it
};

TEST_F(LookupAheadTest, APlannedNameStattedAheadIsLookedUpWithoutABackingCall) {
  ASSERT_EQ(mkdir(P("d").c_str(), 0755), 0);
  WriteFile(P("d/a"), "a");
  WriteFile(P("d/b"), "bb");
  WriteFile(P("d/c"), "not planned");
  Make();
  StartAhead();
  const uint64_t calls = backing_->WaitedCalls();
  const uint64_t d = Look(kRoot, "d");  // the directory of planned names: statted ahead too
  auto a = core_->Lookup(d, "a");
  auto b = core_->Lookup(d, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(backing_->WaitedCalls(), calls);  // no call at all on the reader's path
  EXPECT_EQ(ReaderStats(), 0u);
  EXPECT_EQ(fs_stats_.metadata.lookups.load(), 3u);
  EXPECT_EQ(fs_stats_.metadata.lookups_ahead.load(), 3u);
  struct stat real;
  ASSERT_EQ(lstat(P("d/b").c_str(), &real), 0);
  EXPECT_EQ(b.value().attr.st_ino, real.st_ino);
  EXPECT_EQ(b.value().attr.st_size, 2);
  // A name not planned: its own stat (the parent's identity still from the record).
  ASSERT_TRUE(core_->Lookup(d, "c").ok());
  EXPECT_EQ(ReaderStats(), 1u);
  EXPECT_EQ(fs_stats_.metadata.lookups_ahead.load(), 3u);
  // Lookups are counted in metadata, not in stat_ahead's used / missed (the reads').
  EXPECT_EQ(stats_.stat_ahead.used.load(), 0u);
  EXPECT_EQ(stats_.stat_ahead.missed.load(), 0u);
}

TEST_F(LookupAheadTest, ChangesTheWatchReportsAreSeenAtTheNextLookup) {
  ASSERT_EQ(mkdir(P("d").c_str(), 0755), 0);
  WriteFile(P("d/a"), "a");
  WriteFile(P("d/b"), "bb");
  Make();
  StartAhead();
  const uint64_t d = Look(kRoot, "d");
  Look(d, "a");
  ASSERT_EQ(chmod(P("d/a").c_str(), 0600), 0);
  ahead_->Forget("d/a");  // the watch's report of the chmod
  auto a = core_->Lookup(d, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value().attr.st_mode & 07777, 0600u);
  ASSERT_EQ(unlink(P("d/b").c_str()), 0);
  ahead_->Forget("d/b");
  EXPECT_EQ(core_->Lookup(d, "b").status().code(), Code::kNotFound);
  // Each report dropped the name's record and its directory's: the parent and the name statted.
  EXPECT_EQ(ReaderStats(), 4u);
  // The directory renamed and another made at its path: the watch reports names lost.
  ASSERT_EQ(rename(P("d").c_str(), P("old").c_str()), 0);
  ASSERT_EQ(mkdir(P("d").c_str(), 0755), 0);
  WriteFile(P("d/a"), "a");
  ahead_->ForgetAll();
  EXPECT_EQ(core_->Lookup(d, "a").status().code(), Code::kStale);
}

TEST_F(LookupAheadTest, AChangeNoWatchSeesIsSeenWithinMaxAge) {
  ASSERT_EQ(mkdir(P("d").c_str(), 0755), 0);
  WriteFile(P("d/a"), "a");
  WriteFile(P("d/b"), "bb");
  Make();
  constexpr auto kMaxAge = 300ms;
  StartAhead(kMaxAge);
  const auto statted = std::chrono::steady_clock::now();  // the batch began before this
  const uint64_t d = Look(kRoot, "d");
  ASSERT_EQ(chmod(P("d/a").c_str(), 0600), 0);  // unreported: another node's change
  // Seen once the record is older than max_age, never later.
  bool seen = false;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto a = core_->Lookup(d, "a");
        seen = a.ok() && (a.value().attr.st_mode & 07777) == 0600;
        // (Slack for the scheduling between Recent's clock and this one.)
        if (!seen) {
          EXPECT_LE(std::chrono::steady_clock::now() - statted, kMaxAge + 100ms);
        }
        return seen;
      },
      10s));
  EXPECT_GE(ReaderStats(), 1u);
}

}  // namespace
}  // namespace clairfs
