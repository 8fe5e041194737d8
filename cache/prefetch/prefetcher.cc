// The Prefetcher (cache/prefetch/prefetcher.h): construction, start and stop, publishing plans
// (Update, Install, Replan), the reaper of idle streams, progress, and the entry points of
// other nodes (Adopt, FetchForPeer). The read path is in prefetcher_read.cc, the fill threads in
// prefetcher_fill.cc.
#include "cache/prefetch/prefetcher.h"

#include <algorithm>
#include <string_view>

#include "cache/base/log.h"
#include "cache/plan/kept_copies.h"
#include "cache/plan/merge.h"
#include "cache/plan/place.h"

namespace clairfs {

using Clock = std::chrono::steady_clock;

namespace {

PlacementLimits LimitsOf(const std::vector<Tier*>& tiers, const PrefetchOptions& o) {
  PlacementLimits limits;
  for (Tier* t : tiers) {
    limits.tier_names.push_back(t->name());
    limits.tier_capacity.push_back(t->capacity());
  }
  limits.staging_capacity = o.staging_capacity;
  bool volatile_above = false;
  for (size_t t = 0; o.keep_copies && t < tiers.size(); ++t) {
    if (!tiers[t]->persistent()) {
      volatile_above = true;
    } else if (volatile_above) {
      limits.keep_tier = static_cast<uint8_t>(t);
      break;
    }
  }
  return limits;
}

}  // namespace

Prefetcher::Prefetcher(const Backing& backing, std::vector<Tier*> tiers, PrefetchOptions options,
                       Stats* stats)
    : options_(std::move(options)),
      limits_(LimitsOf(tiers, options_)),
      stats_(stats),
      tiers_(std::move(tiers)),
      fetcher_(backing, tiers_, stats),
      pool_(fetcher_, options_.fetch_timeout, stats),
      keeper_(tiers_, stats, options_.fetch_timeout),
      window_(StagingStartCapacity(options_)),
      watch_(options_.watch),
      tier_next_(tiers_.size(), 0) {}

Prefetcher::~Prefetcher() { Stop(); }

void Prefetcher::SetCluster(ClusterHooks hooks) {
  cluster_ = std::move(hooks);
  fetcher_.SetCluster(cluster_);
}

void Prefetcher::Start() {
  std::lock_guard lock(mu_);
  if (started_ || stop_) return;
  started_ = true;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    int n =
        t < options_.tier_threads.size() ? options_.tier_threads[t] : PrefetchOptions::kTierThreads;
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, t] { TierLoop(t); });
  }
  const Autotuner tuner(TunerLimitsOf(options_), options_.staging_threads, window_.capacity());
  staging_target_ = tuner.target().threads;
  tuner_state_ = tuner.target().state;
  const int staging = tuner.limits().tune_threads
                          ? std::max(staging_target_, tuner.limits().max_threads)
                          : options_.staging_threads;
  for (int i = 0; i < staging; ++i) threads_.emplace_back([this, i] { StagingLoop(i); });
  if (tuner_state_ != TunerState::kStatic) threads_.emplace_back([this] { TuneLoop(); });
  if (options_.stream_idle.count() > 0) threads_.emplace_back([this] { ReapLoop(); });
  pool_.Start(options_.demand_threads);
  if (limits_.keep_tier != kNotKept) keeper_.Start();
}

void Prefetcher::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  tier_cv_.notify_all();
  staging_cv_.notify_all();
  park_cv_.notify_all();
  reap_cv_.notify_all();
  tune_cv_.notify_all();
  // Finishes the flights of the queued demand fetches before anything is joined: prefetch
  // threads may wait on them (and would otherwise wait until their deadline).
  pool_.Stop();
  for (auto& th : threads) th.join();
  // No fill queues a copy any more: what the faster tiers got last is written until the
  // drain deadline, so that the next mount finds it.
  keeper_.Stop(Clock::now() + options_.keep_drain);
}

Result<std::shared_ptr<const Plan>> Prefetcher::Update(const PlanChange& change) {
  std::lock_guard install(install_mu_);
  auto next = change(plan().get());
  if (!next.ok()) return next.status();
  if (!next.value()) return plan();
  std::shared_ptr<const Plan> placed = next.value();
  InstallLocked(std::move(next.value()), false);
  return placed;
}

void Prefetcher::Install(std::shared_ptr<Plan> plan) {
  (void)Update([&](const Plan*) -> Result<std::shared_ptr<Plan>> { return std::move(plan); });
}

void Prefetcher::Replan() {
  std::lock_guard install(install_mu_);
  std::shared_ptr<Plan> copy;
  {
    std::lock_guard lock(mu_);
    if (!plan_ || stop_) return;
    copy = plan_->Clone();
  }
  InstallLocked(std::move(copy), true);
}

