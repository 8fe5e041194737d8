// Warm restarts: kept copies of the RAM tier's objects in a persistent tier (placement in the
// room left, stores under the placement, the background writer) and a "remount" (a new
// prefetcher with a fresh RAM tier over the same persistent tier) that reads nothing again.
#include "cache/plan/kept_copies.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cache/plan/place.h"
#include "cache/plan/summary.h"
#include "cache/prefetch/keep_writer.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/prefetch/tier_stack.h"
#include "cache/tiers/ram_tier.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using testing::MemBacking;
using testing::WaitFor;

constexpr size_t kSize = 1000;
std::string Content(int i, char salt = 'a') {
  return std::string(kSize, static_cast<char>(salt + i % 20)) + std::to_string(i);
}
std::string Name(int i) { return "d/f" + std::to_string(i); }
uint64_t Files(uint64_t n) { return n * (kSize + 1); }  // capacity for n files (all 1001 bytes)

// An in-memory tier that says it outlives the daemon, standing in for the SSD tier; its puts
// can be made to fail (a full or failing device) or to take a while.
class PersistentTier final : public Tier {
 public:
  explicit PersistentTier(uint64_t capacity) : inner_("disk", capacity) {}
  const std::string& name() const override { return inner_.name(); }
  Result<BlobPtr> Get(std::string_view key, const FileVersion& v) override {
    return inner_.Get(key, v);
  }
  Status Put(std::string_view key, BlobPtr blob) override {
    if (fail_puts.load()) return Status::Error(Code::kIoError, "injected write failure");
    if (put_delay.load() > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(put_delay.load()));
    return inner_.Put(key, std::move(blob));
  }
  bool Contains(std::string_view key, const FileVersion& v) override {
    return inner_.Contains(key, v);
  }
  void Erase(std::string_view key) override { inner_.Erase(key); }
  void RetainOnly(const std::function<bool(std::string_view, const FileVersion&)>& keep) override {
    inner_.RetainOnly(keep);
  }
  uint64_t used_bytes() const override { return inner_.used_bytes(); }
  uint64_t capacity() const override { return inner_.capacity(); }
  bool persistent() const override { return true; }

  std::atomic<bool> fail_puts{false};
  std::atomic<int> put_delay{0};  // milliseconds each put takes (a slow device)

 private:
  RamTier inner_;
};

PlacementLimits Limits(uint64_t ram, uint64_t disk, uint8_t keep = 1) {
  PlacementLimits l{{"ram", "disk"}, {ram, disk}, Files(2)};
  l.keep_tier = keep;
  return l;
}

// Files 0..3 are read twice (hot: RAM), 4..9 once.
std::shared_ptr<Plan> HotColdPlan(const MemBacking& backing) {
  return testing::PlanOfEpochs(backing, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {0, 1, 2, 3}}, Name);
}

class KeptCopiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 10; ++i) backing_.AddFile(Name(i), Content(i));
  }
  const PlanObject& Obj(const Plan& p, int i) { return p.objects[p.Find(Name(i))]; }
  MemBacking backing_;
};

TEST_F(KeptCopiesTest, OnlyTheRoomThePlacementLeavesIsUsedInFirstReferenceOrder) {
  auto plan = HotColdPlan(backing_);
  // The disk holds its six and has room for two more: files 0 and 1, read first, are kept.
  PlaceObjects(*plan, Limits(Files(4), Files(8)));
  PlaceKeptCopies(*plan, Limits(Files(4), Files(8)));
  for (int i = 0; i < 4; ++i) ASSERT_EQ(Obj(*plan, i).place, Placement::Tier(0)) << i;
  for (int i = 4; i < 10; ++i) ASSERT_EQ(Obj(*plan, i).place, Placement::Tier(1)) << i;
  EXPECT_EQ(Obj(*plan, 0).kept_in, 1);
  EXPECT_EQ(Obj(*plan, 1).kept_in, 1);
  EXPECT_EQ(Obj(*plan, 2).kept_in, kNotKept);
  EXPECT_EQ(Obj(*plan, 3).kept_in, kNotKept);
  for (int i = 4; i < 10; ++i) EXPECT_EQ(Obj(*plan, i).kept_in, kNotKept) << i;
  const PlanSummary s = Summarize(*plan, Limits(Files(4), Files(8)));
  EXPECT_EQ(s.tiers[1].objects, 6u);  // its own objects are not displaced
  EXPECT_EQ(s.tiers[1].kept_objects, 2u);
  EXPECT_EQ(s.tiers[1].bytes + s.tiers[1].kept_bytes, Files(8));
  EXPECT_EQ(s.tiers[0].kept_objects, 0u);
  EXPECT_EQ(s.predicted_backing_bytes, Files(10));  // copies cost the backing store nothing

  // A full disk keeps nothing; no keep tier keeps nothing, and old marks are reset.
  PlaceKeptCopies(*plan, Limits(Files(4), Files(6)));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Obj(*plan, i).kept_in, kNotKept) << i;
  PlaceKeptCopies(*plan, Limits(Files(4), Files(20)));
  EXPECT_EQ(Obj(*plan, 3).kept_in, 1);
  PlaceKeptCopies(*plan, Limits(Files(4), Files(20), kNotKept));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Obj(*plan, i).kept_in, kNotKept) << i;
}

