#include "cluster/peer_liveness.h"

#include "cache/base/log.h"

namespace clairfs::cluster {

using Clock = std::chrono::steady_clock;

PeerLiveness::PeerLiveness(int rank, int size, const PeerOptions& options)
    : rank_(rank),
      size_(size),
      options_(options),
      down_until_(size),
      gone_(size, false),
      incompatible_(size, false) {}

bool PeerLiveness::LiveLocked(int r, Clock::time_point now) const {
  return r != rank_ && !gone_[r] && !incompatible_[r] && down_until_[r] <= now;
}

bool PeerLiveness::Live(int r) const {
  std::lock_guard lock(mu_);
  return LiveLocked(r, Clock::now());
}

bool PeerLiveness::Reachable(int r) const {
  std::lock_guard lock(mu_);
  return r != rank_ && !gone_[r] && !incompatible_[r];
}

bool PeerLiveness::Refused(int r) const {
  std::lock_guard lock(mu_);
  return incompatible_[r];
}

void PeerLiveness::MarkDown(int r, std::string_view why) {
  bool was_live;
  {
    std::lock_guard lock(mu_);
    was_live = LiveLocked(r, Clock::now());
    down_until_[r] = Clock::now() + options_.down_for;
  }
  if (was_live && !why.empty()) {
    LogWarn("peer rank {} {}: skipped for {:.0f} s", r, why,
            std::chrono::duration<double>(options_.down_for).count());
  } else if (was_live) {  // once per episode
    LogWarn(
        "peer rank {} did not answer within {:.1f} s: skipped for {:.0f} s; what it "
        "holds is read from the backing store meanwhile",
        r, std::chrono::duration<double>(options_.peer_timeout).count(),
        std::chrono::duration<double>(options_.down_for).count());
  }
  if (changed_) changed_();
}

void PeerLiveness::MarkGone(int r) {
  {
    std::lock_guard lock(mu_);
    gone_[r] = true;
  }
  if (changed_) changed_();
}

void PeerLiveness::MarkBack(int r) {
  std::lock_guard lock(mu_);
  gone_[r] = false;  // a rank that registers is back
  down_until_[r] = {};
}

void PeerLiveness::Refuse(int r, HeaderCheck check, uint16_t version) {
  {
    std::lock_guard lock(mu_);
    if (incompatible_[r]) return;
    incompatible_[r] = true;
  }
  if (check == HeaderCheck::kOtherVersion) {
    LogError(
        "peer rank {} refused: it speaks clairfs peer protocol version {}, this node (rank {}) "
        "version {}; it is treated as down. Run the same clairfs on every node.",
        r, version, rank_, kProtocolVersion);
  } else {
    LogError(
        "peer rank {} refused: its messages lack the clairfs protocol magic (a clairfs older "
        "than peer protocol version {}, which this node (rank {}) speaks, or not clairfs); it "
        "is treated as down. Run the same clairfs on every node.",
        r, kProtocolVersion, rank_);
  }
  if (changed_) changed_();
}

}  // namespace clairfs::cluster
