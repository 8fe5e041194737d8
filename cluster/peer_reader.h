// PeerReader: the read path to the other nodes (a PeerSource, cache/prefetch/cluster_hooks.h).
// Get() asks only the live rank that announced the object at the requested version (PeerDirectory)
// with a kRequest and waits for its kReply: the bytes and their xxh3, or "not here" (that
// holder is then forgotten). The bytes are checked (peer_bytes.h) before they are returned. A
// peer that does not answer within peer_timeout is marked down (PeerLiveness) and the read
// fails with kUnavailable, so the caller goes to the backing store. Nothing is ever written to
// a peer: peers fill their own tiers.
//
// Thread-safe: any number of readers; OnReply from the receiving thread. Lock order: mu_ is a
// leaf (the directory and liveness are asked with it released).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cache/base/stats.h"
#include "cache/prefetch/cluster_hooks.h"
#include "cluster/peer_bytes.h"
#include "cluster/peer_directory.h"
#include "cluster/peer_liveness.h"
#include "cluster/transport.h"

namespace clairfs::cluster {

class PeerReader final : public PeerSource {
 public:
  // Everything given must outlive the reader.
  PeerReader(Transport& transport, PeerDirectory& directory, PeerLiveness& liveness,
             std::chrono::milliseconds peer_timeout, Stats* stats, PeerDamage& damage);

  bool Contains(std::string_view key, const FileVersion& version) override;
  Result<BlobPtr> Get(std::string_view key, const FileVersion& version) override;

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

  Transport& transport_;
  PeerDirectory& directory_;
  PeerLiveness& liveness_;
  const std::chrono::milliseconds peer_timeout_;
  Stats* const stats_;
  PeerDamage& damage_;

  std::mutex mu_;  // leaf: guards the members below
  std::condition_variable reply_cv_;
  bool stop_ = false;
  uint64_t next_id_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<Pending>> pending_;
};

}  // namespace clairfs::cluster