TEST_F(KeptCopiesTest, FirstFitSkipsACopyTooLargeForTheRoomLeft) {
  backing_.AddFile(Name(0), std::string(3 * kSize, 'x'));  // the first RAM object, 3 KB
  auto plan = HotColdPlan(backing_);
  const PlacementLimits l = Limits(Files(6), Files(8));  // RAM: 0..3 (6 KB); disk: 4..9
  PlaceObjects(*plan, l);
  ASSERT_EQ(Obj(*plan, 0).place, Placement::Tier(0));
  PlaceKeptCopies(*plan, l);  // room: 2 files' worth
  EXPECT_EQ(Obj(*plan, 0).kept_in, kNotKept);
  EXPECT_EQ(Obj(*plan, 1).kept_in, 1);
  EXPECT_EQ(Obj(*plan, 2).kept_in, 1);
  EXPECT_EQ(Obj(*plan, 3).kept_in, kNotKept);
}

TEST_F(KeptCopiesTest, TierStackStoresAKeptCopyOnlyWhereThePlacementKeepsIt) {
  RamTier ram("ram", Files(4));
  PersistentTier disk(Files(8));
  TierStack stack({&ram, &disk});
  auto plan = HotColdPlan(backing_);
  PlaceObjects(*plan, Limits(Files(4), Files(8)));
  PlaceKeptCopies(*plan, Limits(Files(4), Files(8)));
  stack.SetPlacement(plan);
  auto blob = [&](int i) { return backing_.Read(Name(i), ByteRange::Whole()).value(); };
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  uint8_t keep = 7;
  ASSERT_TRUE(stack.Store(0, Name(0), blob(0), std::nullopt, deadline, &keep).ok());
  EXPECT_EQ(keep, 1) << "the placement has tier 1 keep a copy of file 0";
  ASSERT_TRUE(stack.Store(0, Name(2), blob(2), std::nullopt, deadline, &keep).ok());
  EXPECT_EQ(keep, kNotKept);
  ASSERT_TRUE(stack.Store(1, Name(0), blob(0), std::nullopt, deadline, &keep).ok());
  EXPECT_EQ(keep, kNotKept);  // the copy itself: nothing further to keep
  EXPECT_EQ(stack.Store(1, Name(2), blob(2), std::nullopt, deadline).code(), Code::kUnavailable)
      << "file 2 is not kept: the disk has no room for it";
  // A copy of another version is refused.
  auto other = testing::MakeBlob(Content(1, 'A'), 99);
  EXPECT_EQ(stack.Store(1, Name(1), other, std::nullopt, deadline).code(), Code::kUnavailable);

  // A promotion from the keep tier leaves the kept copy in place.
  ram.Erase(Name(0));
  ASSERT_TRUE(stack.Store(0, Name(0), blob(0), 1, deadline).ok());
  EXPECT_TRUE(disk.Contains(Name(0), backing_.Version(Name(0))));
  // A plan whose placement fills the disk keeps no copy: storing one is refused.
  auto plan2 = HotColdPlan(backing_);
  PlaceObjects(*plan2, Limits(Files(4), Files(6)));
  PlaceKeptCopies(*plan2, Limits(Files(4), Files(6)));
  stack.SetPlacement(plan2);
  EXPECT_EQ(stack.Store(1, Name(1), blob(1), std::nullopt, deadline).code(), Code::kUnavailable);
}

