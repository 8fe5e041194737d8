#include "cache/prefetcher.h"

#include <algorithm>

namespace clairfs {

using Clock = std::chrono::steady_clock;

Prefetcher::Prefetcher(const Backing& backing, std::vector<Tier*> tiers, PrefetchOptions options,
                       Stats* stats)
    : backing_(backing), tiers_(std::move(tiers)), options_(std::move(options)), stats_(stats) {
  for (Tier* t : tiers_) {
    limits_.tier_names.push_back(t->name());
    limits_.tier_capacity.push_back(t->capacity());
  }
  limits_.staging_capacity = options_.staging_capacity;
  limits_.max_file_size = options_.max_file_size;
  tier_next_.assign(tiers_.size(), 0);
}

Prefetcher::~Prefetcher() { Stop(); }

void Prefetcher::Start() {
  std::lock_guard lock(mu_);
  if (started_) return;
  started_ = true;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    int n = t < options_.tier_threads.size() ? options_.tier_threads[t] : 2;
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, t] { TierLoop(t); });
  }
  for (int i = 0; i < options_.staging_threads; ++i)
    threads_.emplace_back([this] { StagingLoop(); });
  for (int i = 0; i < std::max(1, options_.demand_threads); ++i) {
    threads_.emplace_back([this] { DemandLoop(); });
  }
}

void Prefetcher::Stop() {
  std::deque<DemandJob> orphans;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    orphans.swap(demand_);
  }
  tier_cv_.notify_all();
  staging_cv_.notify_all();
  demand_cv_.notify_all();
  for (auto& th : threads_) th.join();
  threads_.clear();
  for (auto& job : orphans) {
    flights_.Finish(job.path, job.flight, Status::Error(Code::kUnavailable, "shutting down"));
  }
}

void Prefetcher::SetCluster(ClusterHooks hooks) { cluster_ = std::move(hooks); }

void Prefetcher::Install(std::shared_ptr<Plan> plan, bool append) {
  std::lock_guard install(install_mu_);
  InstallLocked(std::move(plan), append, false);
}

void Prefetcher::Replan() {
  std::lock_guard install(install_mu_);
  std::shared_ptr<Plan> copy;
  {
    std::lock_guard lock(mu_);
    if (!plan_ || stop_) return;
    copy = plan_->Clone();
  }
  InstallLocked(std::move(copy), true, true);
}

void Prefetcher::InstallLocked(std::shared_ptr<Plan> plan, bool append, bool replan) {
  bool ready = true;
  if (cluster_.place) {
    ready = cluster_.place(*plan, limits_, replan);
  } else {
    PlaceFiles(*plan, limits_);
  }
  for (size_t t = 0; t < tiers_.size(); ++t) {
    // Keep what the plan puts in this tier or a faster one: the faster tier's fill copies it
    // up from here (and erases it here) instead of reading the backing store. While the
    // placement is pending nothing is evicted.
    if (!ready) break;
    tiers_[t]->RetainOnly([&](std::string_view path, const FileVersion& v) {
      uint32_t id = plan->Find(path);
      return id != kNoPos && plan->files[id].tier >= 0 &&
             plan->files[id].tier <= static_cast<int8_t>(t) && plan->files[id].version == v;
    });
  }
  {
    std::lock_guard lock(mu_);
    const size_t n = plan->sequence.size();
    if (append && plan_) {
      consumed_.resize(n, 0);
    } else {
      consumed_.assign(n, 0);
      low_ = 0;
    }
    next_use_.assign(plan->files.size(), kNoPos);
    for (size_t p = n; p-- > low_;) {
      if (!consumed_[p]) next_use_[plan->sequence[p]] = static_cast<uint32_t>(p);
    }
    ++generation_;
    hold_ = !ready;
    staging_.clear();
    staging_bytes_ = 0;
    stage_cursor_ = low_;
    std::fill(tier_next_.begin(), tier_next_.end(), 0);
    plan_ = std::move(plan);
  }
  tier_cv_.notify_all();
  staging_cv_.notify_all();
}

std::shared_ptr<const Plan> Prefetcher::plan() const {
  std::lock_guard lock(mu_);
  return plan_;
}

PrefetchProgress Prefetcher::progress() const {
  std::lock_guard lock(mu_);
  PrefetchProgress p;
  if (!plan_) return p;
  p.planned_files = plan_->files.size();
  p.position = low_;
  p.epoch = plan_->EpochOf(low_);
  p.entries = plan_->sequence.size();
  p.staging_bytes = staging_bytes_;
  return p;
}

std::vector<uint64_t> Prefetcher::TierUsedBytes() const {
  std::vector<uint64_t> used;
  for (const Tier* t : tiers_) used.push_back(t->used_bytes());
  return used;
}

