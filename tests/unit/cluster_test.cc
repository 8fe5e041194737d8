// The peer tier without MPI: protocol encodings, cluster placement, and whole nodes
// (MemBacking + RamTier + Prefetcher + ClusterNode) talking over a LoopbackNetwork.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ram_tier.h"
#include "cluster/cluster_node.h"
#include "cluster/loopback_transport.h"
#include "cluster/placement.h"
#include "cluster/protocol.h"
#include "tests/unit/cluster_test_util.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs::cluster {
namespace {

using namespace std::chrono_literals;
using clairfs::testing::MemBacking;

// Digests and catalogs: cluster_digest_test.cc.
TEST(ProtocolTest, RoundTripsAndRejectsTruncatedMessages) {
  auto req = EncodeRequest({9, {3, 4}, "x/y"});
  auto q = DecodeRequest({req.data(), req.size()});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->id, 9u);
  EXPECT_EQ(q->path, "x/y");
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
  EXPECT_EQ(hv->files.size(), 2u);
}

TEST(ProtocolTest, EveryMessageCarriesMagicAndVersion) {
  std::vector<std::vector<char>> all = {
      EncodeDigest({1, 1, {1}, {}}, EncodeCatalog({}), true), EncodeHave({{{"p", {1, 1}}}}),
      EncodeRequest({1, {1, 1}, "p"}), EncodeReply({1, 0, 0, {1, 1}}, nullptr, 0), EncodeBye()};
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

Digest MakeNode(int rank, uint64_t capacity,
                std::vector<std::tuple<std::string, uint32_t, double>> files) {
  Digest d{rank, 1, {capacity}, {}};
  for (auto& [path, freq, first] : files) d.files.push_back({path, {100, 1}, freq, first});
  return d;
}

TEST(PlacementTest, MostFrequentReaderOwnsThenEarliestThenRoomiest) {
  Digest a = MakeNode(0, 1000, {{"f", 1, 0.5}, {"g", 2, 0.1}, {"h", 1, 0.2}});
  Digest b = MakeNode(1, 1000, {{"f", 3, 0.9}, {"g", 2, 0.0}, {"h", 1, 0.6}});
  Digest c = MakeNode(2, 1000, {});
  auto p = PlaceCluster({&a, &b, &c});
  EXPECT_EQ(p.owner.at("f"), 1);  // read most by 1
  EXPECT_EQ(p.owner.at("g"), 1);  // tie: 1 reads it first
  EXPECT_EQ(p.owner.at("h"), 0);  // tie: 0 reads it first
  EXPECT_EQ(p.files, 3u);
  EXPECT_EQ(p.owned_files, 3u);
  EXPECT_EQ(p.predicted_backing_bytes, 300u);  // each file once

  // Readers without room: the roomiest node holds it; nowhere: no owner, read every time.
  Digest small0 = MakeNode(0, 100, {{"x", 2, 0.0}, {"y", 1, 0.1}, {"z", 1, 0.2}});
  Digest small1 = MakeNode(1, 150, {});
  auto q = PlaceCluster({&small0, &small1});
  EXPECT_EQ(q.owner.at("x"), 0);
  EXPECT_EQ(q.owner.at("y"), 1);
  EXPECT_EQ(q.owner.count("z"), 0u);
  EXPECT_EQ(q.predicted_backing_bytes, 100u + 100u + 100u);
}

TEST(PlacementTest, ChunksEveryNodeReadsAlikeAreSpreadOverTheNodes) {
  // 4 nodes read the 400 chunks of one shard equally often and at the same moments (as a
  // shuffled-records job whose ranks see the same order): no node is preferred, so the owners
  // rotate with the key's hash instead of all going to rank 0 (and all fetches to one node).
  std::vector<Digest> nodes;
  for (int r = 0; r < 4; ++r) {
    std::vector<std::tuple<std::string, uint32_t, double>> chunks;
    for (int k = 0; k < 400; ++k) {
      chunks.emplace_back(ObjectKey("shard", {k * 100ull, 100}), 3, k / 400.0);
    }
    nodes.push_back(MakeNode(r, 1'000'000, chunks));
  }
  auto p = PlaceCluster({&nodes[0], &nodes[1], &nodes[2], &nodes[3]});
  std::map<int, int> owned;
  for (const auto& [key, rank] : p.owner) ++owned[rank];
  ASSERT_EQ(owned.size(), 4u);
  for (const auto& [rank, n] : owned) {
    EXPECT_GT(n, 60) << "rank " << rank;  // 100 each on average
    EXPECT_LT(n, 140) << "rank " << rank;
  }
  // The same digests give the same owners on every node.
  auto again = PlaceCluster({&nodes[3], &nodes[1], &nodes[0], &nodes[2]});
  EXPECT_EQ(again.owner, p.owner);
}

TEST(PlacementTest, ApplyPlacementFillsOwnedFilesAndCountsPeerFiles) {
  MemBacking backing;
  for (const char* f : {"f", "g", "h", "k"}) backing.AddFile(f, std::string(100, 'x'));
  ManifestParser parser;
  parser.Feed("f\ng\nh\nf\n");
  PathResolver resolver(backing, {});
  auto plan =
      BuildPlan(std::move(parser).Finish(), resolver, nullptr, StreamChange::kReplace, 1ull << 30);
  ASSERT_TRUE(plan.ok());
  PlacementLimits limits{{"ram"}, {1000}, 1000};
  Digest mine = MakeDigest(*plan.value(), limits, 0, 1);
  Digest other{1, 1, {1000}, {{"g", {100, 1}, 5, 0.0}, {"k", {100, 1}, 1, 0.0}}};
  mine.files.push_back({"k", {100, 1}, 0, 1.0});  // nobody but 1 reads k; force 0 to own it:
  other.tier_capacity = {0};                      // 1 has no room
  mine.files.pop_back();
  auto placement = PlaceCluster({&mine, &other});
  auto local = ApplyPlacement(*plan.value(), limits, placement, {&mine, &other}, 0);
  Plan& p = *plan.value();
  EXPECT_EQ(p.objects[p.Find("f")].place, Placement::Tier(0));
  EXPECT_EQ(p.objects[p.Find("g")].place, Placement::Tier(0));  // 1 reads it more but has no room
  ASSERT_NE(p.Find("k"), kNoPos);                               // owned, not read here: appended
  EXPECT_EQ(p.objects[p.Find("k")].place, Placement::Tier(0));
  EXPECT_EQ(local.owned_files, 4u);
  EXPECT_EQ(local.from_peers_files, 0u);
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

// Sends every kPlan without its catalog, as if the receiver had been sent it already.
class CatalogStrippingTransport : public ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  void Send(int dst, int tag, std::vector<char> bytes) override {
    if (tag == kPlan) {
      std::string why;
      std::optional<Catalog> held;
      auto d = DecodeDigest({bytes.data(), bytes.size()}, &held, &why);
      if (d && held) bytes = EncodeDigest(*d, *held, false);
    }
    ForwardingTransport::Send(dst, tag, std::move(bytes));
  }
};

// One node: its own backing view, RAM tier, prefetcher and cluster node.
struct Node {
  Node(MemBacking& backing, Transport& t, uint64_t ram, PeerOptions po, Stats* stats,
       uint64_t staging = 64 << 10, int tier_threads = 2)
      : ram_tier("ram", ram), peer(t, po, stats) {
    PrefetchOptions o;
    o.staging_capacity = staging;
    o.staging_threads = 2;
    o.tier_threads = {tier_threads};
    o.demand_threads = 2;
    o.fetch_timeout = 10s;
    prefetcher = std::make_unique<Prefetcher>(backing, std::vector<Tier*>{&ram_tier}, o, stats);
    prefetcher->SetCluster(peer.Hooks(0));
    peer.Start(
        [this](const std::string& path, const FileVersion& v) {
          return prefetcher->GetLocal(path, v);
        },
        [this] { prefetcher->Replan(); },
        [this](const std::string& path, BlobPtr b) { prefetcher->Adopt(path, std::move(b)); });
    prefetcher->Start();
  }
  ~Node() {
    prefetcher->Stop();
    peer.Stop();
  }
  RamTier ram_tier;
  ClusterNode peer;
  std::unique_ptr<Prefetcher> prefetcher;
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
    stats_ = std::vector<Stats>(n);
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
  uint64_t TierFetched(int r) { return stats_[r].tier_fetched[0].load(); }
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
  std::vector<Stats> stats_;
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
  for (int r = 0; r < n; ++r) from_peers += stats_[r].peer_fetched + stats_[r].served_peer;
  EXPECT_GT(from_peers, 0u);
  EXPECT_EQ(stats_[0].peer_errors.load(), 0u);
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
  // Rank 2 never registers: placement waits for it at most plan_timeout.
  ASSERT_TRUE(WaitFor([&] { return TierFetched(0) + TierFetched(1) == 2 * order0[0].size(); }));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  ReadAll(0, order0);
  ReadAll(1, order1);
  // Reads before the placement are served on demand, not blocked.
  EXPECT_NE(nodes_[0]->peer.InfoJson().find("\"placed_with\":[0,1]"), std::string::npos);
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
  EXPECT_GE(stats_[0].peer_errors.load(), 1u);
  EXPECT_NE(nodes_[0]->peer.InfoJson().find("\"unreachable\":[1]"), std::string::npos);
}

TEST_F(ClusterTest, FilesReadBeforeTheirOwnerHadThemArePushedToIt) {
  net_ = std::make_unique<LoopbackNetwork>(2);
  stats_ = std::vector<Stats>(2);
  // Node 1 never fills its tier itself: whatever it holds was pushed by node 0.
  nodes_.push_back(
      std::make_unique<Node>(backing_, net_->at(0), kFiles * kSize / 2, PeerOptions{}, &stats_[0]));
  nodes_.push_back(std::make_unique<Node>(backing_, net_->at(1), kFiles * kSize / 2, PeerOptions{},
                                          &stats_[1], 64 << 10, 0));
  auto all = Order(0, 1, 1);
  nodes_[0]->prefetcher->Install(PlanOf(all));
  nodes_[1]->prefetcher->Install(PlanOf(all));
  ASSERT_TRUE(WaitFor([&] { return TierFetched(0) == kFiles / 2; }));
  // A node that has not placed its plan yet has no tier for a pushed file and drops it.
  ASSERT_TRUE(WaitFor([&] {
    return nodes_[1]->peer.InfoJson().find("\"state\":\"placed\"") != std::string::npos;
  }));
  ReadAll(0, all);  // half of these are node 1's: read from the backing store, then pushed
  ASSERT_TRUE(WaitFor([&] { return stats_[1].peer_adopted.load() == kFiles / 2; }));
  const uint64_t reads = backing_.reads();
  EXPECT_EQ(reads, static_cast<uint64_t>(kFiles));
  // Node 0's announcements, and node 1's of what it adopted.
  ASSERT_TRUE(WaitFor([&] { return nodes_[1]->peer.directory().bytes() == kFiles / 2 * kSize; }));
  ASSERT_TRUE(WaitFor([&] { return nodes_[0]->peer.directory().bytes() == kFiles / 2 * kSize; }));
  ReadAll(1, all);  // all from its own tier or node 0's: no backing read
  EXPECT_EQ(backing_.reads(), reads);
  EXPECT_GE(stats_[1].peer_bytes_in.load(), uint64_t{kFiles / 2 * kSize});  // the pushes
}

TEST_F(ClusterTest, DamagedRepliesAreNeverServed) {
  net_ = std::make_unique<LoopbackNetwork>(2);
  stats_ = std::vector<Stats>(2);
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
  EXPECT_GE(stats_[0].peer_errors.load(), 1u);
  EXPECT_EQ(stats_[0].peer_bytes_in.load(), 0u);
}

TEST_F(ClusterTest, APeerOfAnotherProtocolVersionIsRefusedAndTreatedAsDown) {
  for (const uint16_t other : {uint16_t{kProtocolVersion + 1}, uint16_t{0}}) {
    SCOPED_TRACE(other);
    std::ostringstream log;
    auto logger = std::make_shared<spdlog::logger>(
        "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
    auto previous = spdlog::default_logger();
    spdlog::set_default_logger(logger);
    PeerOptions po;
    po.plan_timeout = 5s;  // rank 1 never counts as registered: placement must not wait for it
    po.peer_timeout = 200ms;
    net_ = std::make_unique<LoopbackNetwork>(2);
    stats_ = std::vector<Stats>(2);
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
    EXPECT_GE(stats_[0].peer_protocol_errors.load(), 1u);
    EXPECT_EQ(stats_[0].peer_bytes_in.load(), 0u);
    EXPECT_EQ(stats_[0].served_peer.load() + stats_[0].peer_fetched.load(), 0u);
    const std::string info = nodes_[0]->peer.InfoJson();
    EXPECT_NE(info.find("\"unreachable\":[1]"), std::string::npos) << info;
    EXPECT_NE(info.find("\"placed_with\":[0]"), std::string::npos) << info;
    nodes_.clear();
    spdlog::set_default_logger(previous);
    const std::string text = log.str();
    const std::string want =
        other == 0 ? "peer rank 1 refused: its messages lack the clairfs protocol magic"
                   : "peer rank 1 refused: it speaks clairfs peer protocol version " +
                         std::to_string(other) + ", this node (rank 0) version " +
                         std::to_string(kProtocolVersion);
    EXPECT_NE(text.find(want), std::string::npos) << text;
    EXPECT_EQ(text.find(want), text.rfind(want)) << "logged once: " << text;
  }
}

TEST_F(ClusterTest, TheCatalogIsSentOnlyWhenItChanges) {
  net_ = std::make_unique<LoopbackNetwork>(2);
  Stats stats;
  ClusterNode peer(net_->at(0), PeerOptions{}, &stats);  // not started: Place() alone sends
  const PlacementLimits limits{{"ram"}, {kFiles * kSize}, 64 << 10};
  std::optional<Catalog> held;  // what rank 1 keeps
  // Registers plan and returns the kPlan rank 1 got.
  auto registered = [&](const std::shared_ptr<Plan>& plan, bool replan = false) {
    EXPECT_FALSE(peer.Place(*plan, limits, replan));  // rank 1 has not registered
    auto m = net_->at(1).Receive(1s);
    EXPECT_TRUE(m && m->tag == kPlan);
    EXPECT_FALSE(net_->at(1).Receive(0ms)) << "one message per registration";
    return m ? m->bytes : std::vector<char>{};
  };
  auto carries_catalog = [](const std::vector<char>& bytes) {
    std::optional<Catalog> none;
    std::string why;
    return DecodeDigest({bytes.data(), bytes.size()}, &none, &why).has_value();
  };
  std::string why;
  auto first = registered(PlanOf(Order(0, 1, 2)));
  EXPECT_TRUE(carries_catalog(first));
  auto d = DecodeDigest({first.data(), first.size()}, &held, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->files.size(), static_cast<size_t>(kFiles));
  // An epoch appended over the same files: the digest alone, at most 8 bytes per object plus
  // its fixed part.
  auto second = registered(PlanOf(Order(0, 1, 3)));
  EXPECT_FALSE(carries_catalog(second));
  EXPECT_LE(second.size(), 8u * kFiles + 64);
  d = DecodeDigest({second.data(), second.size()}, &held, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->generation, 2u);
  EXPECT_EQ(d->files[0].freq, 3u);
  // Another file set: a new catalog travels along.
  auto third = registered(PlanOf(Order(0, 2, 1)));
  EXPECT_TRUE(carries_catalog(third));
  d = DecodeDigest({third.data(), third.size()}, &held, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->files.size(), static_cast<size_t>(kFiles / 2));
}

TEST_F(ClusterTest, ADigestNamingAnUnknownCatalogIsRefusedAndItsRankLeftUnplaced) {
  std::ostringstream log;
  auto logger = std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  PeerOptions po;
  po.plan_timeout = 300ms;
  net_ = std::make_unique<LoopbackNetwork>(2);
  stats_ = std::vector<Stats>(2);
  wrapper_ = std::make_unique<CatalogStrippingTransport>(net_->at(1));
  nodes_.push_back(
      std::make_unique<Node>(backing_, net_->at(0), kFiles * kSize / 2, po, &stats_[0], 2 * kSize));
  nodes_.push_back(
      std::make_unique<Node>(backing_, *wrapper_, kFiles * kSize / 2, po, &stats_[1], 2 * kSize));
  auto all = Order(0, 1, 1);
  nodes_[1]->prefetcher->Install(PlanOf(all));
  nodes_[1]->prefetcher->Install(PlanOf(Order(0, 1, 2)));  // refused again: logged once
  ASSERT_TRUE(WaitFor([&] { return stats_[0].peer_protocol_errors.load() >= 2; }));
  nodes_[0]->prefetcher->Install(PlanOf(all));
  ASSERT_TRUE(WaitFor([&] {
    return nodes_[0]->peer.InfoJson().find("\"state\":\"placed\"") != std::string::npos;
  }));
  ReadAll(0, all);
  const std::string info = nodes_[0]->peer.InfoJson();
  EXPECT_NE(info.find("\"placed_with\":[0]"), std::string::npos) << info;
  EXPECT_NE(info.find("\"registered\":[0]"), std::string::npos) << info;
  nodes_.clear();
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  const std::string want = "peer rank 1: plan digest refused: digest names catalog";
  EXPECT_NE(text.find(want), std::string::npos) << text;
  EXPECT_EQ(text.find(want), text.rfind(want)) << "logged once: " << text;
}

}  // namespace
}  // namespace clairfs::cluster
