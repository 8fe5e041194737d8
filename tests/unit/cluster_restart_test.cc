// A warm restart without MPI: whole nodes (MemBacking + RamTier + Prefetcher + ClusterNode) over
// a LoopbackNetwork whose tiers hold, before their plans are registered, what a previous job
// left there (as the SSD tiers of the nodes that stay in a requeue do). The new job reads
// another share of the dataset on each node: what a node holds and no longer reads stays with it
// and is served to its readers (cluster/holders.h), and only what no node holds is read again.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cache/prefetch/prefetcher.h"
#include "cluster/loopback_transport.h"
#include "tests/unit/cluster_node_util.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs::cluster {
namespace {

using namespace std::chrono_literals;
using clairfs::testing::MemBacking;
using clairfs::testing::Node;

constexpr int kNodes = 4;
constexpr int kFiles = 120;
constexpr size_t kSize = 1000;

std::string Name(int i) { return "d/f" + std::to_string(i); }
std::string Content(int i, char base = 'a') {
  std::string s(kSize, '\0');
  for (size_t k = 0; k < kSize; ++k) s[k] = static_cast<char>(base + (i * 13 + k) % 26);
  return s;
}

// The blob of content at version, as a tier holds it.
BlobPtr BlobOf(const std::string& content, const FileVersion& version) {
  auto b = Blob::Allocate(content.size(), version);
  std::copy(content.begin(), content.end(), b->mutable_data());
  b->Seal();
  return b;
}

// One epoch of a seeded shuffle, split round-robin across the ranks (DistributedSampler).
std::vector<int> Share(int rank) {
  std::vector<int> all(kFiles);
  for (int i = 0; i < kFiles; ++i) all[i] = i;
  std::mt19937 rng(77);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int> mine;
  for (size_t k = rank; k < all.size(); k += kNodes) mine.push_back(all[k]);
  return mine;
}

// Polls pred every 5 ms until it holds or limit passes.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = 20s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(ClusterRestartTest, ARestartReadsOnlyWhatNoRemainingNodeHolds) {
  MemBacking backing;
  for (int i = 0; i < kFiles; ++i) backing.AddFile(Name(i), Content(i));
  // The previous job: node r (0-2) held the files i with i % 4 == r; node 3 is new (empty).
  // One of node 0's files changed since (it holds an older version), and node 0 does not read
  // it in the new job: that copy must never be served, so it is read again.
  const std::vector<int> zero = Share(0);
  int stale = -1;
  for (int i = 0; i < kFiles && stale < 0; i += kNodes) {
    if (std::find(zero.begin(), zero.end(), i) == zero.end()) stale = i;
  }
  ASSERT_GE(stale, 0);
  LoopbackNetwork net(kNodes);
  std::vector<NodeStats> stats(kNodes);
  std::vector<std::unique_ptr<Node>> nodes;
  // Each tier has room for 30 % of the dataset: a quarter held and a little more.
  for (int r = 0; r < kNodes; ++r) {
    nodes.push_back(std::make_unique<Node>(backing, net.at(r), kFiles * kSize * 3 / 10,
                                           PeerOptions{}, &stats[r]));
  }
  for (int i = 0; i < kFiles; ++i) {
    const int r = i % kNodes;
    if (r == 3) continue;
    FileVersion v = backing.Version(Name(i));
    std::string content = Content(i);
    if (i == stale) {
      v.mtime_ns -= 1000;  // the version before the change
      content = Content(i, 'A');
    }
    ASSERT_TRUE(nodes[r]->ram_tier.Put(Name(i), BlobOf(content, v)).ok());
  }
  for (int r = 0; r < kNodes; ++r) {
    nodes[r]->prefetcher->Install(
        clairfs::testing::PlanOfEpochs(backing, {Share(r)}, [](int i) { return Name(i); }));
  }
  // Each node placed with every coordinator's answer (the first placement waits for them all,
  // and each coordinator decides once, with every part in).
  auto info = [&](int r) { return nlohmann::json::parse(nodes[r]->peer.InfoJson()); };
  auto owned = [&](int r, const char* what) { return info(r)["owned"][what].get<uint64_t>(); };
  ASSERT_TRUE(WaitFor([&] {
    for (int r = 0; r < kNodes; ++r) {
      const auto j = info(r);
      if (j["state"] != "placed" || !j["unanswered"].empty()) return false;
    }
    return true;
  })) << nodes[0]->peer.InfoJson();
  // Nodes 0-2 keep the 30 files they hold, of which they read about a quarter.
  for (int r = 0; r < 3; ++r) {
    EXPECT_GE(owned(r, "objects"), 30u) << r;
    EXPECT_GT(owned(r, "unread_objects"), 15u) << r;
  }
  std::vector<std::thread> readers;
  for (int r = 0; r < kNodes; ++r) {
    readers.emplace_back([&, r] {
      for (int i : Share(r)) {
        auto res = nodes[r]->prefetcher->Open(Name(i), backing.Version(Name(i)));
        ASSERT_TRUE(res.ok()) << res.status().message();
        ASSERT_TRUE(res->blob) << Name(i);
        ASSERT_EQ(std::string(res->blob->data(), res->blob->size()), Content(i)) << Name(i);
      }
    });
  }
  for (auto& t : readers) t.join();
  // Node 0 opening its stale file itself is sent to the backing file (kDirect: the version
  // changed since its plan was made), never served its tier's copy.
  auto res = nodes[0]->prefetcher->Open(Name(stale), backing.Version(Name(stale)));
  ASSERT_TRUE(res.ok()) << res.status().message();
  EXPECT_EQ(res->source, OpenResult::Source::kDirect);
  EXPECT_FALSE(res->blob);
  // Read again from the store: the 30 files no node held, and the stale one by its reader.
  EXPECT_EQ(backing.reads(), static_cast<uint64_t>(30 + 1));
  for (int r = 0; r < kNodes; ++r) EXPECT_EQ(stats[r].cluster.peer_errors.load(), 0u) << r;
  for (auto& n : nodes) n.reset();
}

}  // namespace
}  // namespace clairfs::cluster