// A daemon over backing_: a fresh RAM tier, the persistent tier given, a new prefetcher.
class RemountTest : public KeptCopiesTest {
 protected:
  void Up(PersistentTier& disk, std::chrono::milliseconds drain = 1500ms) {
    ram_ = std::make_unique<RamTier>("ram", Files(4));
    stats_ = std::make_unique<Stats>();
    PrefetchOptions o;
    o.staging_capacity = Files(2);
    o.staging_threads = 1;
    o.tier_threads = {2, 1};
    o.demand_threads = 1;
    o.fetch_timeout = 5000ms;
    o.keep_drain = drain;
    prefetcher_ = std::make_unique<Prefetcher>(backing_, std::vector<Tier*>{ram_.get(), &disk}, o,
                                               stats_.get());
    prefetcher_->Start();
    prefetcher_->Install(HotColdPlan(backing_));
  }
  void Down() {
    if (prefetcher_) prefetcher_->Stop();
    prefetcher_.reset();
    ram_.reset();
  }
  void TearDown() override { Down(); }
  // Opens every file as a reader would and checks its bytes.
  void ReadAll(char salt0 = 'a') {
    for (int i = 0; i < 10; ++i) {
      auto r = prefetcher_->Open(Name(i), backing_.Version(Name(i)));
      ASSERT_TRUE(r.ok()) << Name(i) << ": " << r.status().message();
      ASSERT_NE(r->blob, nullptr) << Name(i);
      EXPECT_EQ(std::string(r->blob->data(), r->blob->size()), Content(i, i == 0 ? salt0 : 'a'))
          << Name(i);
    }
  }
  // Outlives every prefetcher (TearDown stops the last one), also when a test fails early.
  PersistentTier disk{Files(10)};
  std::unique_ptr<RamTier> ram_;
  std::unique_ptr<Stats> stats_;
  std::unique_ptr<Prefetcher> prefetcher_;
};

TEST_F(RemountTest, ARemountReadsNothingTheTiersHeld) {
  Up(disk);
  ASSERT_TRUE(WaitFor([&] { return stats_->fetched_objects.load() == 10; }));
  ASSERT_TRUE(WaitFor([&] { return stats_->kept.written.load() == 4; }))
      << stats_->kept.written.load();
  ReadAll();
  EXPECT_EQ(backing_.reads(), 10u);
  EXPECT_EQ(disk.used_bytes(), Files(10));
  EXPECT_EQ(prefetcher_->KeepPending(), 0u);
  Down();

  Up(disk);
  ReadAll();  // at once, racing the RAM fill: served from RAM or the disk's copies
  ASSERT_TRUE(WaitFor([&] { return ram_->used_bytes() == Files(4); }));
  EXPECT_EQ(backing_.reads(), 10u) << "the remount read something again";
  EXPECT_EQ(stats_->served_backing.load(), 0u);
  EXPECT_EQ(stats_->served_tier[0].load() + stats_->served_tier[1].load(), 10u);
  EXPECT_EQ(disk.used_bytes(), Files(10)) << "promotions keep the copies";
}

TEST_F(RemountTest, AFileChangedBetweenMountsIsNotServedFromItsKeptCopy) {
  Up(disk);
  ASSERT_TRUE(WaitFor([&] { return stats_->fetched_objects.load() == 10; }));
  ASSERT_TRUE(WaitFor([&] { return stats_->kept.written.load() == 4; }));
  Down();
  const FileVersion old = backing_.Version(Name(0));
  backing_.AddFile(Name(0), Content(0, 'A'), 7);  // same size, another version
  Up(disk);
  // The RAM tier filled: three objects from the disk's copies, file 0 from the backing store.
  ASSERT_TRUE(WaitFor([&] { return stats_->fetched_objects.load() == 4; }));
  EXPECT_EQ(stats_->tier_promoted[0].load(), 3u);
  ReadAll('A');
  ASSERT_TRUE(WaitFor([&] { return disk.Contains(Name(0), backing_.Version(Name(0))); }))
      << "the new version is kept in its turn";
  EXPECT_EQ(backing_.reads(), 11u);  // the changed file only
  EXPECT_FALSE(disk.Get(Name(0), old).ok()) << "the old version's copy is gone";
}

TEST_F(RemountTest, AFailingPersistentTierCostsOnlyTheCopies) {
  disk.fail_puts = true;
  Up(disk);
  ASSERT_TRUE(WaitFor([&] { return stats_->kept.failed.load() >= 4; }))
      << stats_->kept.failed.load();
  ReadAll();  // served all the same, from RAM and on demand
  EXPECT_EQ(stats_->kept.written.load(), 0u);
  EXPECT_EQ(stats_->served_tier[0].load(), 4u);
  EXPECT_EQ(disk.used_bytes(), 0u);
}