std::vector<uint64_t> Prefetcher::TierCorruptions() const {
  std::vector<uint64_t> n;
  for (const Tier* t : tiers_) n.push_back(t->corruptions());
  return n;
}

std::vector<TierHealth> Prefetcher::TierHealths() const {
  std::vector<TierHealth> h;
  for (const Tier* t : tiers_) h.push_back(t->Health());
  return h;
}

Result<BlobPtr> Prefetcher::ReadBacking(const std::string& path) {
  auto r = backing_.ReadFile(path, options_.max_file_size);
  stats_->backing_reads.fetch_add(1, std::memory_order_relaxed);
  if (r.ok()) {
    stats_->backing_bytes.fetch_add(r.value()->size(), std::memory_order_relaxed);
  } else {
    stats_->errors.fetch.fetch_add(1, std::memory_order_relaxed);
  }
  return r;
}

Result<BlobPtr> Prefetcher::GetLocal(const std::string& path, const FileVersion& version,
                                     int except, int* source) const {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (static_cast<int>(t) == except) continue;
    auto r = tiers_[t]->Get(path, version);  // a miss is answered from memory, without I/O
    if (r.ok()) {
      if (source) *source = static_cast<int>(t);
      return r;
    }
  }
  return Status::Error(Code::kNotFound, "no local tier holds " + path);
}

Result<BlobPtr> Prefetcher::ReadAny(const std::string& path, const FileVersion& version, int except,
                                    int* source) {
  if (auto r = GetLocal(path, version, except, source); r.ok()) return r;
  if (cluster_.peer && cluster_.peer->Contains(path, version) && PreferPeer()) {
    const auto start = Clock::now();
    auto r = cluster_.peer->Get(path, version);  // bounded by the peer deadline
    if (r.ok()) {
      RecordRate(true, r.value()->size(), Clock::now() - start);
      stats_->peer_fetched.fetch_add(1, std::memory_order_relaxed);
      *source = kFromPeer;
      return r;
    }
  }
  *source = -1;
  const auto start = Clock::now();
  auto r = ReadBacking(path);
  if (r.ok() && cluster_.peer) RecordRate(false, r.value()->size(), Clock::now() - start);
  if (r.ok() && cluster_.fetched) cluster_.fetched(path, r.value());
  return r;
}

bool Prefetcher::PreferPeer() {
  if (cluster_.backing_advantage <= 0) return true;
  std::lock_guard lock(rate_mu_);
  // Every 16th choice takes the other source, so that both rates stay measured.
  const bool probe = ++choices_ % 16 == 0;
  const bool peer_faster = peer_rate_ == 0 || backing_rate_ == 0 ||
                           backing_rate_ <= cluster_.backing_advantage * peer_rate_;
  return peer_faster != probe;
}

void Prefetcher::RecordRate(bool peer, uint64_t bytes, Clock::duration took) {
  const double secs = std::max(1e-7, std::chrono::duration<double>(took).count());
  std::lock_guard lock(rate_mu_);
  double& rate = peer ? peer_rate_ : backing_rate_;
  rate = rate == 0 ? bytes / secs : 0.9 * rate + 0.1 * (bytes / secs);
}

Result<BlobPtr> Prefetcher::WaitTimed(Flight& flight, int* source) {
  const auto start = Clock::now();
  auto r = SingleFlight::Wait(flight, start + options_.fetch_timeout, source);
  stats_->stall_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(),
      std::memory_order_relaxed);
  if (!r.ok() && r.status().code() == Code::kTimedOut) {
    stats_->errors.timeout.fetch_add(1, std::memory_order_relaxed);
  }
  return r;
}

Result<BlobPtr> Prefetcher::DemandFetch(const std::string& path, const FileVersion& version,
                                        int* source) {
  auto [flight, leader] = flights_.Join(path);
  if (leader) {
    std::unique_lock lock(mu_);
    if (stop_) {
      lock.unlock();
      flights_.Finish(path, flight, Status::Error(Code::kUnavailable, "shutting down"));
    } else {
      demand_.push_back({path, version, flight});
      lock.unlock();
      demand_cv_.notify_one();
    }
  }
  return WaitTimed(*flight, source);
}

void Prefetcher::DemandLoop() {
  for (;;) {
    DemandJob job;
    {
      std::unique_lock lock(mu_);
      demand_cv_.wait(lock, [&] { return stop_ || !demand_.empty(); });
      if (stop_) return;
      job = std::move(demand_.front());
      demand_.pop_front();
    }
    int source;
    auto r = ReadAny(job.path, job.version, -1, &source);
    flights_.Finish(job.path, job.flight, std::move(r), source);
  }
}

