#include "cluster/placement_coordinator.h"

#include <nlohmann/json.hpp>
#include <numeric>

#include "cache/base/log.h"
#include "cache/base/object.h"

namespace clairfs::cluster {

namespace {
// "ranks 2, 5" or "rank 2", for log lines.
std::string RankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}
}  // namespace

PlacementCoordinator::PlacementCoordinator(Transport& transport, PeerLiveness& liveness,
                                           const PeerOptions& options, ClusterStats* stats,
                                           std::function<void()> wake)
    : transport_(transport),
      liveness_(liveness),
      options_(options),
      stats_(stats),
      wake_(std::move(wake)),
      rank_(transport.rank()),
      size_(transport.size()),
      sent_(transport.size()),
      answered_(transport.size(), false),
      sent_at_(transport.size()),
      totals_(transport.size()),
      parts_(transport.size()),
      assignment_sent_(transport.size(), 0),
      refused_(transport.size()) {}

CoordinatorRing PlacementCoordinator::LiveRingLocked() const {
  std::vector<int> live;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || liveness_.Live(r)) live.push_back(r);
  }
  return CoordinatorRing(std::move(live));
}

std::vector<int> PlacementCoordinator::UnregisteredLocked() const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && liveness_.Live(r) && !parts_[r]) missing.push_back(r);
  }
  return missing;
}

std::vector<int> PlacementCoordinator::UnansweredLocked() const {
  std::vector<int> pending;
  for (int r = 0; r < size_; ++r) {
    if (sent_[r] && !answered_[r] && (r == rank_ || liveness_.Live(r))) pending.push_back(r);
  }
  return pending;
}

void PlacementCoordinator::SendPartLocked(int r, Part p, bool as_delta) {
  p.seq = ++next_seq_;
  p.base = 0;
  p.removed.clear();
  answered_[r] = false;
  sent_at_[r] = Clock::now();
  Part delta;
  const bool changes = as_delta && sent_[r] &&
                       MakeDelta(sent_[r]->entries, p.entries, &delta.removed, &delta.entries);
  if (changes) {
    delta.seq = p.seq;
    delta.base = sent_[r]->seq;
    delta.generation = p.generation;
    delta.budget = p.budget;
    p.entries = ApplyDelta(sent_[r]->entries, delta.removed, delta.entries);
  }
  if (r == rank_) {
    TakePartLocked(r, p);
  } else {
    std::vector<char> bytes = EncodePart(changes ? delta : p);
    plan_bytes_sent_ += bytes.size();
    transport_.Send(r, kPart, std::move(bytes));
  }
  ++parts_sent_;
  sent_[r] = std::move(p);
}

bool PlacementCoordinator::Place(Plan& plan, const PlacementLimits& limits, bool replan) {
  std::unique_lock lock(mu_);
  const CoordinatorRing ring = LiveRingLocked();
  const uint64_t capacity =
      std::accumulate(limits.tier_capacity.begin(), limits.tier_capacity.end(), uint64_t{0});
  if (!replan || !registered_) {
    std::vector<Part> parts = MakeParts(plan, ring, capacity, ++generation_, size_);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || liveness_.Reachable(r)) SendPartLocked(r, std::move(parts[r]));
    }
    if (!placed_) holders_.clear();  // a re-registration places with what is known meanwhile
    registered_ = true;
    registered_at_ = Clock::now();
    said_waiting_ = false;
    ring_ = ring;
  } else if (!(ring == ring_)) {
    // The live set changed: only the parts whose objects moved travel again, and of those only
    // the change.
    std::vector<Part> parts = MakeParts(plan, ring, capacity, generation_, size_);
    for (int r = 0; r < size_; ++r) {
      if (sent_[r] && sent_[r]->entries == parts[r].entries) continue;
      if (r != rank_ && !liveness_.Reachable(r)) continue;
      SendPartLocked(r, std::move(parts[r]), true);
    }
    ring_ = ring;
  }
  const double timeout = std::chrono::duration<double>(options_.plan_timeout).count();
  const std::vector<int> missing = UnregisteredLocked();
  const bool waiting = !UnansweredLocked().empty();
  if (waiting && !placed_ && Clock::now() < registered_at_ + options_.plan_timeout) {
    if (!said_waiting_ && !missing.empty()) {
      LogInfo("rank {} registered its plan; waiting up to {:.0f} s for the plans of {}", rank_,
              timeout, RankList(missing));
      said_waiting_ = true;
    }
    lock.unlock();
    wake_();  // the planner watches the deadline
    return false;
  }
  if (!missing.empty() && missing != said_missing_) {
    LogWarn(
        "{} did not register a plan within {:.0f} s of rank {}'s: placed without them "
        "(what they would have held is read from the backing store). Check that the "
        "job on every rank registers its plan; a rank that does joins at the next "
        "placement",
        RankList(missing), timeout, rank_);
  }
  said_missing_ = missing;
  local_ = ApplyHolders(plan, limits, holders_, rank_, [&](int r) { return liveness_.Live(r); });
  peer_owner_.clear();
  for (const PlanObject& o : plan.objects) {
    if (o.place != kPeer) continue;
    auto it = holders_.find(KeyHash(o.key));
    if (it != holders_.end()) peer_owner_.emplace(o.key, it->second.holder);
  }
  placed_ranks_.clear();
  for (int r = 0; r < size_; ++r) {
    if (parts_[r] && (r == rank_ || liveness_.Live(r))) placed_ranks_.push_back(r);
  }
  placed_ = true;
  dirty_ = false;
  return true;
}

