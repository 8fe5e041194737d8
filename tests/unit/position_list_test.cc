// PositionList: values across block boundaries, shared blocks copied before they change.
#include "cache/position_list.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace clairfs {
namespace {

constexpr size_t kB = PositionList::kBlock;

TEST(PositionListTest, PushIndexTruncateAcrossBlocks) {
  PositionList l;
  std::vector<uint32_t> want;
  for (uint32_t i = 0; i < 2 * kB + 17; ++i) {
    l.push_back(i * 7);
    want.push_back(i * 7);
  }
  ASSERT_EQ(l.size(), want.size());
  EXPECT_EQ(l[0], 0u);
  EXPECT_EQ(l[kB], want[kB]);
  EXPECT_EQ(l[2 * kB + 16], want.back());
  EXPECT_EQ(l.ToVector(), want);
  l.truncate(kB + 3);
  want.resize(kB + 3);
  EXPECT_EQ(l.ToVector(), want);
  l.truncate(kB);
  l.push_back(5);
  want.resize(kB);
  want.push_back(5);
  EXPECT_EQ(l.ToVector(), want);
  l.truncate(0);
  EXPECT_TRUE(l.empty());
}

TEST(PositionListTest, ExtendAgreesWithPushBackAndLeavesSharedBlocksAlone) {
  std::mt19937 rng(5);
  PositionList bulk, one;
  std::vector<uint32_t> want;
  PositionList shared;  // a copy taken midway shares blocks with bulk
  std::vector<uint32_t> shared_want;
  while (want.size() < 2 * kB + 1000) {
    // Runs of random length, some crossing a block boundary, some empty.
    const size_t n = rng() % 4 == 0 ? rng() % (kB / 2) : rng() % 50;
    const uint32_t base = rng();
    bulk.Extend(n, [&](size_t k) { return static_cast<uint32_t>(base + k); });
    for (size_t k = 0; k < n; ++k) {
      one.push_back(static_cast<uint32_t>(base + k));
      want.push_back(static_cast<uint32_t>(base + k));
    }
    if (shared.empty() && want.size() > kB / 2) {
      shared = bulk;
      shared_want = want;
    }
  }
  EXPECT_EQ(bulk.size(), want.size());
  EXPECT_EQ(bulk.ToVector(), want);
  EXPECT_EQ(one.ToVector(), want);
  EXPECT_EQ(shared.ToVector(), shared_want);
}

TEST(PositionListTest, CopiesShareBlocksAndNeverSeeLaterChanges) {
  PositionList a;
  for (uint32_t i = 0; i < kB + 5; ++i) a.push_back(i);
  PositionList b = a;  // shares both blocks
  b.push_back(99);     // copies the partial last block first
  b.Transform([](uint32_t v) { return v + 1; });
  EXPECT_EQ(a.size(), kB + 5);
  EXPECT_EQ(a[kB + 4], kB + 4);
  EXPECT_EQ(a[0], 0u);
  EXPECT_EQ(b[0], 1u);
  EXPECT_EQ(b[kB + 5], 100u);
  PositionList c = a;
  c.truncate(3);  // a's blocks untouched
  EXPECT_EQ(a[2], 2u);
  EXPECT_EQ(a.size(), kB + 5);
}

TEST(PositionListTest, AppendSharesAlignedBlocksAndCopiesOtherwise) {
  std::mt19937 rng(7);
  for (int round = 0; round < 6; ++round) {
    const size_t n1 = round % 2 ? kB : rng() % (2 * kB);
    const size_t n2 = rng() % (2 * kB);
    PositionList a, b;
    std::vector<uint32_t> want;
    for (size_t i = 0; i < n1; ++i) a.push_back(static_cast<uint32_t>(rng())), want.push_back(a[i]);
    for (size_t i = 0; i < n2; ++i) b.push_back(static_cast<uint32_t>(rng())), want.push_back(b[i]);
    const std::vector<uint32_t> b_before = b.ToVector();
    a.Append(b);
    a.push_back(1);
    want.push_back(1);
    EXPECT_EQ(a.ToVector(), want);
    EXPECT_EQ(b.ToVector(), b_before);  // b never sees a's push_back
    size_t seen = 0;
    a.ForEachSpan(n1 / 2, a.size(), [&](std::span<const uint32_t> s) {
      for (uint32_t v : s) EXPECT_EQ(v, want[n1 / 2 + seen++]);
    });
    EXPECT_EQ(seen, a.size() - n1 / 2);
  }
}

}  // namespace
}  // namespace clairfs
