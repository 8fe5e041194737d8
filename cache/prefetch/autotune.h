// Autotuner: chooses the staging window's fetch threads and capacity at run time from what is
// measured (cache.staging.threads / cache.staging.capacity `auto`). Pure: no clock, no lock, no
// thread; the Prefetcher feeds it periodic samples and applies what it returns.
//
// The rule (after PRISMA's autotuner): while the window runs low (little fetched ahead of the
// readers, or readers waiting on fetches), grow the fetch threads as long as the store keeps up
// (each growth must raise the throughput by kGain, judged on the round after it
// whether the window still runs low or not); when a growth did not pay, go back to the count
// before it (the store is saturated, or more threads only take CPU from the readers), then try
// half as many, and half again while a halving loses less than kShrinkLoss of the throughput
// (a local disk on few cores serves as much with fewer threads, which leave the CPU to the
// readers); then grow the window, which buys the readers a longer lead over the store's
// hiccups. A window that is full of fetches
// still in flight while little is ready limits the threads' concurrency: it is grown first.
// Once occupancy is stable (kCalmRounds rounds without running low), or nothing is left to
// grow, the targets are held (kStable); running low at another pace (kReopenRounds rounds)
// starts the search again from the held targets.
//
// Contract:
// - target().threads always lies in [min_threads, max_threads], target().capacity in
//   [min_capacity, max_capacity] (max_capacity is the memory budget's window: the tuner never
//   goes beyond it); with tune_threads false the threads, with tune_capacity false the capacity,
//   are never changed from those given at construction.
// - The capacity never shrinks (the window then needs no eviction): it is doubled, capped at
//   max_capacity. The threads double when they grow, go back to the count before a change
//   that did not pay, and are halved only after a growth failed.
// - Samples that saw nothing to stage (active false) are ignored; a decision is made once the
//   active samples since the last one span kRound, except for the first kWarmupRounds rounds.
// - The throughput of a round is what the store sustained: the bytes fetched, less the growth of
//   the ready bytes over the round if they grew (filling the window is not a faster store).
// - Deterministic: the same samples give the same targets.
// Not thread-safe: one owner calls it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace clairfs {

enum class TunerState : uint8_t {
  kStatic,    // nothing is tuned: both settings are numbers
  kThreads,   // growing the fetch threads: the window runs low and the store kept up
  kCapacity,  // growing the window: the store stopped keeping up, or fetches fill the window
  kStable,    // occupancy stable: the targets are held
};
// "static", "threads", "capacity", "stable".
const char* TunerStateName(TunerState state);

struct TunerLimits {
  bool tune_threads = true;
  bool tune_capacity = true;
  int min_threads = 1;
  int max_threads = 32;
  uint64_t min_capacity = 64ull << 20;
  uint64_t max_capacity = 256ull << 20;  // the memory budget's window: never exceeded
};

// What the window saw during one sample period.
struct TunerSample {
  std::chrono::nanoseconds elapsed{0};  // the period's length
  uint64_t fetched_bytes = 0;           // bytes the staging threads fetched in it
  uint64_t stall_ns = 0;                // time readers waited on fetches in it (summed)
  uint64_t ready_bytes = 0;             // at its end: fetched bytes the window holds for readers
  bool full = false;                    // the window had no room for the next object in it
  bool active = false;                  // there was something to stage or to wait for in it
};

struct TunerTarget {
  int threads = 0;
  uint64_t capacity = 0;
  TunerState state = TunerState::kStatic;
  bool operator==(const TunerTarget&) const = default;
};

class Autotuner {
 public:
  // Active time one decision is made over.
  static constexpr std::chrono::milliseconds kRound{500};
  // A thread growth pays when the fetch throughput rises by at least this fraction.
  static constexpr double kGain = 0.10;
  // Halving the threads is kept when the throughput falls by less than this fraction.
  static constexpr double kShrinkLoss = 0.03;
  // The window runs low below this fraction of its capacity fetched ahead, or when readers
  // waited more than kStallShare of the round (summed over readers).
  static constexpr double kLowOccupancy = 0.5;
  static constexpr double kStallShare = 0.05;
  static constexpr int kCalmRounds = 2;
  // kStable is left after kReopenRounds low rounds in a row whose throughput differs from the
  // one it settled at by more than kReopenChange (the store or the readers changed pace).
  static constexpr int kReopenRounds = 3;
  static constexpr double kReopenChange = 0.25;
  // The first rounds decide nothing: at the start the readers and the window are still
  // settling, and a round measured then would make the next growth look as if it paid.
  static constexpr int kWarmupRounds = 1;

  // threads and capacity: the start (clamped to the limits).
  Autotuner(const TunerLimits& limits, int threads, uint64_t capacity);

  // Takes one sample; returns the (possibly new) target.
  TunerTarget Observe(const TunerSample& sample);
  const TunerTarget& target() const { return target_; }
  const TunerLimits& limits() const { return limits_; }

 private:
  void Decide(bool low, bool full, double occupancy, double throughput);
  bool GrowCapacity();
  // Halves the threads to be judged on the next round against `throughput` (the count before);
  // false when at the minimum or the threads are not tuned.
  bool TryShrink(double throughput);
  void Settle(double throughput);

  const TunerLimits limits_;
  TunerTarget target_;
  // The round being gathered.
  struct Round {
    std::chrono::nanoseconds elapsed{0};
    uint64_t bytes = 0;
    uint64_t stall_ns = 0;
    double occupancy = 0;  // summed over the round's samples
    int samples = 0;
    bool full = false;
    uint64_t ready_start = 0;  // ready bytes when the round began
  };
  Round round_;
  // The thread search: the count and throughput before the last growth (none: no growth to
  // judge), and whether the store stopped keeping up.
  std::optional<int> before_threads_;
  double before_throughput_ = 0;
  bool shrinking_ = false;  // the change being judged halved the threads
  bool saturated_ = false;
  int rounds_ = 0;  // rounds gathered, warm-up included
  int calm_rounds_ = 0;
  int low_rounds_ = 0;
  double stable_throughput_ = 0;  // when it became kStable
};

}  // namespace clairfs
