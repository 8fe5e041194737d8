// The peer tier without MPI: protocol encodings, cluster placement, and whole nodes
// (MemBacking + RamTier + Prefetcher + ClusterNode) talking over a LoopbackNetwork.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "cache/base/log.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ram_tier.h"
#include "cluster/cluster_node.h"
#include "cluster/loopback_transport.h"
#include "cluster/placement_coordinator.h"
#include "cluster/plan_parts.h"
#include "cluster/protocol.h"
#include "tests/unit/cluster_node_util.h"
#include "tests/unit/cluster_test_util.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs::cluster {
namespace {

using namespace std::chrono_literals;
using clairfs::testing::MemBacking;
using clairfs::testing::Node;

// kPart and kAssign encodings: cluster_holders_test.cc.
TEST(ProtocolTest, RoundTripsAndRejectsTruncatedMessages) {
  auto req = EncodeRequest({9, {3, 4}, "x/y"});
  auto q = DecodeRequest({req.data(), req.size()});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->id, 9u);
  EXPECT_EQ(q->key, "x/y");
  EXPECT_FALSE(DecodeRequest({req.data(), req.size() - 1}));
  auto rep = EncodeReply({5, 1, 42, {3, 4}}, "abc", 3);
  const char* data;
  size_t n;
  auto h = DecodeReply({rep.data(), rep.size()}, &data, &n);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->hash, 42u);
  EXPECT_EQ(std::string(data, n), "abc");
  auto have = EncodeHave({{{"p", {1, 1}}, {"q", {2, 2}}}});
  auto hv = DecodeHave({have.data(), have.size()});
  ASSERT_TRUE(hv);
  EXPECT_EQ(hv->objects.size(), 2u);
}

TEST(ProtocolTest, EveryMessageCarriesMagicAndVersion) {
  std::vector<std::vector<char>> all = {EncodePart({}),
                                        EncodePart({2, 0, 1, 100, {{0x1234, 100, 1, 0}}}),
                                        EncodePart({3, 2, 1, 100, {}, {0x1234}}),
                                        EncodeAssignment({}, 0),
                                        EncodeAssignment({3, {}, {0, kNoHolder}, {7}}, 0),
                                        EncodeHave({{{"p", {1, 1}}}}),
                                        EncodeRequest({1, {1, 1}, "p"}),
                                        EncodeReply({1, 0, 0, {1, 1}}, nullptr, 0),
                                        EncodeBye()};
  auto blob = clairfs::testing::MakeBlob("abc");
  all.push_back(EncodePush("p", *blob));
  for (const auto& m : all) {
    uint16_t version = 0;
    ASSERT_EQ(CheckHeader({m.data(), m.size()}, &version), HeaderCheck::kOk);
    EXPECT_EQ(version, kProtocolVersion);
  }
  // Another version: recognized as such, and not decoded.
  auto req = EncodeRequest({9, {3, 4}, "x/y"});
  const uint16_t other = kProtocolVersion + 1;
  std::memcpy(req.data() + 4, &other, 2);
  uint16_t version = 0;
  EXPECT_EQ(CheckHeader({req.data(), req.size()}, &version), HeaderCheck::kOtherVersion);
  EXPECT_EQ(version, other);
  EXPECT_FALSE(DecodeRequest({req.data(), req.size()}));
  // The unversioned protocol (no header): no magic.
  auto old = EncodeRequest({9, {3, 4}, "x/y"});
  old.erase(old.begin(), old.begin() + kHeaderBytes);
  EXPECT_EQ(CheckHeader({old.data(), old.size()}, &version), HeaderCheck::kNoMagic);
  EXPECT_FALSE(DecodeRequest({old.data(), old.size()}));
  EXPECT_EQ(CheckHeader({}, &version), HeaderCheck::kNoMagic);
  ReplyHeader h;
  const char* data;
  size_t n;
  auto push = EncodePush("p", *blob);
  EXPECT_EQ(DecodePush({push.data(), push.size()}, &h, &data, &n), "p");
  EXPECT_EQ(std::string(data, n), "abc");
}

using clairfs::testing::ForwardingTransport;

// Flips one byte in every reply it receives.
class CorruptingTransport : public ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  std::optional<Message> Receive(std::chrono::milliseconds wait) override {
    auto m = ForwardingTransport::Receive(wait);
    if (m && m->tag == kReply && !m->bytes.empty()) m->bytes.back() ^= 0x40;
    return m;
  }
};

