// The Prefetcher's fill threads (cache/prefetch/prefetcher.h): per tier, the tier's objects in
// first-reference order (TierLoop); the staging window in exact read order (StagingLoop); the
// tuner of the window's threads and capacity (TuneLoop). None holds mu_ while it fetches or
// stores.

#include <algorithm>

#include "cache/base/log.h"
#include "cache/prefetch/prefetcher.h"

namespace clairfs {

using Clock = std::chrono::steady_clock;

uint64_t Prefetcher::StagingStartCapacity(const PrefetchOptions& o) {
  if (!o.tune_staging_capacity) return o.staging_capacity;
  const uint64_t chunk = std::max(o.chunk_size, o.record_chunk_size);
  return std::min(o.staging_capacity, std::max(o.tune_start_capacity, chunk));
}

TunerLimits Prefetcher::TunerLimitsOf(const PrefetchOptions& o) {
  TunerLimits l;
  // A start of 0 threads is no staging at all (tests that want only demand fetches).
  l.tune_threads = o.tune_staging_threads && o.staging_threads > 0;
  l.tune_capacity = o.tune_staging_capacity;
  l.min_threads = o.tune_min_threads;
  l.max_threads = o.tune_max_threads;
  l.min_capacity = StagingStartCapacity(o);
  l.max_capacity = o.staging_capacity;
  return l;
}

void Prefetcher::TierLoop(size_t t) {
  for (;;) {
    std::string key;
    FileVersion version;
    uint8_t keep;
    {
      std::unique_lock lock(mu_);
      tier_cv_.wait(lock, [&] {
        return stop_ || (plan_ && !hold_ && tier_next_[t] < plan_->tier_order[t].size());
      });
      if (stop_) return;
      const PlanObject& o = plan_->objects[plan_->tier_order[t][tier_next_[t]++]];
      key = o.key;
      version = o.version;
      keep = o.kept_in;
    }
    if (tiers_.Contains(t, key, version)) {
      // Held since an earlier plan that did not keep a copy: this one does.
      if (keep != kNotKept && !tiers_.Contains(keep, key, version)) {
        keeper_.Enqueue(key, version, keep);
      }
      if (cluster_.held) cluster_.held(key, version);
      continue;
    }
    FetchSource source;
    auto r = pool_.Fetch(key, version, t, &source);
    if (!r.ok() || r.value()->version() != version) continue;
    // Another pass (a placement made again while this one fetched) joined the same flight and
    // stored it already: counted once.
    if (tiers_.Contains(t, key, version)) continue;
    // Refused when the plan changed meanwhile and no longer gives key to this tier.
    if (!StoreInTier(t, key, r.value(), source)) continue;
    stats_->tier_fetched[t].fetch_add(1, std::memory_order_relaxed);
    if (source.kind == FetchSource::Kind::kTier) {
      stats_->tier_promoted[t].fetch_add(1, std::memory_order_relaxed);
    }
    stats_->fetched_objects.fetch_add(1, std::memory_order_relaxed);
    if (cluster_.held) cluster_.held(key, version);
  }
}

void Prefetcher::TuneLoop() {
  Autotuner tuner(TunerLimitsOf(options_), options_.staging_threads,
                  StagingStartCapacity(options_));
  auto last = Clock::now();
  uint64_t fetched0 = staging_fetched_bytes_.load(std::memory_order_relaxed);
  uint64_t stall0 = stats_->stall_ns.load(std::memory_order_relaxed);
  for (;;) {
    TunerSample sample;
    {
      std::unique_lock lock(mu_);
      if (tune_cv_.wait_for(lock, options_.tune_period, [&] { return stop_; })) return;
      sample.ready_bytes = window_.ready_bytes();
      sample.full = staging_full_;
      sample.active = staging_full_ || window_.bytes() > 0;
      staging_full_ = false;
    }
    const auto now = Clock::now();
    const uint64_t fetched = staging_fetched_bytes_.load(std::memory_order_relaxed);
    const uint64_t stall = stats_->stall_ns.load(std::memory_order_relaxed);
    sample.elapsed = now - last;
    sample.fetched_bytes = fetched - fetched0;
    sample.stall_ns = stall - stall0;
    sample.active = sample.active || sample.fetched_bytes > 0;
    last = now;
    fetched0 = fetched;
    stall0 = stall;
    const TunerTarget before = tuner.target();
    const TunerTarget t = tuner.Observe(sample);
    if (t == before) continue;
    {
      std::lock_guard lock(mu_);
      window_.Grow(t.capacity);
      staging_target_ = t.threads;
      tuner_state_ = t.state;
    }
    park_cv_.notify_all();     // parked threads to run
    staging_cv_.notify_all();  // room to fill
    if (t.threads != before.threads || t.capacity != before.capacity) {
      LogDebug("staging tuner: {} threads, {} MiB window ({})", t.threads, t.capacity >> 20,
               TunerStateName(t.state));
    }
  }
}

void Prefetcher::StagingLoop(int index) {
  for (;;) {
    StagingWindow::Job job;
    FlightPtr flight;
    bool leader = false;
    uint64_t gen;
    {
      std::unique_lock lock(mu_);
      for (;;) {
        if (stop_) return;
        if (index >= staging_target_) {  // parked by the tuner
          park_cv_.wait(lock);
          continue;
        }
        auto step = StagingWindow::Step::kIdle;
        if (plan_ && !hold_) {
          step = window_.Next(*plan_, consumption_, cluster_.peer, &job);
        }
        if (step == StagingWindow::Step::kFetch) break;
        if (step == StagingWindow::Step::kFull) staging_full_ = true;
        if (step == StagingWindow::Step::kMore) {  // a long walk: let readers take the lock
          lock.unlock();
          std::this_thread::yield();
          lock.lock();
          continue;
        }
        if (step == StagingWindow::Step::kAwaitPeer) {
          staging_cv_.wait_for(lock, std::chrono::milliseconds(10));  // announcements are polled
        } else {
          staging_cv_.wait(lock);
        }
      }
      std::tie(flight, leader) = pool_.Join(job.key);
      window_.Attach(job.id, flight);
      gen = generation_;
    }
    FetchSource source;
    auto r = leader ? pool_.Lead(job.key, job.version, flight, std::nullopt, &source)
                    : pool_.Wait(*flight, &source, false);
    // Counted here: a reader may consume the entry (and drop it) before the lock below.
    if (leader && r.ok()) {
      staging_fetched_bytes_.fetch_add(r.value()->size(), std::memory_order_relaxed);
      stats_->fetched_objects.fetch_add(1, std::memory_order_relaxed);
      stats_->staging_fetched.fetch_add(1, std::memory_order_relaxed);
    }
    bool freed = false;
    {
      std::lock_guard lock(mu_);
      if (gen == generation_) freed = window_.Land(job.id, flight, r);
    }
    if (freed) staging_cv_.notify_all();
  }
}

}  // namespace clairfs
