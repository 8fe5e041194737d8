// The prefetcher over a RAM tier and a real RocksDB SSD tier: placement across both, reuse of
// the SSD by a new daemon (no backing reads for what it holds), promotion to RAM on a new plan,
// and a corrupt SSD object served correctly from the backing store.
#include "cache/prefetch/tier_stack.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <thread>

#include "cache/plan/merge.h"
#include "cache/plan/place.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ram_tier.h"
#include "cache/tiers/ssd_tier.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using testing::BuildPlan;
constexpr size_t kSize = 1000;

std::string Content(int i) {
  return std::string(kSize, static_cast<char>('a' + i % 26)) + std::to_string(i);
}
std::string Name(int i) { return "f" + std::to_string(i); }

class TierStackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    for (int i = 0; i < 10; ++i) backing_.AddFile(Name(i), Content(i));
  }
  void TearDown() override { Down(); }
  // A "daemon": fresh RAM tier, the SSD tier reopened from dir_, a new prefetcher; keep: the
  // SSD tier keeps copies of RAM objects in the room the placement leaves it.
  void Up(uint64_t ram_files, uint64_t ssd_files, bool keep = true) {
    ram_ = std::make_unique<RamTier>("ram", ram_files * (kSize + 1));
    auto ssd = SsdTier::Open("ssd", dir_, ssd_files * (kSize + 1));
    ASSERT_TRUE(ssd.ok()) << ssd.status().message();
    ssd_ = std::move(ssd.value());
    stats_ = std::make_unique<Stats>();
    PrefetchOptions o;
    o.staging_capacity = 2 * (kSize + 1);
    o.staging_threads = 1;
    o.tier_threads = {1, 1};
    o.demand_threads = 1;
    o.keep_copies = keep;
    prefetcher_ = std::make_unique<Prefetcher>(backing_, std::vector<Tier*>{ram_.get(), ssd_.get()},
                                               o, stats_.get());
    prefetcher_->Start();
  }
  void Down() {
    if (prefetcher_) prefetcher_->Stop();
    prefetcher_.reset();
    ssd_.reset();
    ram_.reset();
  }
  // Files 0..9, with 0..3 read in every epoch (hot) and the rest once.
  void Install() {
    std::string text = "#epoch\n";
    for (int i = 0; i < 10; ++i) text += Name(i) + "\n";
    text += "#epoch\n";
    for (int i = 0; i < 4; ++i) text += Name(i) + "\n";
    ManifestParser p;
    p.Feed(text);
    PathResolver resolver(backing_, {});
    auto plan =
        BuildPlan(std::move(p).Finish(), resolver, nullptr, StreamChange::kReplace, 1ull << 30);
    ASSERT_TRUE(plan.ok());
    prefetcher_->Install(plan.value());
  }
  void WaitFilled(uint64_t objects) {
    for (int i = 0; i < 2000 && stats_->fetched_objects.load() < objects; ++i)
      std::this_thread::sleep_for(2ms);
    ASSERT_EQ(stats_->fetched_objects.load(), objects);
  }
  void ReadAll() {
    for (int i = 0; i < 10; ++i) {
      auto r = prefetcher_->Open(Name(i), backing_.Version(Name(i)));
      ASSERT_TRUE(r.ok()) << r.status().message();
      ASSERT_NE(r->blob, nullptr);
      EXPECT_EQ(std::string(r->blob->data(), r->blob->size()), Content(i));
    }
  }
  testing::MemBacking backing_;
  testing::TempDir tmp_;
  const std::string dir_ = tmp_.path();
  std::unique_ptr<RamTier> ram_;
  std::unique_ptr<SsdTier> ssd_;
  std::unique_ptr<Stats> stats_;
  std::unique_ptr<Prefetcher> prefetcher_;
};

TEST_F(TierStackTest, HotFilesInRamTheRestOnSsdAndTheSsdIsReusedByTheNextDaemon) {
  Up(4, 6);
  Install();
  WaitFilled(10);
  EXPECT_EQ(ram_->used_bytes() / kSize, 4u);
  EXPECT_EQ(ssd_->objects(), 6u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ram_->Contains(Name(i), backing_.Version(Name(i))));
  ReadAll();
  EXPECT_EQ(stats_->served_tier[0].load(), 4u);
  EXPECT_EQ(stats_->served_tier[1].load(), 6u);
  EXPECT_EQ(backing_.reads(), 10u);

  Down();
  Up(4, 6);
  Install();
  WaitFilled(4);  // only RAM is filled: the SSD already holds its six
  ReadAll();
  EXPECT_EQ(backing_.reads(), 14u);  // the four RAM files only
  EXPECT_EQ(stats_->tier_fetched[1].load(), 0u);
  EXPECT_EQ(stats_->served_tier[1].load(), 6u);
}

TEST_F(TierStackTest, ABiggerRamTierIsFilledFromTheSsdNotTheBackingStore) {
  Up(4, 6);
  Install();
  WaitFilled(10);
  Down();
  Up(10, 6, false);  // now everything fits in RAM; no kept copies: tiers stay exclusive
  Install();
  WaitFilled(10);
  EXPECT_EQ(stats_->tier_promoted[0].load(), 6u);
  EXPECT_EQ(backing_.reads(), 14u);  // 10 at first, then the 4 RAM files; none for the six
  EXPECT_EQ(ssd_->objects(), 0u);    // promoted objects left the SSD
  ReadAll();
  EXPECT_EQ(stats_->served_tier[0].load(), 10u);
}