// Sends every message as a clairfs of another protocol version would; version 0: without the
// header, as the unversioned protocol did.
class OtherVersionTransport : public ForwardingTransport {
 public:
  OtherVersionTransport(Transport& inner, uint16_t version)
      : ForwardingTransport(inner), version_(version) {}
  void Send(int dst, int tag, std::vector<char> bytes) override {
    if (version_ == 0) {
      bytes.erase(bytes.begin(), bytes.begin() + kHeaderBytes);
    } else {
      std::memcpy(bytes.data() + 4, &version_, 2);
    }
    ForwardingTransport::Send(dst, tag, std::move(bytes));
  }

 private:
  const uint16_t version_;
};

class ClusterTest : public ::testing::Test {
 protected:
  static constexpr int kFiles = 120;
  static constexpr size_t kSize = 1000;
  static std::string Name(int i) { return "d/f" + std::to_string(i); }
  static std::string Content(int i) {
    std::string s(kSize, '\0');
    for (size_t k = 0; k < kSize; ++k) s[k] = static_cast<char>('a' + (i * 13 + k) % 26);
    return s;
  }
  void SetUp() override {
    for (int i = 0; i < kFiles; ++i) backing_.AddFile(Name(i), Content(i));
  }
  // A seeded global shuffle per epoch, split round-robin across ranks (DistributedSampler).
  static std::vector<std::vector<int>> Order(int rank, int world, int epochs) {
    std::vector<std::vector<int>> out;
    for (int e = 0; e < epochs; ++e) {
      std::vector<int> all(kFiles);
      for (int i = 0; i < kFiles; ++i) all[i] = i;
      std::mt19937 rng(1000 + e);
      std::shuffle(all.begin(), all.end(), rng);
      std::vector<int> mine;
      for (size_t k = rank; k < all.size(); k += world) mine.push_back(all[k]);
      out.push_back(mine);
    }
    return out;
  }
  std::shared_ptr<Plan> PlanOf(const std::vector<std::vector<int>>& epochs) {
    return clairfs::testing::PlanOfEpochs(backing_, epochs, Name);
  }
  void StartNodes(int n, uint64_t ram, PeerOptions po, uint64_t staging = 64 << 10) {
    net_ = std::make_unique<LoopbackNetwork>(n);
    stats_ = std::vector<NodeStats>(n);
    for (int r = 0; r < n; ++r) {
      nodes_.push_back(std::make_unique<Node>(backing_, net_->at(r), ram, po, &stats_[r], staging));
    }
  }
  static bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = 10s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }
  uint64_t TierFetched(int r) { return stats_[r].cache.tier_fetched[0].load(); }
  void ReadAll(int r, const std::vector<std::vector<int>>& epochs) {
    for (const auto& e : epochs) {
      for (int i : e) {
        auto res = nodes_[r]->prefetcher->Open(Name(i), backing_.Version(Name(i)));
        ASSERT_TRUE(res.ok()) << res.status().message();
        ASSERT_TRUE(res->blob) << Name(i);
        ASSERT_EQ(std::string(res->blob->data(), res->blob->size()), Content(i)) << Name(i);
      }
    }
  }
  void TearDown() override { nodes_.clear(); }

  MemBacking backing_;
  std::unique_ptr<LoopbackNetwork> net_;
  std::unique_ptr<Transport> wrapper_;  // between a node and net_, when a test needs one
  std::vector<NodeStats> stats_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(ClusterTest, BackingStoreIsReadOnceAcrossTheCluster) {
  const int n = 4;
  // Each node holds 30% of the dataset: together they hold it all, none alone.
  StartNodes(n, kFiles * kSize * 3 / 10, PeerOptions{});
  std::vector<std::vector<std::vector<int>>> orders;
  for (int r = 0; r < n; ++r) {
    orders.push_back(Order(r, n, 3));
    nodes_[r]->prefetcher->Install(PlanOf(orders[r]));
  }
  // Every file has an owner; wait until the owners hold them and announced them.
  ASSERT_TRUE(WaitFor([&] {
    uint64_t held = 0;
    for (int r = 0; r < n; ++r) held += TierFetched(r);
    return held == kFiles;
  }));
  ASSERT_TRUE(WaitFor([&] { return nodes_[0]->peer.directory().bytes() >= kSize; }));
  std::this_thread::sleep_for(100ms);  // the last announcements
  std::vector<std::thread> readers;
  for (int r = 0; r < n; ++r) readers.emplace_back([&, r] { ReadAll(r, orders[r]); });
  for (auto& t : readers) t.join();
  EXPECT_EQ(backing_.reads(), static_cast<uint64_t>(kFiles));
  uint64_t from_peers = 0;
  for (int r = 0; r < n; ++r)
    from_peers += stats_[r].cache.peer_fetched + stats_[r].cache.served_peer;
  EXPECT_GT(from_peers, 0u);
  EXPECT_EQ(stats_[0].cluster.peer_errors.load(), 0u);
  auto info = nodes_[0]->peer.InfoJson();
  EXPECT_NE(info.find("\"state\":\"placed\""), std::string::npos) << info;
}