void Prefetcher::TierLoop(size_t t) {
  for (;;) {
    std::string path;
    FileVersion version;
    uint64_t gen;
    {
      std::unique_lock lock(mu_);
      tier_cv_.wait(lock, [&] {
        return stop_ || (plan_ && !hold_ && tier_next_[t] < plan_->tier_order[t].size());
      });
      if (stop_) return;
      const PlanFile& f = plan_->files[plan_->tier_order[t][tier_next_[t]++]];
      path = f.path;
      version = f.version;
      gen = generation_;
    }
    if (tiers_[t]->Contains(path, version)) {
      if (cluster_.held) cluster_.held(path, version);
      continue;
    }
    auto [flight, leader] = flights_.Join(path);
    int source = -1;
    Result<BlobPtr> r = leader ? ReadAny(path, version, static_cast<int>(t), &source)
                               : SingleFlight::Wait(*flight, Clock::time_point::max(), &source);
    if (leader) flights_.Finish(path, flight, r, source);
    if (!r.ok() || r.value()->version() != version) continue;
    {
      std::lock_guard lock(mu_);
      if (gen != generation_) continue;
    }
    if (!tiers_[t]->Put(path, r.value()).ok()) {
      stats_->errors.tier_full.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    stats_->tier_fetched[t].fetch_add(1, std::memory_order_relaxed);
    if (cluster_.held) cluster_.held(path, version);
    if (source >= 0) {
      stats_->tier_promoted[t].fetch_add(1, std::memory_order_relaxed);
      if (source > static_cast<int>(t)) tiers_[source]->Erase(path);  // tiers stay exclusive
    }
    stats_->fetched_files.fetch_add(1, std::memory_order_relaxed);
  }
}

void Prefetcher::StagingLoop() {
  for (;;) {
    std::string path;
    uint32_t id = 0;
    FileVersion version;
    FlightPtr flight;
    bool leader = false;
    uint64_t gen;
    {
      std::unique_lock lock(mu_);
      for (;;) {
        if (stop_) return;
        bool found = false, awaiting_peer = false;
        while (plan_ && !hold_ && stage_cursor_ < plan_->sequence.size()) {
          const uint32_t p = stage_cursor_;
          const uint32_t fid = plan_->sequence[p];
          const PlanFile& f = plan_->files[fid];
          if (consumed_[p] || !IsStaged(f.tier)) {
            ++stage_cursor_;
            continue;
          }
          auto it = staging_.find(fid);
          if (it != staging_.end()) {
            ++it->second.pending;
            ++stage_cursor_;
            continue;
          }
          if (staging_bytes_ + f.version.size > options_.staging_capacity) break;  // full
          // A file another node holds is staged from it once it announced it; the window does
          // not read it from the backing store (a reader that gets there first fetches it).
          if (f.tier == kPeer && cluster_.peer && !cluster_.peer->Contains(f.path, f.version)) {
            awaiting_peer = true;
            break;
          }
          ++stage_cursor_;
          StageEntry& e = staging_[fid];
          e.pending = 1;
          e.bytes = f.version.size;
          staging_bytes_ += e.bytes;
          std::tie(e.flight, leader) = flights_.Join(f.path);
          flight = e.flight;
          path = f.path;
          version = f.version;
          id = fid;
          gen = generation_;
          found = true;
          break;
        }
        if (found) break;
        if (awaiting_peer) {
          staging_cv_.wait_for(lock, std::chrono::milliseconds(10));  // announcements are polled
        } else {
          staging_cv_.wait(lock);
        }
      }
    }
    int source = -1;
    Result<BlobPtr> r = leader ? ReadAny(path, version, -1, &source)
                               : SingleFlight::Wait(*flight, Clock::time_point::max());
    if (leader) flights_.Finish(path, flight, r, source);
    // Counted here: a reader may consume the entry (and drop it) before the lock below.
    if (leader && r.ok()) stats_->fetched_files.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mu_);
    if (gen != generation_) continue;
    auto it = staging_.find(id);
    if (it == staging_.end() || it->second.flight != flight) continue;
    if (r.ok()) {
      it->second.blob = r.value();
    } else {
      staging_bytes_ -= it->second.bytes;  // readers will fetch it on demand
      staging_.erase(it);
      staging_cv_.notify_all();
    }
  }
}

