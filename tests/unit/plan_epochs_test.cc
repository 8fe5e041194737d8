#include "control/plan_epochs.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cache/plan/place.h"
#include "cache/plan/summary.h"

namespace clairfs {
namespace {

// sizes: the objects' bytes; streams: per stream, its epochs' object ids in read order.
std::shared_ptr<Plan> Make(const std::vector<uint64_t>& sizes,
                           const std::vector<std::vector<std::vector<uint32_t>>>& streams) {
  auto p = std::make_shared<Plan>();
  for (size_t i = 0; i < sizes.size(); ++i) {
    p->AddObject("f" + std::to_string(i), {sizes[i], 1});
  }
  for (size_t s = 0; s < streams.size(); ++s) {
    PlanStream st{"s" + std::to_string(s), s + 1, {}, {}};
    for (const auto& epoch : streams[s]) {
      st.epoch_begin.push_back(static_cast<uint32_t>(st.sequence.size()));
      for (uint32_t id : epoch) st.sequence.push_back(id);
    }
    p->streams.push_back(std::move(st));
  }
  p->Finalize();
  return p;
}

void Expect(const EpochSource& s, uint64_t reads, uint64_t bytes) {
  EXPECT_EQ(s.reads, reads);
  EXPECT_EQ(s.bytes, bytes);
}

TEST(PlanEpochs, FirstReadsFillTheTiersLaterOnesComeFromThem) {
  // f0, f1 in RAM (10 + 20 <= 30), f2 staged, f3 larger than the window: direct.
  auto p = Make({10, 20, 30, 100}, {{{0, 1, 2, 3}, {3, 2, 1, 0, 0}}});
  PlacementLimits limits{{"ram"}, {30}, 50};
  PlaceObjects(*p, limits);
  ASSERT_EQ(p->objects[0].place, Placement::Tier(0));
  ASSERT_EQ(p->objects[1].place, Placement::Tier(0));
  ASSERT_EQ(p->objects[3].place, kDirect);
  const auto epochs = PlanEpochs(*p, 1);
  ASSERT_EQ(epochs.size(), 2u);
  Expect(epochs[0].total, 4, 160);
  Expect(epochs[0].backing, 4, 160);
  Expect(epochs[0].fills, 2, 30);
  Expect(epochs[0].tiers[0], 0, 0);
  Expect(epochs[1].total, 5, 170);
  Expect(epochs[1].backing, 2, 130);
  Expect(epochs[1].fills, 0, 0);
  Expect(epochs[1].tiers[0], 3, 40);           // f0 twice
  Expect(epochs[1].tiers_distinct[0], 2, 30);  // f0 once
  uint64_t backing = 0;
  for (const PlanEpoch& e : epochs) backing += e.backing.bytes;
  EXPECT_EQ(backing, Summarize(*p, limits).predicted_backing_bytes);
}

TEST(PlanEpochs, StreamsShareEpochIndexesAndATierObjectIsFilledOnce) {
  // Stream 0 reads f0 in its epoch 2, stream 1 in its epoch 1: the fill is in epoch 1
  // (the first epoch index that reads it); stream 1 has one epoch only.
  auto p = Make({10, 10}, {{{1}, {0}}, {{0, 1}}});
  PlacementLimits limits{{"ram"}, {100}, 50};
  PlaceObjects(*p, limits);
  const auto epochs = PlanEpochs(*p, 1);
  ASSERT_EQ(epochs.size(), 2u);
  Expect(epochs[0].total, 3, 30);
  Expect(epochs[0].fills, 2, 20);
  Expect(epochs[0].tiers[0], 1, 10);  // stream 1's read of f1 after stream 0's fill
  Expect(epochs[1].total, 1, 10);
  Expect(epochs[1].tiers[0], 1, 10);
  Expect(epochs[1].backing, 0, 0);
}

TEST(PlanEpochs, PeersObjectsAreReadFromPeersEveryTime) {
  auto p = Make({10, 10}, {{{0, 1}, {1, 0}}});
  p->objects[0].place = kPeer;
  p->objects[1].place = kStaging;
  const auto epochs = PlanEpochs(*p, 0);
  for (const PlanEpoch& e : epochs) {
    Expect(e.peers, 1, 10);
    Expect(e.backing, 1, 10);
    EXPECT_TRUE(e.tiers.empty());
  }
}

}  // namespace
}  // namespace clairfs
