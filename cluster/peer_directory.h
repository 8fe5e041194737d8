// PeerDirectory: who holds what. The other nodes announce (kHave, batched) every object their
// tiers now hold; the directory keeps, per object key, the last rank that announced it and at
// which version, and queues this node's own announcements until the next batch goes out.
// Answers from memory, never blocking on the network.
//
// Thread-safe. Lock order: mu_ before PeerLiveness's (Holder asks it whether the holder is
// live); announce_mu_ is a leaf.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/base/object.h"
#include "cluster/peer_liveness.h"
#include "cluster/protocol.h"

namespace clairfs::cluster {

class PeerDirectory {
 public:
  // liveness must outlive the directory.
  explicit PeerDirectory(const PeerLiveness& liveness) : liveness_(liveness) {}

  // Other nodes' holdings.
  // r's tiers now hold these (a kHave from r). An object announced again, by r or another
  // rank, is listed under the last announcement.
  void Record(int r, Have have);
  // The rank that last announced key, if it announced it at version and is live.
  std::optional<int> Holder(std::string_view key, const FileVersion& version) const;
  // Whether the last announcement of key (at any version) came from r.
  bool AnnouncedBy(std::string_view key, int r) const;
  // r answered "not here" for key: forgotten, if r is still its holder.
  void Forget(std::string_view key, int r);
  // Bytes of the objects listed (each at its announced version).
  uint64_t bytes() const;

  // This node's holdings, to be announced.
  // A local tier now holds key at version. True when the batch is full (1024 objects) and
  // should go out now rather than at the next tick.
  bool Announce(const std::string& key, const FileVersion& version);
  // The batch queued since the last call.
  std::vector<std::pair<std::string, FileVersion>> TakeAnnouncements();

 private:
  struct Holding {
    int rank;
    FileVersion version;
  };

  const PeerLiveness& liveness_;
  mutable std::mutex mu_;  // guards holders_ and bytes_; before PeerLiveness::mu_
  std::unordered_map<std::string, Holding> holders_;
  uint64_t bytes_ = 0;
  std::mutex announce_mu_;  // leaf: guards announce_
  std::vector<std::pair<std::string, FileVersion>> announce_;
};

}  // namespace clairfs::cluster