bool PlacementCoordinator::TakePartLocked(int r, Part p) {
  if (parts_[r] && parts_[r]->seq >= p.seq) return true;
  if (p.base != 0) {
    if (!parts_[r] || parts_[r]->seq != p.base) return false;
    p.entries = ApplyDelta(parts_[r]->entries, p.removed, p.entries);
    p.base = 0;
    p.removed.clear();
  }
  parts_[r] = std::make_shared<const Part>(std::move(p));
  if (!first_part_at_) first_part_at_ = Clock::now();
  coord_dirty_ = true;
  return true;
}

void PlacementCoordinator::OnPart(int r, std::string_view bytes) {
  std::string why;
  std::optional<Part> p = DecodePart(bytes, &why);
  if (!p) {
    Refuse(r, "plan part", why);
    return;
  }
  bool taken;
  {
    std::lock_guard lock(mu_);
    plan_bytes_received_ += bytes.size();
    taken = TakePartLocked(r, std::move(*p));
    if (taken) refused_[r].clear();
  }
  if (!taken) {
    Refuse(r, "plan part", "it changes a part this node does not hold");
    return;
  }
  liveness_.MarkBack(r);
  wake_();
}

bool PlacementCoordinator::TakeAssignmentLocked(int r, const Assignment& a) {
  if (!sent_[r] || a.seq != sent_[r]->seq) return true;  // answers an earlier part
  const std::vector<PartEntry>& entries = sent_[r]->entries;
  if (a.holder.size() != entries.size()) return false;
  size_t k = 0;
  for (size_t e = 0; e < entries.size(); ++e) {
    HolderInfo& h = holders_[entries[e].key_hash];
    h.holder = a.holder[e];
    h.cluster_first = a.holder[e] == rank_ ? a.first[k++] : 0;
  }
  totals_[r] = a.totals;
  answered_[r] = true;
  dirty_ = true;
  return true;
}

void PlacementCoordinator::OnAssign(int r, std::string_view bytes) {
  std::string why;
  std::optional<Assignment> a = DecodeAssignment(bytes, rank_, size_, &why);
  if (a) {
    std::lock_guard lock(mu_);
    plan_bytes_received_ += bytes.size();
    if (!TakeAssignmentLocked(r, *a)) why = "its entries do not match the part it answers";
  }
  if (!why.empty()) {
    Refuse(r, "assignment", why);
    return;
  }
  wake_();
}

void PlacementCoordinator::Refuse(int r, const char* what, const std::string& why) {
  stats_->peer_protocol_errors.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    const std::string reason = std::string(what) + ": " + why;
    if (refused_[r] != reason) {  // logged once per reason until r sends a good one
      LogError("peer rank {}: {} refused: {}; its plan is left out of the placement", r, what, why);
      refused_[r] = reason;
    }
    if (std::string_view(what) != "plan part" || !parts_[r]) return;
    parts_[r].reset();
    coord_dirty_ = true;
  }
  wake_();
}

void PlacementCoordinator::Invalidate() {
  {
    std::lock_guard lock(mu_);
    dirty_ = true;
    coord_dirty_ = true;
  }
  wake_();
}

