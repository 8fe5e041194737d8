// PeerLiveness: which of the other ranks this node talks to. A rank is *live* unless it said
// bye (kBye; until a plan of it arrives again), speaks another protocol version or none
// (refused for good), or missed a reply deadline (down, skipped for down_for). Only live ranks
// are asked for data and placed. Broadcasts go to every rank that is neither gone nor refused
// (a rank that is down still hears them, so that it can come back).
//
// Thread-safe. Lock order: mu_ is a leaf (taken under PlacementCoordinator's and
// PeerDirectory's locks). The change callback is called with no lock of this class held.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <vector>

#include "cluster/peer_options.h"
#include "cluster/protocol.h"

namespace clairfs::cluster {

class PeerLiveness {
 public:
  PeerLiveness(int rank, int size, const PeerOptions& options);

  // Called after a rank stopped being live (marked down, gone or refused), so that the
  // placement is redone. Set before the first call of a Mark or Refuse.
  void OnChange(std::function<void()> changed) { changed_ = std::move(changed); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  // r is another rank, not gone, not refused and not down.
  bool Live(int r) const;
  // r is another rank, neither gone nor refused: broadcasts reach it.
  bool Reachable(int r) const;
  // r speaks another protocol: its messages are ignored.
  bool Refused(int r) const;

  // r did not answer within peer_timeout (or, with why, for that reason): down for down_for
  // (logged when it was live).
  void MarkDown(int r, std::string_view why = {});
  // r said bye.
  void MarkGone(int r);
  // A plan from r arrived: it is back (neither gone nor down). Does not call the callback (the
  // new plan redoes the placement).
  void MarkBack(int r);
  // A message from r without this protocol's header (check: how it failed; version: the
  // sender's, when the magic is there): r is refused for good, logged the first time.
  void Refuse(int r, HeaderCheck check, uint16_t version);

 private:
  bool LiveLocked(int r, std::chrono::steady_clock::time_point now) const;  // mu_ held

  const int rank_, size_;
  const PeerOptions options_;
  std::function<void()> changed_;

  mutable std::mutex mu_;  // leaf: guards the vectors below
  std::vector<std::chrono::steady_clock::time_point> down_until_;
  std::vector<bool> gone_;          // said bye
  std::vector<bool> incompatible_;  // speaks another protocol version: never asked or placed
};

}  // namespace clairfs::cluster