void Prefetcher::InstallLocked(std::shared_ptr<Plan> plan, bool replan) {
  bool ready = true;
  if (cluster_.place) {
    MarkHeld(*plan);
    ready = cluster_.place(*plan, limits_, replan);
  } else {
    PlaceObjects(*plan, limits_);
  }
  PlaceKeptCopies(*plan, limits_);  // in the room the placement left
  std::shared_ptr<const Plan> placed = std::move(plan);
  // From here on every store is checked against the new placement (or refused while it is
  // pending), and what it does not assign is evicted: nothing working from the old plan can
  // put an object back afterwards.
  if (ready) {
    tiers_.SetPlacement(placed);
  } else {
    tiers_.Suspend();
  }
  {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    std::vector<Consumption> consumption;
    std::vector<Clock::time_point> active;
    std::vector<uint32_t> sighted;
    consumption.reserve(placed->streams.size());
    const PlanStream* fresh = nullptr;  // the first stream not followed before
    for (const PlanStream& s : placed->streams) {
      int old = -1;
      for (size_t j = 0; plan_ && j < plan_->streams.size(); ++j) {
        if (plan_->streams[j].name == s.name && plan_->streams[j].serial == s.serial) old = int(j);
      }
      if (old >= 0) {
        consumption.push_back(std::move(consumption_[old]));
        active.push_back(active_[old]);
        sighted.push_back(sighted_[old]);
      } else {
        consumption.emplace_back(options_.consumption_lag);
        active.push_back(now);
        sighted.push_back(0);
        if (!fresh) fresh = &s;
      }
      consumption.back().Reset(s, placed->objects.size(), old >= 0);
    }
    if (!replan && !placed->streams.empty()) {
      const PlanStream& first = fresh ? *fresh : placed->streams.front();
      watch_.PlanInstalled(
          fresh != nullptr,
          first.sequence.size() ? placed->objects[first.sequence[0]].path() : std::string_view(),
          now);
    }
    consumption_ = std::move(consumption);
    active_ = std::move(active);
    sighted_ = std::move(sighted);
    window_.Reset(*placed, consumption_);
    ++generation_;
    hold_ = !ready;
    std::fill(tier_next_.begin(), tier_next_.end(), 0);
    plan_ = std::move(placed);
  }
  tier_cv_.notify_all();
  staging_cv_.notify_all();
}

