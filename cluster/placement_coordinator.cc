#include "cluster/placement_coordinator.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

namespace clairfs::cluster {

using Clock = std::chrono::steady_clock;

namespace {
// "ranks 2, 5" or "rank 2", for log lines.
std::string RankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}
}  // namespace

PlacementCoordinator::PlacementCoordinator(Transport& transport, PeerLiveness& liveness,
                                           const PeerOptions& options, Stats* stats,
                                           std::function<void()> wake)
    : transport_(transport),
      liveness_(liveness),
      options_(options),
      stats_(stats),
      wake_(std::move(wake)),
      rank_(transport.rank()),
      size_(transport.size()),
      digests_(transport.size()),
      catalog_sent_(transport.size()),
      catalogs_(transport.size()),
      digest_error_(transport.size()) {}

std::vector<int> PlacementCoordinator::UnregisteredLocked() const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && liveness_.Live(r) && !digests_[r]) missing.push_back(r);
  }
  return missing;
}

bool PlacementCoordinator::Place(Plan& plan, const PlacementLimits& limits, bool replan) {
  std::unique_lock lock(mu_);
  if (!replan || !registered_) {
    Digest mine = MakeDigest(plan, limits, rank_, ++generation_);
    SendDigestLocked(mine);
    digests_[rank_] = std::move(mine);
    registered_ = true;
    registered_at_ = Clock::now();
    said_waiting_ = false;
  }
  const std::vector<int> missing = UnregisteredLocked();
  const double timeout = std::chrono::duration<double>(options_.plan_timeout).count();
  if (!missing.empty() && Clock::now() < registered_at_ + options_.plan_timeout) {
    if (!said_waiting_) {
      spdlog::info("rank {} registered its plan; waiting up to {:.0f} s for the plans of {}", rank_,
                   timeout, RankList(missing));
      said_waiting_ = true;
    }
    placed_ = false;
    lock.unlock();
    wake_();  // the planner watches the deadline
    return false;
  }
  if (!missing.empty() && missing != said_missing_) {
    spdlog::warn(
        "{} did not register a plan within {:.0f} s of rank {}'s: placed without them "
        "(what they would have held is read from the backing store). Check that the "
        "job on every rank registers its plan; a rank that does joins at the next "
        "placement",
        RankList(missing), timeout, rank_);
  }
  said_missing_ = missing;
  std::vector<const Digest*> present;
  for (int r = 0; r < size_; ++r) {
    if (digests_[r] && (r == rank_ || liveness_.Live(r))) present.push_back(&*digests_[r]);
  }
  totals_ = PlaceCluster(present);
  local_ = ApplyPlacement(plan, limits, totals_, present, rank_);
  peer_owner_.clear();
  for (const PlanObject& o : plan.objects) {
    if (o.place == kPeer) peer_owner_.emplace(o.key, totals_.owner.find(o.key)->second);
  }
  placed_ranks_.clear();
  for (const Digest* d : present) placed_ranks_.push_back(d->rank);
  totals_.owner.clear();  // only the counts are kept for InfoJson
  placed_ = true;
  dirty_ = false;
  return true;
}

void PlacementCoordinator::SendDigestLocked(const Digest& mine) {
  const Catalog catalog = EncodeCatalog(mine);
  std::vector<char> with, without;  // encoded once each, when a rank needs that form
  for (int r = 0; r < size_; ++r) {
    if (!liveness_.Reachable(r)) continue;
    const bool carry = catalog_sent_[r] != catalog.hash;
    std::vector<char>& bytes = carry ? with : without;
    if (bytes.empty()) bytes = EncodeDigest(mine, catalog, carry);
    transport_.Send(r, kPlan, bytes);
    plan_bytes_sent_ += bytes.size();
    catalog_sends_ += carry;
    catalog_sent_[r] = catalog.hash;
  }
}

void PlacementCoordinator::OnPlan(int r, std::string_view bytes) {
  std::string why;
  auto d = DecodeDigest(bytes, &catalogs_[r], &why);
  if (d && d->rank != r) why = "it names rank " + std::to_string(d->rank);
  if (!why.empty()) {
    RefuseDigest(r, why);
    return;
  }
  digest_error_[r].clear();
  {
    std::lock_guard lock(mu_);
    if (digests_[r] && digests_[r]->generation >= d->generation) return;
    digests_[r] = std::move(*d);
    dirty_ = true;
  }
  liveness_.MarkBack(r);
  wake_();
}

void PlacementCoordinator::RefuseDigest(int r, const std::string& why) {
  stats_->peer_protocol_errors.fetch_add(1, std::memory_order_relaxed);
  if (digest_error_[r] != why) {  // logged once per reason until r sends a good digest
    spdlog::error("peer rank {}: plan digest refused: {}; its plan is left out of the placement", r,
                  why);
    digest_error_[r] = why;
  }
  {
    std::lock_guard lock(mu_);
    if (!digests_[r]) return;
    digests_[r].reset();
    dirty_ = true;
  }
  wake_();
}

void PlacementCoordinator::Invalidate() {
  {
    std::lock_guard lock(mu_);
    dirty_ = true;
  }
  wake_();
}

bool PlacementCoordinator::ReplanDue() {
  std::lock_guard lock(mu_);
  if (!registered_) return false;
  const bool ready =
      UnregisteredLocked().empty() || Clock::now() >= registered_at_ + options_.plan_timeout;
  const bool due = (!placed_ && ready) || (placed_ && dirty_);
  if (due) dirty_ = false;
  return due;
}

std::optional<int> PlacementCoordinator::PeerOwner(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = peer_owner_.find(key);
  if (it == peer_owner_.end()) return std::nullopt;
  return it->second;
}

std::string PlacementCoordinator::InfoJson() const {
  using nlohmann::json;
  std::lock_guard lock(mu_);
  json registered = json::array(), down = json::array(), generations = json::array();
  for (int r = 0; r < size_; ++r) {
    if (digests_[r]) registered.push_back(r);
    generations.push_back(digests_[r] ? digests_[r]->generation : 0);
    if (r != rank_ && !liveness_.Live(r)) down.push_back(r);
  }
  json from = json::object();
  for (const auto& [r, files] : local_.from_peer_files) from[std::to_string(r)] = files;
  json j = {
      {"rank", rank_},
      {"ranks", size_},
      {"registered", registered},
      {"generations", generations},
      {"plan_bytes_sent", plan_bytes_sent_},
      {"catalogs_sent", catalog_sends_},
      {"unreachable", down},
      // Live ranks with no plan: this node waits for them (state "waiting for plans") until
      // plan_timeout after its own registration, then places without them.
      {"unregistered", UnregisteredLocked()},
      {"waiting_seconds", registered_ && !placed_
                              ? std::chrono::duration<double>(Clock::now() - registered_at_).count()
                              : 0.0},
      {"plan_timeout", std::chrono::duration<double>(options_.plan_timeout).count()},
      {"state", !registered_ ? "no plan"
                : placed_    ? "placed"
                             : "waiting for plans"},
      {"placed_with", placed_ranks_},
      {"owned", {{"objects", local_.owned_files}, {"bytes", local_.owned_bytes}}},
      {"from_peers",
       {{"objects", local_.from_peers_files},
        {"bytes", local_.from_peers_bytes},
        {"by_rank", from}}},
      {"unowned", {{"objects", local_.unowned_files}, {"bytes", local_.unowned_bytes}}},
      {"cluster_objects", totals_.files},
      {"cluster_bytes", totals_.bytes},
      {"predicted_cluster_backing_bytes", totals_.predicted_backing_bytes}};
  return j.dump();
}

}  // namespace clairfs::cluster