void PlacementCoordinator::Coordinate() {
  std::vector<int> silent;
  {
    std::lock_guard lock(mu_);
    for (int r : UnansweredLocked()) {
      if (r != rank_ && Clock::now() >= sent_at_[r] + 2 * options_.plan_timeout) {
        silent.push_back(r);
      }
    }
  }
  const double wait = 2 * std::chrono::duration<double>(options_.plan_timeout).count();
  for (int r : silent) {  // mu_ released: MarkDown calls Invalidate
    liveness_.MarkDown(
        r, fmt::format("sent no answer to this node's plan part within {:.0f} s (twice "
                       "cluster.plan_timeout); the objects it coordinates move to the others",
                       wait));
  }
  std::vector<ReaderPart> given;
  std::vector<std::shared_ptr<const Part>> hold;  // keeps given's parts alive unlocked
  {
    std::lock_guard lock(mu_);
    if (!coord_dirty_ || !first_part_at_) return;
    const bool all_in = UnregisteredLocked().empty() && parts_[rank_];
    if (!all_in && !decided_ && Clock::now() < *first_part_at_ + options_.plan_timeout) return;
    coord_dirty_ = false;
    for (int r = 0; r < size_; ++r) {
      if (!parts_[r] || (r != rank_ && !liveness_.Live(r))) continue;
      hold.push_back(parts_[r]);
      given.push_back({r, parts_[r].get()});
    }
  }
  const auto start = Clock::now();
  Decision d = DecideHolders(given, rank_, size_);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  bool mine = false;
  {
    std::lock_guard lock(mu_);
    decided_ = true;
    coordinated_ = d.totals;
    coordinated_reads_ = 0;
    for (const ReaderPart& p : given) coordinated_reads_ += p.part->entries.size();
    decide_seconds_ = took;
    for (size_t i = 0; i < given.size(); ++i) {
      const int r = given[i].rank;
      if (r == rank_) {
        mine = TakeAssignmentLocked(r, d.assignments[i]);
        continue;
      }
      if (!liveness_.Reachable(r)) continue;
      std::vector<char> bytes = EncodeAssignment(d.assignments[i], r);
      const uint64_t h = HashBytes(bytes.data(), bytes.size()) | 1;  // 0 means none sent
      if (assignment_sent_[r] == h) continue;
      assignment_sent_[r] = h;
      plan_bytes_sent_ += bytes.size();
      transport_.Send(r, kAssign, std::move(bytes));
    }
  }
  if (mine) wake_();
}

bool PlacementCoordinator::ReplanDue() {
  std::lock_guard lock(mu_);
  if (!registered_) return false;
  const bool ready =
      UnansweredLocked().empty() || Clock::now() >= registered_at_ + options_.plan_timeout;
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
  CoordinatorTotals cluster;
  uint64_t memory = holders_.size() * (sizeof(uint64_t) + sizeof(HolderInfo) + 2 * sizeof(void*));
  for (int r = 0; r < size_; ++r) {
    if (parts_[r]) {
      registered.push_back(r);
      memory += parts_[r]->entries.size() * sizeof(PartEntry);
    }
    if (sent_[r]) memory += sent_[r]->entries.size() * sizeof(PartEntry);
    generations.push_back(parts_[r] ? parts_[r]->generation : 0);
    if (r != rank_ && !liveness_.Live(r)) down.push_back(r);
    if (totals_[r]) cluster += *totals_[r];
  }
  json from = json::object();
  for (const auto& [r, files] : local_.from_peer_files) from[std::to_string(r)] = files;
  json j = {
      {"rank", rank_},
      {"ranks", size_},
      {"registered", registered},
      {"generations", generations},
      {"plan_bytes_sent", plan_bytes_sent_},
      {"plan_bytes_received", plan_bytes_received_},
      {"plan_memory_bytes", memory},
      {"parts_sent", parts_sent_},
      {"unanswered", UnansweredLocked()},
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
      // owned includes the objects held for the nodes that read them and not read here
      // (unread), and the copies kept in spare room that another node or none is to hold.
      {"owned",
       {{"objects", local_.owned_files},
        {"bytes", local_.owned_bytes},
        {"unread_objects", local_.kept_unread_files},
        {"unread_bytes", local_.kept_unread_bytes},
        {"spare_objects", local_.spare_files},
        {"spare_bytes", local_.spare_bytes}}},
      {"from_peers",
       {{"objects", local_.from_peers_files},
        {"bytes", local_.from_peers_bytes},
        {"by_rank", from}}},
      {"unowned", {{"objects", local_.unowned_files}, {"bytes", local_.unowned_bytes}}},
      {"coordinated",
       {{"objects", coordinated_.objects},
        {"reads", coordinated_reads_},
        {"held_objects", coordinated_.held_objects},
        {"seconds", decide_seconds_}}},
      // Sums of the totals of the coordinators that answered this node: the whole cluster's
      // once every coordinator has (every rank gets an answer, an empty part's included).
      {"cluster_objects", cluster.objects},
      {"cluster_bytes", cluster.bytes},
      {"predicted_cluster_backing_bytes", cluster.predicted_backing_bytes}};
  return j.dump();
}

}  // namespace clairfs::cluster