TEST_F(ClusterTest, ANodeThatNeverRegistersDelaysOthersOnlyUntilTheDeadline) {
  PeerOptions po;
  po.plan_timeout = 300ms;
  StartNodes(3, kFiles * kSize, po);
  auto order0 = Order(0, 3, 1), order1 = Order(1, 3, 1);
  const auto start = std::chrono::steady_clock::now();
  nodes_[0]->prefetcher->Install(PlanOf(order0));
  nodes_[1]->prefetcher->Install(PlanOf(order1));
  // Rank 2 never registers: placement waits for it at most plan_timeout, then every file of
  // the two plans comes to be held by rank 0 or rank 1. Held, not counted: a file fetched
  // before the placement may be held by both, so a sum of fetches can pass the number of
  // files, most likely on a loaded machine.
  const auto held_by_either = [&] {
    for (const auto* order : {&order0, &order1}) {
      for (int i : (*order)[0]) {
        const FileVersion v = backing_.Version(Name(i));
        if (!nodes_[0]->prefetcher->GetLocal(Name(i), v).ok() &&
            !nodes_[1]->prefetcher->GetLocal(Name(i), v).ok()) {
          return false;
        }
      }
    }
    return true;
  };
  ASSERT_TRUE(WaitFor(held_by_either, 30s))
      << "fetched " << TierFetched(0) << " + " << TierFetched(1) << " for "
      << order0[0].size() + order1[0].size() << " files; rank 0: " << nodes_[0]->peer.InfoJson()
      << "; rank 1: " << nodes_[1]->peer.InfoJson();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  ReadAll(0, order0);
  ReadAll(1, order1);
  // Reads before the placement are served on demand, not blocked.
  EXPECT_NE(nodes_[0]->peer.InfoJson().find("\"placed_with\":[0,1]"), std::string::npos);
}

TEST_F(ClusterTest, ACoordinatorThatNeverAnswersIsMarkedDownAndItsObjectsMove) {
  PeerOptions po;
  po.plan_timeout = 200ms;
  net_ = std::make_unique<LoopbackNetwork>(3);  // rank 2 never runs: it died before answering
  stats_ = std::vector<NodeStats>(3);
  for (int r = 0; r < 2; ++r) {
    nodes_.push_back(std::make_unique<Node>(backing_, net_->at(r), kFiles * kSize, po, &stats_[r]));
  }
  auto order0 = Order(0, 2, 1), order1 = Order(1, 2, 1);
  nodes_[0]->prefetcher->Install(PlanOf(order0));
  nodes_[1]->prefetcher->Install(PlanOf(order1));
  // Every object gets a holder once rank 2 is marked down and its objects moved to the
  // coordinators left: the two readers hold all they read between them. (Before that the
  // staging window reads the objects without a holder from the backing store too.)
  auto held = [&](int r) { return nodes_[r]->prefetcher->TierUsedBytes()[0]; };
  ASSERT_TRUE(WaitFor([&] { return held(0) + held(1) == kFiles * kSize; }))
      << held(0) << " + " << held(1);
  for (int r = 0; r < 2; ++r) {
    const std::string info = nodes_[r]->peer.InfoJson();
    EXPECT_NE(info.find("\"unreachable\":[2]"), std::string::npos) << info;
    EXPECT_NE(info.find("\"unanswered\":[]"), std::string::npos) << info;
  }
  ReadAll(0, order0);
  ReadAll(1, order1);
}