void Prefetcher::MarkHeld(Plan& plan) const {
  for (PlanObject& o : plan.objects) {
    o.held = false;
    for (size_t t = 0; t < tiers_.size() && !o.held; ++t)
      o.held = tiers_.Contains(t, o.key, o.version);
  }
  // What the tiers hold beyond the plan (a restarted node's disk): objects of the plan, read by
  // none of its streams, at the version held. Keys are collected first: the visit runs under
  // the tiers' locks.
  std::vector<std::pair<std::string, FileVersion>> more;
  tiers_.ForEach([&](size_t, std::string_view key, const FileVersion& version) {
    if (plan.Find(key) == kNoPos) more.emplace_back(key, version);
  });
  if (more.empty()) return;
  // In two tiers: one object, at the version of the faster tier's copy (visited first).
  std::stable_sort(more.begin(), more.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  more.erase(std::unique(more.begin(), more.end(),
                         [](const auto& a, const auto& b) { return a.first == b.first; }),
             more.end());
  for (const auto& [key, version] : more) plan.objects[plan.AddObject(key, version)].held = true;
  plan.Finalize();  // their freq is 0: no stream reads them
}

void Prefetcher::ReapLoop() {
  const auto idle = options_.stream_idle;
  const auto period = std::clamp<std::chrono::milliseconds>(idle / 4, std::chrono::milliseconds(50),
                                                            std::chrono::milliseconds(1000));
  for (;;) {
    std::vector<std::string> idle_streams;
    {
      std::unique_lock lock(mu_);
      reap_cv_.wait_for(lock, period, [&] { return stop_; });
      if (stop_) return;
      const auto now = Clock::now();
      for (size_t s = 0; plan_ && s < plan_->streams.size(); ++s) {
        if (now - active_[s] >= idle) idle_streams.push_back(plan_->streams[s].name);
      }
    }
    if (idle_streams.empty()) continue;
    (void)Update([&](const Plan* current) -> Result<std::shared_ptr<Plan>> {
      if (!current) return std::shared_ptr<Plan>();
      std::shared_ptr<Plan> next;
      for (const std::string& name : idle_streams) {
        // Checked again under the install lock: a registration may have renewed it meanwhile.
        {
          std::lock_guard lock(mu_);
          const int s = plan_ ? plan_->FindStream(name) : -1;
          if (s < 0 || Clock::now() - active_[s] < idle) continue;
        }
        auto without = RemoveStream(next ? *next : *current, name);
        if (without) {
          LogInfo("stream '{}' removed: no read or registration for {:.1f} s", name,
                  std::chrono::duration<double>(idle).count());
          next = std::move(without);
        }
      }
      return next;
    });
  }
}

std::shared_ptr<const Plan> Prefetcher::plan() const {
  std::lock_guard lock(mu_);
  return plan_;
}

PrefetchProgress Prefetcher::progress() const {
  std::lock_guard lock(mu_);
  PrefetchProgress p;
  p.warnings = watch_.Active();
  // The window's settings, also before the first plan.
  p.staging_capacity = window_.capacity();
  p.staging_threads = staging_target_;
  p.tuner_state = tuner_state_;
  if (!plan_) return p;
  p.planned_files = plan_->files();
  p.planned_objects = plan_->objects.size();
  p.positions = plan_->positions();
  p.entries = plan_->entries();
  p.staging_bytes = window_.bytes();
  p.staging_ready_bytes = window_.ready_bytes();
  p.epoch = plan_->streams.empty() ? 0 : UINT64_MAX;
  const auto now = Clock::now();
  for (size_t i = 0; i < plan_->streams.size(); ++i) {
    const PlanStream& s = plan_->streams[i];
    const Consumption& c = consumption_[i];
    StreamProgress sp;
    sp.name = s.name;
    sp.epoch = c.epoch();
    sp.epochs = s.epochs();
    sp.position = c.low();
    sp.positions = s.sequence.size();
    sp.entries = s.entries;
    sp.given_up = c.given_up();
    sp.staging_cursor = window_.cursor(i);
    sp.idle_seconds = std::chrono::duration<double>(now - active_[i]).count();
    p.epoch = std::min(p.epoch, sp.epoch);
    p.position += sp.position;
    p.given_up += sp.given_up;
    p.streams.push_back(std::move(sp));
  }
  return p;
}

void Prefetcher::Stale(std::string_view key) {
  stats_->errors.stale.fetch_add(1, std::memory_order_relaxed);
  if (uint64_t more = 0; stale_log_.Allow(&more)) {
    LogWarn(
        "{} changed since the plan was made (size, mtime, ctime or inode number): read "
        "from the backing store, never from a cached copy; register the plan again to "
        "cache the new version{}",
        DisplayKey(key), more ? fmt::format(" ({} more since the last line)", more) : "");
  }
}

bool Prefetcher::StoreInTier(size_t t, const std::string& key, const BlobPtr& blob,
                             const FetchSource& source) {
  std::optional<size_t> from;
  if (source.kind == FetchSource::Kind::kTier) from = source.tier;
  uint8_t keep = kNotKept;
  Status s = tiers_.Store(t, key, blob, from, Deadline(), &keep);
  if (s.code() == Code::kNoSpace) {
    stats_->errors.tier_full.fetch_add(1, std::memory_order_relaxed);
    if (uint64_t more = 0; full_log_.Allow(&more)) {
      LogWarn(
          "tier {} is full: {} not stored there ({}); it is read from slower "
          "sources{}",
          tiers_.tier(t).name(), DisplayKey(key), s.message(),
          more ? fmt::format(" ({} more since the last line)", more) : "");
    }
  }
  if (s.ok() && keep != kNotKept && from != keep) keeper_.Enqueue(key, blob->version(), keep);
  return s.ok();
}

void Prefetcher::Adopt(const std::string& key, BlobPtr blob) {
  size_t t;
  {
    std::lock_guard lock(mu_);
    const uint32_t id = plan_ && !hold_ ? plan_->Find(key) : kNoPos;
    if (id == kNoPos) return;
    const PlanObject& o = plan_->objects[id];
    if (!o.place.InTier() || o.version != blob->version() || o.bytes != blob->size()) return;
    t = o.place.tier;
  }
  const FileVersion version = blob->version();
  if (tiers_.Contains(t, key, version)) return;
  // Refused if a plan change took the object out of tier t meanwhile.
  if (!StoreInTier(t, key, blob, FetchSource{})) return;
  stats_->tier_fetched[t].fetch_add(1, std::memory_order_relaxed);
  stats_->peer_adopted.fetch_add(1, std::memory_order_relaxed);
  if (cluster_.held) cluster_.held(key, version);
}

Result<BlobPtr> Prefetcher::FetchForPeer(const std::string& key, const FileVersion& version) {
  size_t t;
  {
    std::lock_guard lock(mu_);
    const uint32_t id = plan_ && !hold_ ? plan_->Find(key) : kNoPos;
    if (id == kNoPos) return Status::Error(Code::kNotFound, "not in this node's plan");
    const PlanObject& o = plan_->objects[id];
    if (!o.place.InTier() || o.version != version) {
      return Status::Error(Code::kNotFound, "not held here at this version");
    }
    t = o.place.tier;
  }
  if (auto r = tiers_.Get(key, version); r.ok()) return r;
  FetchSource source;
  auto r = pool_.Demand(key, version, &source);
  if (!r.ok()) return r;
  if (r.value()->version() != version) return Status::Error(Code::kNotFound, "it changed");
  // Stored unless the fill (whose flight this may have joined) stored it meanwhile.
  if (source != FetchSource::Tier(t) && !tiers_.Contains(t, key, version) &&
      StoreInTier(t, key, r.value(), source)) {
    stats_->tier_fetched[t].fetch_add(1, std::memory_order_relaxed);
    if (cluster_.held) cluster_.held(key, version);
  }
  return r;
}

}  // namespace clairfs
