// PositionList: values across block boundaries, shared blocks copied before they change.
#include "cache/manifest/position_list.h"

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

// Values are packed at the width the largest needs; a wider value re-encodes the list (also
// midway through Extend, whose generator is still called once per value, and in Transform),
// and lists of different widths append into each other.
TEST(PositionListTest, PacksAtTheWidthOfTheLargestValueAndWidensWhenNeeded) {
  PositionList l;
  std::vector<uint32_t> want;
  for (uint32_t i = 0; i < 300; ++i) l.push_back(i), want.push_back(i);
  EXPECT_EQ(l.width(), 9u);
  uint32_t calls = 0;
  l.Extend(kB + 10, [&](size_t k) {
    ++calls;
    return static_cast<uint32_t>(k == kB / 2 ? 1u << 20 : k % 1000);
  });
  for (size_t k = 0; k < kB + 10; ++k) want.push_back(k == kB / 2 ? 1u << 20 : k % 1000);
  EXPECT_EQ(calls, kB + 10);
  EXPECT_EQ(l.width(), 21u);
  EXPECT_EQ(l.ToVector(), want);
  // A 21-bit list of two full blocks takes 21/32 of what 4 bytes per value would.
  PositionList big;
  big.Extend(2 * kB, [](size_t k) { return static_cast<uint32_t>((k * 7919) % 1281167); });
  EXPECT_EQ(big.width(), 21u);
  EXPECT_LE(big.capacity_bytes(), 2 * kB * 21 / 8 + 64);
  EXPECT_EQ(big[kB + 3], ((kB + 3) * 7919) % 1281167);
  // Transform to wider values, on a copy: the original keeps its values and width.
  PositionList wide = l;
  wide.Transform([](uint32_t v) { return v * 1024u + 1u; });
  EXPECT_EQ(wide.width(), 31u);  // (1 << 20) * 1024 + 1
  for (size_t i = 0; i < want.size(); i += 997) EXPECT_EQ(wide[i], want[i] * 1024u + 1u) << i;
  EXPECT_EQ(l.ToVector(), want);
  EXPECT_EQ(l.width(), 21u);
  // Narrow after wide and wide after narrow, aligned on a block boundary or not.
  for (size_t n1 : {size_t{5}, kB}) {
    PositionList narrow;
    for (size_t i = 0; i < n1; ++i) narrow.push_back(static_cast<uint32_t>(i % 3));
    PositionList a = narrow;
    a.Append(l);
    std::vector<uint32_t> a_want = narrow.ToVector();
    a_want.insert(a_want.end(), want.begin(), want.end());
    EXPECT_EQ(a.ToVector(), a_want);
    EXPECT_EQ(a.width(), 21u);
    EXPECT_EQ(narrow.width(), 2u) << "the appended-to copy was widened, not the original";
    PositionList b = l;
    b.Append(narrow);
    std::vector<uint32_t> b_want = want;
    for (size_t i = 0; i < n1; ++i) b_want.push_back(static_cast<uint32_t>(i % 3));
    EXPECT_EQ(b.ToVector(), b_want);
    EXPECT_TRUE(b == PositionList::Of(b_want));
  }
}

}  // namespace
}  // namespace clairfs