void Prefetcher::Adopt(const std::string& path, BlobPtr blob) {
  int8_t tier;
  {
    std::lock_guard lock(mu_);
    const uint32_t id = plan_ && !hold_ ? plan_->Find(path) : kNoPos;
    if (id == kNoPos) return;
    const PlanFile& f = plan_->files[id];
    if (f.tier < 0 || f.version != blob->version()) return;
    tier = f.tier;
  }
  if (tiers_[tier]->Contains(path, blob->version())) return;
  const FileVersion version = blob->version();
  if (!tiers_[tier]->Put(path, std::move(blob)).ok()) {
    stats_->errors.tier_full.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  stats_->tier_fetched[tier].fetch_add(1, std::memory_order_relaxed);
  stats_->peer_adopted.fetch_add(1, std::memory_order_relaxed);
  if (cluster_.held) cluster_.held(path, version);
}

void Prefetcher::ConsumeLocked(uint32_t id, uint32_t* pos) {
  uint32_t p = next_use_[id];
  *pos = p;
  if (p == kNoPos) return;
  consumed_[p] = 1;
  uint32_t q = plan_->next_same[p];
  while (q != kNoPos && consumed_[q]) q = plan_->next_same[q];
  next_use_[id] = q;
  while (low_ < consumed_.size() && consumed_[low_]) ++low_;
  stage_cursor_ = std::max(stage_cursor_, low_);
}

bool Prefetcher::ReleaseStageLocked(uint32_t id) {
  auto it = staging_.find(id);
  if (it == staging_.end() || --it->second.pending > 0) return false;
  staging_bytes_ -= it->second.bytes;
  staging_.erase(it);
  return true;
}

Result<OpenResult> Prefetcher::Open(const std::string& path, const FileVersion& version) {
  stats_->files_opened.fetch_add(1, std::memory_order_relaxed);
  OpenResult out;
  int8_t tier = kDirect;
  FlightPtr staged_flight;
  bool freed = false;
  {
    std::lock_guard lock(mu_);
    const uint32_t id = plan_ ? plan_->Find(path) : kNoPos;
    if (id == kNoPos) {
      stats_->unplanned_opens.fetch_add(1, std::memory_order_relaxed);
      return out;  // kDirect
    }
    const PlanFile& f = plan_->files[id];
    uint32_t pos;
    ConsumeLocked(id, &pos);
    if (f.version != version) {
      stats_->errors.stale.fetch_add(1, std::memory_order_relaxed);
      return out;  // changed since planning: never serve a cached copy
    }
    tier = f.tier;
    if (IsStaged(tier)) {
      auto it = staging_.find(id);
      if (it != staging_.end() && (pos == kNoPos || pos < stage_cursor_)) {
        out.blob = it->second.blob;
        staged_flight = it->second.flight;
        if (pos != kNoPos) freed = ReleaseStageLocked(id);
      }
    }
  }
  if (freed) staging_cv_.notify_all();
  if (tier == kDirect) return out;
  if (tier >= 0) {
    // The fastest tier holding it serves it; a copy found below its planned tier is promoted.
    for (size_t j = 0; j < tiers_.size(); ++j) {
      auto r = tiers_[j]->Get(path, version);
      if (!r.ok()) continue;  // absent, stale or failing: a miss
      if (static_cast<int>(j) > tier && tiers_[tier]->Put(path, r.value()).ok()) {
        stats_->tier_promoted[tier].fetch_add(1, std::memory_order_relaxed);
      }
      stats_->served_tier[j].fetch_add(1, std::memory_order_relaxed);
      out.source = OpenResult::Source::kTier;
      out.tier = static_cast<int>(j);
      out.blob = std::move(r.value());
      return out;
    }
  }
  if (out.blob || staged_flight) {
    if (!out.blob) {
      auto r = WaitTimed(*staged_flight);
      if (!r.ok()) return r.status();
      out.blob = std::move(r.value());
    }
    if (out.blob->version() == version) {
      stats_->served_staging.fetch_add(1, std::memory_order_relaxed);
      out.source = OpenResult::Source::kStaging;
      return out;
    }
  }
  int source = -1;
  auto r = DemandFetch(path, version, &source);
  if (!r.ok()) return r.status();
  if (r.value()->version() != version) {
    stats_->errors.stale.fetch_add(1, std::memory_order_relaxed);
    return OpenResult{};  // it changed again: read it directly
  }
  if (tier >= 0 && source != tier && !tiers_[tier]->Put(path, r.value()).ok()) {
    stats_->errors.tier_full.fetch_add(1, std::memory_order_relaxed);
  }
  out.blob = std::move(r.value());
  if (source == kFromPeer) {
    stats_->served_peer.fetch_add(1, std::memory_order_relaxed);
    out.source = OpenResult::Source::kPeer;
    return out;
  }
  if (source >= 0) {
    stats_->served_tier[source].fetch_add(1, std::memory_order_relaxed);
    out.source = OpenResult::Source::kTier;
    out.tier = source;
    return out;
  }
  stats_->served_backing.fetch_add(1, std::memory_order_relaxed);
  out.source = OpenResult::Source::kBacking;
  return out;
}

}  // namespace clairfs
