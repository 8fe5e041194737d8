// PeerReader: the read path to the other nodes (a PeerSource, cache/prefetch/cluster_hooks.h).
// Get() asks only the live rank that announced the object at the requested version (PeerDirectory)
// with a kRequest and waits for its kReply: the bytes and their xxh3, or "not here" (that
// holder is then forgotten). The bytes are checked (peer_bytes.h) before they are returned. A
// peer that does not answer within peer_timeout is marked down (PeerLiveness) and the read
// fails with kUnavailable, so the caller goes to the backing store. GetFromHolder() asks the
// node the placement gives an object to (HolderOf) with a kFetch, which that node answers once
// it has the object, reading it from the backing store for this reader if it had not yet; it
// waits up to kFetchWaitFactor x peer_timeout and does not mark the node down for a late
// answer (the backing store's time, not the node's). Nothing is ever written to a peer: peers
// fill their own tiers.
//
// Thread-safe: any number of readers; OnReply from the receiving thread. Lock order: mu_ is a
// leaf (the directory and liveness are asked with it released).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cache/prefetch/cluster_hooks.h"
#include "cluster/cluster_stats.h"
#include "cluster/peer_bytes.h"
#include "cluster/peer_directory.h"
#include "cluster/peer_liveness.h"
#include "cluster/transport.h"

namespace clairfs::cluster {

class PeerReader final : public PeerSource {
 public:
  // Everything given must outlive the reader.
  PeerReader(Transport& transport, PeerDirectory& directory, PeerLiveness& liveness,
             std::chrono::milliseconds peer_timeout, ClusterStats* stats, PeerDamage& damage);

  static constexpr int kFetchWaitFactor = 4;
  // The live rank the active placement gives key to, if another node; set before any read.
  using HolderOf = std::function<std::optional<int>(const std::string&)>;
  void SetHolderOf(HolderOf holder_of) { holder_of_ = std::move(holder_of); }

  bool Contains(std::string_view key, const FileVersion& version) override;
  Result<BlobPtr> Get(std::string_view key, const FileVersion& version) override;
  Result<BlobPtr> GetFromHolder(std::string_view key, const FileVersion& version) override;
  void CountMismatch() override {
    stats_->peer_protocol_errors.fetch_add(1, std::memory_order_relaxed);
  }

  // A kReply (its header checked): handed to the Get waiting for it, dropped if that one gave
  // up.
  void OnReply(Message m);
  // Waiting reads return kUnavailable at once, later ones miss. Idempotent.
  void Stop();

 private:
  struct Pending {
    bool done = false;
    std::vector<char> reply;
  };
  // Sends holder a tag (kRequest or kFetch) for key at version and waits up to wait for the
  // reply; a holder that did not answer is marked down when mark_down. Returns the checked
  // blob; a "not here" is kNotFound (and forgets an announced holder when forget).
  Result<BlobPtr> Ask(int holder, int tag, std::string_view key, const FileVersion& version,
                      std::chrono::milliseconds wait, bool mark_down, bool forget);

  Transport& transport_;
  PeerDirectory& directory_;
  PeerLiveness& liveness_;
  const std::chrono::milliseconds peer_timeout_;
  ClusterStats* const stats_;
  PeerDamage& damage_;
  HolderOf holder_of_;

  std::mutex mu_;  // leaf: guards the members below
  std::condition_variable reply_cv_;
  bool stop_ = false;
  uint64_t next_id_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<Pending>> pending_;
};

}  // namespace clairfs::cluster
