// A whole cluster node for the cluster tests: MemBacking + RamTier + Prefetcher + ClusterNode
// over a transport the test gives (a LoopbackNetwork endpoint, or a transport around one).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ram_tier.h"
#include "cluster/cluster_node.h"
#include "control/node_stats.h"
#include "tests/unit/mem_backing.h"

namespace clairfs::testing {

using cluster::ClusterNode;
using cluster::PeerOptions;
using cluster::Transport;

// One node: its own backing view, RAM tier, prefetcher and cluster node.
struct Node {
  // fetch_for_peers: it answers a kFetch by reading the object (else from its tiers alone).
  Node(MemBacking& backing, Transport& t, uint64_t ram, PeerOptions po, NodeStats* stats,
       uint64_t staging = 64 << 10, int tier_threads = 2, bool fetch_for_peers = true)
      : ram_tier("ram", ram), peer(t, po, &stats->cluster) {
    PrefetchOptions o;
    o.staging_capacity = staging;
    o.staging_threads = 2;
    o.tier_threads = {tier_threads};
    o.demand_threads = 2;
    o.fetch_timeout = std::chrono::seconds(10);
    prefetcher =
        std::make_unique<Prefetcher>(backing, std::vector<Tier*>{&ram_tier}, o, &stats->cache);
    prefetcher->SetCluster(peer.Hooks(0));
    peer.Start(
        [this](const std::string& path, const FileVersion& v) {
          return prefetcher->GetLocal(path, v);
        },
        [this] { prefetcher->Replan(); },
        [this](const std::string& path, BlobPtr b) { prefetcher->Adopt(path, std::move(b)); },
        fetch_for_peers ? ClusterNode::Fetch([this](const std::string& key, const FileVersion& v) {
          return prefetcher->FetchForPeer(key, v);
        })
                        : nullptr);
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

}  // namespace clairfs::testing