// Warm restarts: the SSD has room beyond its own six objects, so it also keeps the four RAM
// objects, and the next daemon reads nothing from the backing store.
TEST_F(TierStackTest, RamObjectsKeptOnTheSsdSoTheNextDaemonReadsNothingFromTheBackingStore) {
  Up(4, 10);
  Install();
  WaitFilled(10);
  ASSERT_TRUE(testing::WaitFor([&] { return stats_->kept.written.load() == 4; }))
      << stats_->kept.written.load();
  EXPECT_EQ(ssd_->objects(), 10u);
  ReadAll();
  EXPECT_EQ(backing_.reads(), 10u);
  EXPECT_EQ(stats_->served_tier[0].load(), 4u);  // the copies do not change who serves

  Down();
  Up(4, 10);
  Install();
  WaitFilled(4);  // the RAM tier, filled from the SSD's copies
  ReadAll();
  EXPECT_EQ(backing_.reads(), 10u) << "nothing read again";
  EXPECT_EQ(stats_->tier_promoted[0].load(), 4u);
  EXPECT_EQ(stats_->kept.queued.load(), 0u);  // copied up from the keep tier: nothing to write
  EXPECT_EQ(ssd_->objects(), 10u) << "a promotion keeps the kept copy";
  EXPECT_EQ(stats_->served_tier[0].load(), 4u);
  EXPECT_EQ(stats_->served_tier[1].load(), 6u);
  EXPECT_EQ(ssd_->corruptions(), 0u);
}

TEST_F(TierStackTest, CorruptSsdObjectIsServedFromTheBackingStore) {
  Up(4, 6);
  Install();
  WaitFilled(10);
  ASSERT_TRUE(ssd_->CorruptForTest(Name(7)).ok());
  ReadAll();  // checks every byte
  EXPECT_EQ(ssd_->corruptions(), 1u);
  EXPECT_EQ(stats_->served_backing.load(), 1u);
}

// TierStack alone, over two RAM tiers: stores follow the active placement, promotion leaves one
// copy, a new placement evicts what it does not give a tier, a pending one stores nothing.
TEST(TierStackAlone, StoresFollowTheActivePlacementAndTiersStayExclusive) {
  testing::MemBacking backing;
  for (int i = 0; i < 4; ++i) backing.AddFile(Name(i), Content(i));
  RamTier ram("ram", 2 * (kSize + 1)), slow("slow", 4 * (kSize + 1));
  TierStack stack({&ram, &slow});
  auto blob = [&](int i) { return backing.Read(Name(i), ByteRange::Whole()).value(); };
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  // Before any placement nothing is stored.
  EXPECT_EQ(stack.Store(0, Name(0), blob(0), std::nullopt, deadline).code(), Code::kUnavailable);

  // Files 0 and 1 read twice (RAM), 2 and 3 once (the slower tier).
  auto plan = testing::PlanOfEpochs(backing, {{0, 1, 2, 3}, {0, 1}}, Name);
  PlaceObjects(*plan, {{"ram", "slow"}, {ram.capacity(), slow.capacity()}, 0});
  ASSERT_EQ(plan->objects[plan->Find(Name(0))].place, Placement::Tier(0));
  ASSERT_EQ(plan->objects[plan->Find(Name(2))].place, Placement::Tier(1));
  stack.SetPlacement(plan);
  EXPECT_EQ(stack.Store(1, Name(0), blob(0), std::nullopt, deadline).code(), Code::kUnavailable)
      << "the placement gives file 0 to RAM, not the slower tier";
  ASSERT_TRUE(stack.Store(1, Name(2), blob(2), std::nullopt, deadline).ok());
  size_t found = 9;
  ASSERT_TRUE(stack.Get(Name(2), backing.Version(Name(2)), std::nullopt, &found).ok());
  EXPECT_EQ(found, 1u);
  EXPECT_FALSE(stack.Get(Name(2), backing.Version(Name(2)), 1).ok());  // except the holder

  // A new placement puts file 2 in RAM: the slower copy is kept for promotion until then.
  auto plan2 = testing::PlanOfEpochs(backing, {{2, 2, 3}}, Name);
  PlaceObjects(*plan2, {{"ram", "slow"}, {ram.capacity(), slow.capacity()}, 0});
  ASSERT_EQ(plan2->objects[plan2->Find(Name(2))].place, Placement::Tier(0));
  stack.SetPlacement(plan2);
  EXPECT_TRUE(slow.Contains(Name(2), backing.Version(Name(2))));
  auto lower = stack.Get(Name(2), backing.Version(Name(2)), std::nullopt, &found);
  ASSERT_TRUE(lower.ok());
  ASSERT_TRUE(stack.Store(0, Name(2), lower.value(), found, deadline).ok());
  EXPECT_TRUE(ram.Contains(Name(2), backing.Version(Name(2))));
  EXPECT_FALSE(slow.Contains(Name(2), backing.Version(Name(2)))) << "tiers stay exclusive";

  // A third placement without file 2 evicts it; a pending one evicts nothing, stores nothing.
  auto plan3 = testing::PlanOfEpochs(backing, {{3}}, Name);
  PlaceObjects(*plan3, {{"ram", "slow"}, {ram.capacity(), slow.capacity()}, 0});
  ASSERT_TRUE(stack.Store(0, Name(2), blob(2), std::nullopt, deadline).ok());
  stack.SetPlacement(plan3);
  EXPECT_EQ(ram.used_bytes(), 0u);
  ASSERT_TRUE(stack.Store(0, Name(3), blob(3), std::nullopt, deadline).ok());
  stack.Suspend();
  EXPECT_EQ(stack.UsedBytes()[0], blob(3)->size());
  EXPECT_EQ(stack.Store(1, Name(3), blob(3), std::nullopt, deadline).code(), Code::kUnavailable);
}

}  // namespace
}  // namespace clairfs
