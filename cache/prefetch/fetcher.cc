#include "cache/prefetch/fetcher.h"

#include <algorithm>

namespace clairfs {

using Clock = std::chrono::steady_clock;

Fetcher::Fetcher(const Backing& backing, const TierStack& tiers, Stats* stats)
    : backing_(backing), tiers_(tiers), stats_(stats) {}

Result<BlobPtr> Fetcher::Read(const std::string& key, const FileVersion& version,
                              std::optional<size_t> except, FetchSource* source) {
  const auto ref = ParseObjectKey(key);
  if (!ref) return Status::Error(Code::kInvalidArgument, "malformed object key " + DisplayKey(key));
  const uint64_t bytes = ref->range.whole() ? version.size : ref->range.length;
  size_t found = 0;
  if (auto r = tiers_.Get(key, version, except, &found); r.ok() && r.value()->size() == bytes) {
    *source = FetchSource::Tier(found);
    return r;
  }
  if (cluster_.peer && PreferPeer()) {
    const auto start = Clock::now();
    // From a peer that announced it, else from the node that is to hold it (which fetches
    // it for this reader instead of both reading the backing store); both bounded.
    auto r = cluster_.peer->Contains(key, version) ? cluster_.peer->Get(key, version)
                                                   : cluster_.peer->GetFromHolder(key, version);
    if (r.ok() && (r.value()->size() != bytes || r.value()->version() != version)) {
      cluster_.peer->CountMismatch();
    } else if (r.ok()) {
      RecordRate(true, r.value()->size(), Clock::now() - start);
      stats_->peer_fetched.fetch_add(1, std::memory_order_relaxed);
      *source = {FetchSource::Kind::kPeer};
      return r;
    }
  }
  *source = {FetchSource::Kind::kBacking};
  const auto start = Clock::now();
  const std::string path(ref->path);
  auto r = backing_.Read(path, ref->range);
  stats_->backing_reads.fetch_add(1, std::memory_order_relaxed);
  if (!r.ok()) {
    stats_->errors.fetch.fetch_add(1, std::memory_order_relaxed);
    return r;
  }
  stats_->backing_bytes.fetch_add(r.value()->size(), std::memory_order_relaxed);
  if (cluster_.peer) RecordRate(false, r.value()->size(), Clock::now() - start);
  if (cluster_.fetched) cluster_.fetched(key, r.value());
  return r;
}

bool Fetcher::PreferPeer() {
  if (cluster_.backing_advantage <= 0) return true;
  std::lock_guard lock(rate_mu_);
  // Every 16th choice takes the other source, so that both rates stay measured.
  const bool probe = ++choices_ % 16 == 0;
  const bool peer_faster = peer_rate_ == 0 || backing_rate_ == 0 ||
                           backing_rate_ <= cluster_.backing_advantage * peer_rate_;
  return peer_faster != probe;
}

void Fetcher::RecordRate(bool peer, uint64_t bytes, Clock::duration took) {
  const double secs = std::max(1e-7, std::chrono::duration<double>(took).count());
  std::lock_guard lock(rate_mu_);
  double& rate = peer ? peer_rate_ : backing_rate_;
  rate = rate == 0 ? bytes / secs : 0.9 * rate + 0.1 * (bytes / secs);
}

}  // namespace clairfs