TEST_F(ClusterTest, ADeadPeerIsMarkedDownAndReadsFallBackToTheBackingStore) {
  PeerOptions po;
  po.peer_timeout = 200ms;
  const int n = 2;
  StartNodes(n, kFiles * kSize / 2, po, 2 * kSize);  // a small window: most reads come later
  auto all = Order(0, 1, 1);  // both nodes read everything once, in the same order
  nodes_[0]->prefetcher->Install(PlanOf(all));
  nodes_[1]->prefetcher->Install(PlanOf(all));
  ASSERT_TRUE(WaitFor([&] { return TierFetched(0) + TierFetched(1) == kFiles; }));
  ASSERT_TRUE(
      WaitFor([&] { return nodes_[0]->peer.directory().bytes() == TierFetched(1) * kSize; }));
  net_->Kill(1);
  const auto start = std::chrono::steady_clock::now();
  ReadAll(0, all);  // correct bytes although half the files were held by the dead node
  // One request waited for the deadline; after that the node was skipped.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_GE(stats_[0].cluster.peer_errors.load(), 1u);
  EXPECT_NE(nodes_[0]->peer.InfoJson().find("\"unreachable\":[1]"), std::string::npos);
}

TEST_F(ClusterTest, FilesReadBeforeTheirHolderHadThemAreFetchedByItOnce) {
  net_ = std::make_unique<LoopbackNetwork>(2);
  stats_ = std::vector<NodeStats>(2);
  // Node 1 never fills its tier itself: whatever it holds it fetched because node 0 asked.
  nodes_.push_back(
      std::make_unique<Node>(backing_, net_->at(0), kFiles * kSize / 2, PeerOptions{}, &stats_[0]));
  nodes_.push_back(std::make_unique<Node>(backing_, net_->at(1), kFiles * kSize / 2, PeerOptions{},
                                          &stats_[1], 64 << 10, 0));
  auto all = Order(0, 1, 1);
  nodes_[0]->prefetcher->Install(PlanOf(all));
  nodes_[1]->prefetcher->Install(PlanOf(all));
  ASSERT_TRUE(WaitFor([&] { return TierFetched(0) == kFiles / 2; }));
  ASSERT_TRUE(WaitFor([&] {
    return nodes_[1]->peer.InfoJson().find("\"state\":\"placed\"") != std::string::npos;
  }));
  ReadAll(0, all);  // half of these are node 1's: node 1 reads them for node 0
  EXPECT_EQ(backing_.reads(), static_cast<uint64_t>(kFiles));  // each file once
  EXPECT_EQ(TierFetched(1), static_cast<uint64_t>(kFiles / 2));
  EXPECT_EQ(stats_[1].cache.peer_adopted.load(), 0u);  // nothing pushed: node 0 read none of them
  EXPECT_EQ(stats_[0].cache.peer_fetched.load(), static_cast<uint64_t>(kFiles / 2));
  ASSERT_TRUE(WaitFor([&] { return nodes_[0]->peer.directory().bytes() == kFiles / 2 * kSize; }));
  ReadAll(1, all);  // all from its own tier or node 0's: no backing read
  EXPECT_EQ(backing_.reads(), static_cast<uint64_t>(kFiles));
}

TEST_F(ClusterTest, FilesReadBeforeTheirOwnerHadThemArePushedToIt) {
  net_ = std::make_unique<LoopbackNetwork>(2);
  stats_ = std::vector<NodeStats>(2);
  // Node 1 never fills its tier itself, nor fetches for node 0: whatever it holds was pushed
  // by node 0.
  nodes_.push_back(
      std::make_unique<Node>(backing_, net_->at(0), kFiles * kSize / 2, PeerOptions{}, &stats_[0]));
  nodes_.push_back(std::make_unique<Node>(backing_, net_->at(1), kFiles * kSize / 2, PeerOptions{},
                                          &stats_[1], 64 << 10, 0, false));
  auto all = Order(0, 1, 1);
  nodes_[0]->prefetcher->Install(PlanOf(all));
  nodes_[1]->prefetcher->Install(PlanOf(all));
  ASSERT_TRUE(WaitFor([&] { return TierFetched(0) == kFiles / 2; }));
  // A node that has not placed its plan yet has no tier for a pushed file and drops it.
  ASSERT_TRUE(WaitFor([&] {
    return nodes_[1]->peer.InfoJson().find("\"state\":\"placed\"") != std::string::npos;
  }));
  ReadAll(0, all);  // half of these are node 1's: read from the backing store, then pushed
  ASSERT_TRUE(WaitFor([&] { return stats_[1].cache.peer_adopted.load() == kFiles / 2; }));
  const uint64_t reads = backing_.reads();
  EXPECT_EQ(reads, static_cast<uint64_t>(kFiles));
  // Node 0's announcements, and node 1's of what it adopted.
  ASSERT_TRUE(WaitFor([&] { return nodes_[1]->peer.directory().bytes() == kFiles / 2 * kSize; }));
  ASSERT_TRUE(WaitFor([&] { return nodes_[0]->peer.directory().bytes() == kFiles / 2 * kSize; }));
  ReadAll(1, all);  // all from its own tier or node 0's: no backing read
  EXPECT_EQ(backing_.reads(), reads);
  EXPECT_GE(stats_[1].cluster.peer_bytes_in.load(), uint64_t{kFiles / 2 * kSize});  // the pushes
}