TEST_F(RemountTest, StopWritesTheQueuedCopiesWithinItsDeadline) {
  Up(disk);
  ASSERT_TRUE(WaitFor([&] { return stats_->fetched_objects.load() == 10; }));
  ASSERT_TRUE(WaitFor([&] { return stats_->kept.written.load() == 4; }));
  // A slow device: the copies of a new plan's RAM objects are still queued at the stop.
  disk.put_delay = 30;
  backing_.AddFile(Name(1), Content(1, 'B'), 8);
  backing_.AddFile(Name(2), Content(2, 'B'), 8);
  prefetcher_->Install(HotColdPlan(backing_));
  ASSERT_TRUE(WaitFor([&] { return stats_->kept.queued.load() == 6; }))
      << stats_->kept.queued.load();
  Down();  // drains: both copies written
  EXPECT_EQ(stats_->kept.written.load(), 6u);
  EXPECT_EQ(stats_->kept.dropped.load(), 0u);
  EXPECT_TRUE(disk.Contains(Name(1), backing_.Version(Name(1))));
  EXPECT_TRUE(disk.Contains(Name(2), backing_.Version(Name(2))));

  // A deadline that passes first: the stop returns, what is left is counted as dropped.
  disk.put_delay = 400;
  backing_.AddFile(Name(1), Content(1, 'C'), 9);
  backing_.AddFile(Name(2), Content(2, 'C'), 9);
  backing_.AddFile(Name(3), Content(3, 'C'), 9);
  Up(disk, 1ms);
  ASSERT_TRUE(WaitFor([&] { return stats_->kept.queued.load() == 3; }, 10s))
      << stats_->kept.queued.load();
  const auto t0 = std::chrono::steady_clock::now();
  Down();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_GE(stats_->kept.dropped.load(), 1u);
}

TEST_F(RemountTest, ANewPlanDropsTheCopiesItNoLongerKeepsBeforeTheFillNeedsTheRoom) {
  Up(disk);
  ASSERT_TRUE(WaitFor([&] { return stats_->fetched_objects.load() == 10; }));
  ASSERT_TRUE(WaitFor([&] { return stats_->kept.written.load() == 4; }));
  ASSERT_EQ(disk.used_bytes(), Files(10));  // full: six objects and four copies
  // Two more files read once (1002 bytes each): the disk's own objects take eight places, and
  // the room left (1998 bytes) keeps one copy.
  for (int i = 10; i < 12; ++i) backing_.AddFile(Name(i), Content(i));
  prefetcher_->Install(testing::PlanOfEpochs(
      backing_, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {0, 1, 2, 3}}, Name));
  ASSERT_TRUE(WaitFor([&] {
    return disk.Contains(Name(10), backing_.Version(Name(10))) &&
           disk.Contains(Name(11), backing_.Version(Name(11)));
  })) << "the fill found no room: tier_full "
      << stats_->errors.tier_full.load();
  EXPECT_EQ(stats_->errors.tier_full.load(), 0u);
  auto plan = prefetcher_->plan();
  ASSERT_EQ(Obj(*plan, 0).kept_in, 1);
  for (int i = 1; i < 4; ++i) ASSERT_EQ(Obj(*plan, i).kept_in, kNotKept) << i;
  EXPECT_TRUE(disk.Contains(Name(0), backing_.Version(Name(0))));  // still kept
  for (int i = 1; i < 4; ++i) {
    EXPECT_FALSE(disk.Contains(Name(i), backing_.Version(Name(i)))) << i << ": no longer kept";
  }
  EXPECT_LE(disk.used_bytes(), disk.capacity());
}

// The writer alone: a full queue drops, never blocks.
TEST(KeepWriterAlone, AFullQueueDropsInsteadOfBlocking) {
  RamTier ram("ram", Files(4));
  PersistentTier disk(Files(4));
  TierStack stack({&ram, &disk});
  Stats stats;
  KeepWriter writer(stack, &stats, 1000ms, 2);
  writer.Enqueue("x", FileVersion{1, 1}, 1);  // before Start: dropped
  EXPECT_EQ(stats.kept.dropped.load(), 1u);
  writer.Stop(std::chrono::steady_clock::now());
  writer.Enqueue("y", FileVersion{1, 1}, 1);  // after Stop: dropped
  EXPECT_EQ(stats.kept.dropped.load(), 2u);
  EXPECT_EQ(writer.pending(), 0u);
}

}  // namespace
}  // namespace clairfs
