#include "cache/prefetch/autotune.h"

#include <algorithm>
#include <cmath>

namespace clairfs {

const char* TunerStateName(TunerState state) {
  switch (state) {
    case TunerState::kStatic:
      return "static";
    case TunerState::kThreads:
      return "threads";
    case TunerState::kCapacity:
      return "capacity";
    case TunerState::kStable:
      return "stable";
  }
  return "static";
}

Autotuner::Autotuner(const TunerLimits& limits, int threads, uint64_t capacity)
    : limits_([&] {
        TunerLimits l = limits;
        l.min_threads = std::max(1, l.min_threads);
        l.max_threads = std::max(l.min_threads, l.max_threads);
        l.max_capacity = std::max(l.min_capacity, l.max_capacity);
        return l;
      }()) {
  target_.threads = limits_.tune_threads
                        ? std::clamp(threads, limits_.min_threads, limits_.max_threads)
                        : threads;
  target_.capacity = limits_.tune_capacity
                         ? std::clamp(capacity, limits_.min_capacity, limits_.max_capacity)
                         : capacity;
  target_.state =
      limits_.tune_threads || limits_.tune_capacity ? TunerState::kThreads : TunerState::kStatic;
  if (!limits_.tune_threads && target_.state != TunerState::kStatic) {
    target_.state = TunerState::kCapacity;
  }
}

TunerTarget Autotuner::Observe(const TunerSample& sample) {
  if (target_.state == TunerState::kStatic || !sample.active) return target_;
  round_.elapsed += sample.elapsed;
  round_.bytes += sample.fetched_bytes;
  round_.stall_ns += sample.stall_ns;
  round_.occupancy += target_.capacity ? static_cast<double>(sample.ready_bytes) /
                                             static_cast<double>(target_.capacity)
                                       : 1.0;
  ++round_.samples;
  round_.full = round_.full || sample.full;
  if (round_.elapsed < kRound) return target_;
  const Round round = round_;
  round_ = Round{.ready_start = sample.ready_bytes};
  if (++rounds_ <= kWarmupRounds) return target_;  // start-up: the readers still settling
  const double seconds = std::chrono::duration<double>(round.elapsed).count();
  const double occupancy = round.occupancy / round.samples;
  const double stall_share = static_cast<double>(round.stall_ns) / 1e9 / seconds;
  const bool low = occupancy < kLowOccupancy || stall_share > kStallShare;
  // What the store sustains: the fetched bytes less what the window gained (a growth that
  // fills the window fetches more for a round without serving more); a window that drains
  // serves more than is fetched for a round, which the store did not give either.
  const double gained =
      static_cast<double>(sample.ready_bytes) - static_cast<double>(round.ready_start);
  const double sustained = std::max(static_cast<double>(round.bytes) - std::max(gained, 0.0), 0.0);
  Decide(low, round.full, occupancy, sustained / seconds);
  return target_;
}

bool Autotuner::GrowCapacity() {
  if (!limits_.tune_capacity || target_.capacity >= limits_.max_capacity) return false;
  target_.capacity = std::min(limits_.max_capacity, target_.capacity * 2);
  target_.state = TunerState::kCapacity;
  // A wider window changes what the threads can do: a growth being judged is judged afresh
  // later; a halving cannot be judged now, so the count before it comes back.
  if (shrinking_ && before_threads_) target_.threads = *before_threads_;
  before_threads_.reset();
  shrinking_ = false;
  return true;
}

bool Autotuner::TryShrink(double throughput) {
  if (!limits_.tune_threads || target_.threads / 2 < limits_.min_threads) return false;
  before_threads_ = target_.threads;
  before_throughput_ = throughput;
  shrinking_ = true;
  target_.threads /= 2;
  target_.state = TunerState::kThreads;
  return true;
}

void Autotuner::Decide(bool low, bool full, double occupancy, double throughput) {
  if (target_.state == TunerState::kStable) {
    // A store-bound pipeline runs low all the time: only a change of pace reopens the search.
    const bool changed = std::abs(throughput - stable_throughput_) >
                         kReopenChange * std::max(stable_throughput_, 1.0);
    low_rounds_ = low && changed ? low_rounds_ + 1 : 0;
    if (low_rounds_ < kReopenRounds) return;
    // Running low again (the store or the readers changed pace): search again from here.
    low_rounds_ = 0;
    saturated_ = false;
    before_threads_.reset();
    shrinking_ = false;
    target_.state = limits_.tune_threads ? TunerState::kThreads : TunerState::kCapacity;
  }
  // Fetches in flight fill the window while little is ready: the window bounds the concurrency
  // (a thread growth is then judged afresh, once the window let it work).
  if (low && full && occupancy < kLowOccupancy && GrowCapacity()) return;
  if (before_threads_) {
    // The round after a change of the threads judges it, whether the window runs low or not.
    const int before = *before_threads_;
    const double reference = before_throughput_;
    before_threads_.reset();
    if (shrinking_) {
      shrinking_ = false;
      if (throughput < reference * (1 - kShrinkLoss)) {  // fewer served less: back
        target_.threads = before;
        calm_rounds_ = 0;
        target_.state = TunerState::kCapacity;
        return;
      }
      // Fewer threads served as much, leaving the CPU to the readers: kept, and fewer tried.
      if (TryShrink(throughput)) return;
    } else if (!(throughput > reference * (1 + kGain))) {
      // A growth that did not raise the throughput by kGain, even one that fills the window,
      // only takes CPU from the readers (a store that is the machine's own disk and cores): it
      // is taken back, no growth is tried again, and fewer threads than before are tried
      // (they may serve as much).
      target_.threads = before;
      saturated_ = true;  // the store does not keep up with more threads
      calm_rounds_ = 0;
      if (TryShrink(reference)) return;
      target_.state = TunerState::kCapacity;
      return;
    }
  }
  if (!low) {
    if (++calm_rounds_ >= kCalmRounds) Settle(throughput);
    return;
  }
  calm_rounds_ = 0;
  if (limits_.tune_threads && !saturated_) {
    if (target_.threads < limits_.max_threads) {
      before_threads_ = target_.threads;
      before_throughput_ = throughput;
      target_.threads = std::min(limits_.max_threads, target_.threads * 2);
      target_.state = TunerState::kThreads;
      return;
    }
    saturated_ = true;
  }
  if (GrowCapacity()) return;
  Settle(throughput);  // nothing left to grow
}

void Autotuner::Settle(double throughput) {
  target_.state = TunerState::kStable;
  stable_throughput_ = throughput;
  low_rounds_ = 0;
}

}  // namespace clairfs