TEST_F(ClusterTest, DamagedRepliesAreNeverServed) {
  net_ = std::make_unique<LoopbackNetwork>(2);
  stats_ = std::vector<NodeStats>(2);
  wrapper_ = std::make_unique<CorruptingTransport>(net_->at(0));
  nodes_.push_back(std::make_unique<Node>(backing_, *wrapper_, kFiles * kSize / 2, PeerOptions{},
                                          &stats_[0], 2 * kSize));
  nodes_.push_back(std::make_unique<Node>(backing_, net_->at(1), kFiles * kSize / 2, PeerOptions{},
                                          &stats_[1], 2 * kSize));
  auto all = Order(0, 1, 1);
  nodes_[0]->prefetcher->Install(PlanOf(all));
  nodes_[1]->prefetcher->Install(PlanOf(all));
  ASSERT_TRUE(WaitFor([&] { return TierFetched(0) + TierFetched(1) == kFiles; }));
  ASSERT_TRUE(
      WaitFor([&] { return nodes_[0]->peer.directory().bytes() == TierFetched(1) * kSize; }));
  ReadAll(0, all);
  EXPECT_GE(stats_[0].cluster.peer_errors.load(), 1u);
  EXPECT_EQ(stats_[0].cluster.peer_bytes_in.load(), 0u);
}

TEST_F(ClusterTest, APeerOfAnotherProtocolVersionIsRefusedAndTreatedAsDown) {
  for (const uint16_t other : {uint16_t{kProtocolVersion + 1}, uint16_t{0}}) {
    SCOPED_TRACE(other);
    const LogCapture log;
    PeerOptions po;
    po.plan_timeout = 5s;  // rank 1 never counts as registered: placement must not wait for it
    po.peer_timeout = 200ms;
    net_ = std::make_unique<LoopbackNetwork>(2);
    stats_ = std::vector<NodeStats>(2);
    wrapper_ = std::make_unique<OtherVersionTransport>(net_->at(1), other);
    nodes_.push_back(std::make_unique<Node>(backing_, net_->at(0), kFiles * kSize / 2, po,
                                            &stats_[0], 2 * kSize));
    nodes_.push_back(
        std::make_unique<Node>(backing_, *wrapper_, kFiles * kSize / 2, po, &stats_[1], 2 * kSize));
    auto all = Order(0, 1, 1);
    nodes_[1]->prefetcher->Install(PlanOf(all));
    nodes_[0]->prefetcher->Install(PlanOf(all));
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(WaitFor([&] {
      return nodes_[0]->peer.InfoJson().find("\"state\":\"placed\"") != std::string::npos;
    }));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
    ReadAll(0, all);  // right bytes, none of them from the refused peer
    EXPECT_GE(stats_[0].cluster.peer_protocol_errors.load(), 1u);
    EXPECT_EQ(stats_[0].cluster.peer_bytes_in.load(), 0u);
    EXPECT_EQ(stats_[0].cache.served_peer.load() + stats_[0].cache.peer_fetched.load(), 0u);
    const std::string info = nodes_[0]->peer.InfoJson();
    EXPECT_NE(info.find("\"unreachable\":[1]"), std::string::npos) << info;
    EXPECT_NE(info.find("\"placed_with\":[0]"), std::string::npos) << info;
    nodes_.clear();
    const std::string text = log.Text();
    const std::string want =
        other == 0 ? "peer rank 1 refused: its messages lack the clairfs protocol magic"
                   : "peer rank 1 refused: it speaks clairfs peer protocol version " +
                         std::to_string(other) + ", this node (rank 0) version " +
                         std::to_string(kProtocolVersion);
    EXPECT_NE(text.find(want), std::string::npos) << text;
    EXPECT_EQ(text.find(want), text.rfind(want)) << "logged once: " << text;
  }
}

