// Fetcher: reads one object's bytes (a whole file or a chunk, cache/base/object_key.h) from the
// best source that has them: a local tier, else a peer that announced it (unless the backing store
// is measured to be much faster), else the backing store. What a peer returns is checked
// against the key (its size) and the version before it is used. It counts backing reads and
// their failures, and tells the cluster what it read from the backing store
// (ClusterHooks::fetched).
//
// Thread-safe; SetCluster only before the first Read. Lock order: rate_mu_ is a leaf.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "cache/backing/backing.h"
#include "cache/base/stats.h"
#include "cache/prefetch/cluster_hooks.h"
#include "cache/prefetch/single_flight.h"
#include "cache/prefetch/tier_stack.h"

namespace clairfs {

class Fetcher {
 public:
  // backing, tiers and stats must outlive the fetcher.
  Fetcher(const Backing& backing, const TierStack& tiers, Stats* stats);
  void SetCluster(const ClusterHooks& hooks) { cluster_ = hooks; }

  // The object of key at version from the fastest local tier other than `except`, else a
  // peer, else the backing store; *source: where they came from. Blocks for as long as the
  // source takes (the peer tier bounds its requests; the backing store its reads).
  Result<BlobPtr> Read(const std::string& key, const FileVersion& version,
                       std::optional<size_t> except, FetchSource* source);

 private:
  // Whether to ask a peer that holds an object rather than the backing store (by throughput).
  bool PreferPeer();
  void RecordRate(bool peer, uint64_t bytes, std::chrono::steady_clock::duration took);

  const Backing& backing_;
  const TierStack& tiers_;
  Stats* const stats_;
  ClusterHooks cluster_;

  std::mutex rate_mu_;                       // leaf: guards the rates and choices_
  double peer_rate_ = 0, backing_rate_ = 0;  // bytes per second, moving averages; 0: unknown
  uint64_t choices_ = 0;
};

}  // namespace clairfs