// Cuts every kPart it sends short by one byte: a part no coordinator can decode.
class PartTruncatingTransport : public ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  void Send(int dst, int tag, std::vector<char> bytes) override {
    if (tag == kPart) bytes.pop_back();
    ForwardingTransport::Send(dst, tag, std::move(bytes));
  }
};

TEST_F(ClusterTest, EachRankIsSentOnlyThePartItCoordinates) {
  const int n = 3;
  net_ = std::make_unique<LoopbackNetwork>(n);
  ClusterStats stats;
  ClusterNode peer(net_->at(0), PeerOptions{}, &stats);  // not started: Place() alone sends
  const PlacementLimits limits{{"ram"}, {kFiles * kSize}, 64 << 10};
  const CoordinatorRing ring({0, 1, 2});
  // Registers plan; returns the parts ranks 1 and 2 got (exactly one each).
  auto registered = [&](const std::shared_ptr<Plan>& plan) {
    EXPECT_FALSE(peer.Place(*plan, limits, false));  // the coordinators have not answered
    std::vector<Part> got;
    for (int r = 1; r < n; ++r) {
      auto m = net_->at(r).Receive(1s);
      EXPECT_TRUE(m && m->tag == kPart);
      EXPECT_FALSE(net_->at(r).Receive(0ms)) << "one message per rank and registration";
      std::string why;
      auto p = m ? DecodePart({m->bytes.data(), m->bytes.size()}, &why) : std::nullopt;
      EXPECT_TRUE(p) << why;
      got.push_back(p.value_or(Part{}));
      // About 16 bytes per object: its hash, size, frequency and first read.
      if (m && p) {
        EXPECT_LE(m->bytes.size(), 16 * p->entries.size() + 32);
      }
    }
    return got;
  };
  auto plan = PlanOf(Order(0, 1, 2));
  auto parts = registered(plan);
  size_t sent = 0;
  for (int r = 1; r < n; ++r) {
    for (const PartEntry& e : parts[r - 1].entries) {
      EXPECT_EQ(ring.Coordinator(e.key_hash), r);
      EXPECT_EQ(e.freq, 2u);  // two epochs over every file
      EXPECT_EQ(e.bytes, kSize);
    }
    EXPECT_EQ(parts[r - 1].generation, 1u);
    // Room for all it reads: its budget at each coordinator is what it reads there.
    EXPECT_EQ(parts[r - 1].budget, parts[r - 1].entries.size() * kSize);
    sent += parts[r - 1].entries.size();
  }
  // The rest is rank 0's own: every object goes to exactly one coordinator.
  size_t own = 0;
  for (const PlanObject& o : plan->objects) own += ring.Coordinator(KeyHash(o.key)) == 0;
  EXPECT_EQ(sent + own, static_cast<size_t>(kFiles));
  EXPECT_GT(own, 0u);
  // A new registration: new parts, of generation 2.
  parts = registered(PlanOf(Order(0, 2, 1)));
  EXPECT_EQ(parts[0].generation, 2u);
  EXPECT_LE(parts[1].entries.size() + parts[0].entries.size(), static_cast<size_t>(kFiles / 2));
}

TEST_F(ClusterTest, WhenARankLeavesOrComesBackOnlyTheObjectsThatMoveTravel) {
  net_ = std::make_unique<LoopbackNetwork>(3);
  ClusterStats stats;
  PeerOptions po;
  PeerLiveness liveness(0, 3, po);
  PlacementCoordinator coordinator(net_->at(0), liveness, po, &stats, [] {});
  const PlacementLimits limits{{"ram"}, {kFiles * kSize}, 64 << 10};
  auto plan = PlanOf(Order(0, 1, 1));
  EXPECT_FALSE(coordinator.Place(*plan, limits, false));
  std::string why;
  auto take = [&](int r) {
    auto m = net_->at(r).Receive(1s);
    EXPECT_TRUE(m && m->tag == kPart);
    auto p = m ? DecodePart({m->bytes.data(), m->bytes.size()}, &why) : std::nullopt;
    EXPECT_TRUE(p) << why;
    EXPECT_FALSE(net_->at(r).Receive(0ms)) << "one part per rank";
    return p.value_or(Part{});
  };
  const Part to1 = take(1);
  take(2);
  liveness.MarkGone(2);
  coordinator.Invalidate();
  coordinator.Place(*plan, limits, true);
  // Rank 1 gets only the objects rank 2 coordinated and it now does, extending its part.
  const Part delta = take(1);
  EXPECT_EQ(delta.base, to1.seq);
  EXPECT_GT(delta.seq, to1.seq);
  const CoordinatorRing before({0, 1, 2}), after({0, 1});
  size_t moved = 0;
  for (const PlanObject& o : plan->objects) {
    const uint64_t h = KeyHash(o.key);
    moved += before.Coordinator(h) == 2 && after.Coordinator(h) == 1;
  }
  EXPECT_EQ(delta.entries.size(), moved);
  EXPECT_GT(moved, 0u);
  for (const PartEntry& e : delta.entries) {
    EXPECT_EQ(before.Coordinator(e.key_hash), 2);
    EXPECT_EQ(after.Coordinator(e.key_hash), 1);
  }
  EXPECT_FALSE(net_->at(2).Receive(0ms)) << "nothing to the rank that left";
  // It comes back: rank 1 is told to drop those objects again, rank 2 still holds its part.
  liveness.MarkBack(2);
  coordinator.Invalidate();
  coordinator.Place(*plan, limits, true);
  const Part back = take(1);
  EXPECT_EQ(back.base, delta.seq);
  EXPECT_TRUE(back.entries.empty());
  EXPECT_EQ(back.removed.size(), moved);
  EXPECT_FALSE(net_->at(2).Receive(0ms));
  EXPECT_EQ(ApplyDelta(ApplyDelta(to1.entries, {}, delta.entries), back.removed, {}), to1.entries);
  // A coordinator that does not hold the part a delta extends refuses it.
  PeerLiveness other_liveness(1, 3, po);
  PlacementCoordinator other(net_->at(1), other_liveness, po, &stats, [] {});
  std::vector<char> bytes = EncodePart(delta);
  other.OnPart(0, {bytes.data(), bytes.size()});
  EXPECT_EQ(stats.peer_protocol_errors.load(), 1u);
  bytes = EncodePart(to1);
  other.OnPart(0, {bytes.data(), bytes.size()});
  bytes = EncodePart(delta);
  other.OnPart(0, {bytes.data(), bytes.size()});  // now it does: no error
  EXPECT_EQ(stats.peer_protocol_errors.load(), 1u);
}

TEST_F(ClusterTest, AMalformedPartIsRefusedAndItsRankLeftUnplaced) {
  const LogCapture log;
  PeerOptions po;
  po.plan_timeout = 300ms;
  net_ = std::make_unique<LoopbackNetwork>(2);
  stats_ = std::vector<NodeStats>(2);
  wrapper_ = std::make_unique<PartTruncatingTransport>(net_->at(1));
  nodes_.push_back(
      std::make_unique<Node>(backing_, net_->at(0), kFiles * kSize / 2, po, &stats_[0], 2 * kSize));
  nodes_.push_back(
      std::make_unique<Node>(backing_, *wrapper_, kFiles * kSize / 2, po, &stats_[1], 2 * kSize));
  auto all = Order(0, 1, 1);
  nodes_[1]->prefetcher->Install(PlanOf(all));
  nodes_[1]->prefetcher->Install(PlanOf(Order(0, 1, 2)));  // refused again: logged once
  ASSERT_TRUE(WaitFor([&] { return stats_[0].cluster.peer_protocol_errors.load() >= 2; }));
  nodes_[0]->prefetcher->Install(PlanOf(all));
  ASSERT_TRUE(WaitFor([&] {
    return nodes_[0]->peer.InfoJson().find("\"state\":\"placed\"") != std::string::npos;
  }));
  ReadAll(0, all);
  const std::string info = nodes_[0]->peer.InfoJson();
  EXPECT_NE(info.find("\"placed_with\":[0]"), std::string::npos) << info;
  EXPECT_NE(info.find("\"registered\":[0]"), std::string::npos) << info;
  nodes_.clear();
  const std::string text = log.Text();
  const std::string want = "peer rank 1: plan part refused: trailing bytes";
  const std::string want2 = "peer rank 1: plan part refused: truncated";
  const size_t at = text.find(want) != std::string::npos ? text.find(want) : text.find(want2);
  EXPECT_NE(at, std::string::npos) << text;
}

}  // namespace
}  // namespace clairfs::cluster
