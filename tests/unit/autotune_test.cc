// Autotuner (cache/prefetch/autotune.h) against a simulated store and consumer: a discrete-time
// model of a staging window in front of a store with a per-request latency, a per-stream rate
// and a shared bandwidth, read by a consumer of fixed speed. The tuner gets the samples the
// Prefetcher gives it (occupancy, stalls, bytes fetched, a full window) and its targets are
// applied to the model, as the Prefetcher applies them to the window and its threads.
#include "cache/prefetch/autotune.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <vector>

namespace clairfs {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

constexpr uint64_t kMiB = 1ull << 20;

struct Store {
  double latency_s = 0.002;      // per request, before its bytes flow
  double stream_bps = 50e6;      // one request's bytes at most this fast
  double bandwidth_bps = 400e6;  // all requests' bytes together
  // The consumer's speed falls to 1 / (1 + cpu_per_thread x threads) of its own: the fetch
  // threads take CPU from the readers (a store that is the machine's own disk and cores).
  double cpu_per_thread = 0;
};

// The window, its fetch threads and the consumer, stepped 1 ms at a time.
class Sim {
 public:
  Sim(Store store, double consume_bps, uint64_t object, int threads, uint64_t capacity)
      : store_(store),
        consume_bps_(consume_bps),
        object_(object),
        threads_(threads),
        capacity_(capacity) {}

  // Runs for `seconds`, sampling every 100 ms into tuner (null: static) and applying its target.
  // Returns the bytes consumed.
  double Run(double seconds, Autotuner* tuner) {
    const double dt = 0.001;
    double consumed = 0;
    for (int step = 0; step < static_cast<int>(seconds / dt); ++step) {
      // Idle threads start a fetch when the window has room for the object.
      while (static_cast<int>(flights_.size()) < threads_ && reserved_ + object_ <= capacity_) {
        flights_.push_back({store_.latency_s, static_cast<double>(object_)});
        reserved_ += object_;
      }
      if (static_cast<int>(flights_.size()) < threads_ && reserved_ + object_ > capacity_) {
        full_ = true;
      }
      // The store: latency first, then bytes at the stream rate within the shared bandwidth.
      int flowing = 0;
      for (const Flight& f : flights_) flowing += f.wait <= 0;
      const double rate = flowing ? std::min(store_.stream_bps, store_.bandwidth_bps / flowing) : 0;
      for (Flight& f : flights_) {
        if (f.wait > 0) {
          f.wait -= dt;
        } else {
          const double n = std::min(f.left, rate * dt);
          f.left -= n;
          fetched_ += n;
        }
      }
      for (auto it = flights_.begin(); it != flights_.end();) {
        if (it->wait <= 0 && it->left <= 0) {
          ready_ += object_;
          it = flights_.erase(it);
        } else {
          ++it;
        }
      }
      // The consumer: reads what is ready at its speed, and stalls when nothing is.
      const double speed = consume_bps_ / (1 + store_.cpu_per_thread * threads_);
      const double want = speed * dt + debt_;
      const double got = std::min<double>(want, static_cast<double>(ready_));
      if (got < want) stall_s_ += dt * (1 - got / want);
      debt_ = 0;
      const uint64_t whole = static_cast<uint64_t>(got);
      ready_ -= whole;
      reserved_ -= whole;
      consumed += static_cast<double>(whole);
      debt_ = got - static_cast<double>(whole);
      if (tuner && (step + 1) % 100 == 0) Sample(tuner);
    }
    return consumed;
  }

  int threads() const { return threads_; }
  uint64_t capacity() const { return capacity_; }
  uint64_t reserved() const { return reserved_; }

 private:
  struct Flight {
    double wait;  // latency left, seconds
    double left;  // bytes left
  };
  void Sample(Autotuner* tuner) {
    TunerSample s;
    s.elapsed = milliseconds(100);
    s.fetched_bytes = static_cast<uint64_t>(fetched_);
    s.stall_ns = static_cast<uint64_t>(stall_s_ * 1e9);
    s.ready_bytes = ready_;
    s.full = full_;
    s.active = true;
    fetched_ = 0;
    stall_s_ = 0;
    full_ = false;
    const TunerTarget t = tuner->Observe(s);
    threads_ = t.threads;
    capacity_ = std::max(capacity_, t.capacity);
  }

  const Store store_;
  const double consume_bps_;
  const uint64_t object_;
  int threads_;
  uint64_t capacity_;
  std::deque<Flight> flights_;
  uint64_t reserved_ = 0;  // ready + in flight
  uint64_t ready_ = 0;
  double fetched_ = 0, stall_s_ = 0, debt_ = 0;
  bool full_ = false;
};

TunerLimits Limits(uint64_t max_capacity = 256 * kMiB) {
  TunerLimits l;
  l.min_threads = 1;
  l.max_threads = 32;
  l.min_capacity = 16 * kMiB;
  l.max_capacity = max_capacity;
  return l;
}

// The best throughput a static grid reaches on this store, over threads {1..32} x {16, 64, 256}.
double BestOfGrid(const Store& store, double consume_bps, uint64_t object, double seconds) {
  double best = 0;
  for (int t : {1, 2, 4, 8, 16, 32}) {
    for (uint64_t c : {16 * kMiB, 64 * kMiB, 256 * kMiB}) {
      Sim sim(store, consume_bps, object, t, c);
      best = std::max(best, sim.Run(seconds, nullptr));
    }
  }
  return best;
}

// Runs the tuner from `threads` and `capacity` for `seconds` against the store and checks that
// it reached 95 % of the best static grid's throughput; returns its final target.
TunerTarget TunedNearTheBest(const Store& store, double consume_bps, uint64_t object, int threads,
                             uint64_t capacity, double seconds) {
  Autotuner tuner(Limits(), threads, capacity);
  Sim sim(store, consume_bps, object, threads, capacity);
  const double tuned = sim.Run(seconds, &tuner);
  const double best = BestOfGrid(store, consume_bps, object, seconds);
  EXPECT_GE(tuned, 0.95 * best) << "tuned " << tuned / seconds / 1e6 << " MB/s, best "
                                << best / seconds / 1e6 << " MB/s";
  return tuner.target();
}

TEST(Autotuner, LatencyBoundStoreGetsMoreThreadsAndReachesTheBestOfTheGrid) {
  // 2 ms per request, 1 MiB objects at 50 MB/s a stream, 400 MB/s in all: one thread fetches
  // about 45 MB/s, eight saturate the store; the consumer could take 1 GB/s.
  const TunerTarget t = TunedNearTheBest(Store{0.002, 50e6, 400e6}, 1e9, kMiB, 4, 16 * kMiB, 20);
  EXPECT_GT(t.threads, 4);
  EXPECT_EQ(t.state, TunerState::kStable);
}

TEST(Autotuner, BandwidthBoundStoreStopsAddingThreadsThatDoNotPay) {
  // One stream gets the whole bandwidth (25 MB/s): more threads cannot raise the throughput.
  const TunerTarget t = TunedNearTheBest(Store{0.0005, 25e6, 25e6}, 1e9, kMiB, 1, 16 * kMiB, 30);
  // The growth from 1 to 2 did not pay: back to 1, then the window grew to the most allowed.
  EXPECT_EQ(t, (TunerTarget{1, 256 * kMiB, TunerState::kStable}));
}

TEST(Autotuner, AGrowthThatFillsTheWindowButServesLessIsTakenBack) {
  // 110 KB objects, 0.5 ms per request, 150 MB/s a stream: 4 threads fetch about 220 MB/s.
  // The readers could take 300 MB/s but each fetch thread takes 5 % of their CPU: 250 MB/s
  // beside 4 threads (the window runs low), 214 MB/s beside 8 (which fill the window, so it
  // no longer runs low, and serve less than 4 did).
  const TunerTarget t =
      TunedNearTheBest(Store{0.0005, 150e6, 2e9, 0.05}, 300e6, 110'000, 4, 64 * kMiB, 20);
  EXPECT_EQ(t.threads, 4);
  EXPECT_EQ(t.state, TunerState::kStable);
}

TEST(Autotuner, FewerThreadsThatServeAsMuchAreKept) {
  // 250 MB/s in all, 160 MB/s a stream, no latency to speak of, 4 MiB objects: 2 threads
  // get what 4 and 8 get, 1 gets less. From 4: 8 does not pay (back to 4), 2 serves as much
  // (kept), 1 does not (back to 2).
  const TunerTarget t =
      TunedNearTheBest(Store{0.0001, 160e6, 250e6, 0.05}, 400e6, 4 * kMiB, 4, 64 * kMiB, 20);
  EXPECT_EQ(t.threads, 2);
  EXPECT_EQ(t.state, TunerState::kStable);
}

TEST(Autotuner, AHalvingCutShortByAWindowGrowthGivesItsThreadsBack) {
  // Rounds of one sample each: 100 MB fetched per 500 ms, nothing ready (the window runs low).
  Autotuner tuner(Limits(), 4, 16 * kMiB);
  auto round = [&](bool full) {
    TunerSample s;
    s.elapsed = milliseconds(500);
    s.fetched_bytes = 100'000'000;
    s.full = full;
    s.active = true;
    return tuner.Observe(s);
  };
  round(false);  // warm-up: only measured
  EXPECT_EQ(round(false), (TunerTarget{8, 16 * kMiB, TunerState::kThreads}));
  // 8 fetched no more than 4: back to 4, and 2 tried.
  EXPECT_EQ(round(false), (TunerTarget{2, 16 * kMiB, TunerState::kThreads}));
  // The window fills with fetches in flight before 2 could be judged: it grows, and the 4
  // threads come back (a halving is kept only when judged).
  EXPECT_EQ(round(true), (TunerTarget{4, 32 * kMiB, TunerState::kCapacity}));
  // No growth of the threads again (8 did not pay): the window grows while it runs low.
  EXPECT_EQ(round(false), (TunerTarget{4, 64 * kMiB, TunerState::kCapacity}));
}

TEST(Autotuner, SlowConsumerLeavesTheStartAlone) {
  // The store outruns the consumer (10 MB/s): the window stays full, nothing needs to grow.
  const Store store{0.001, 100e6, 400e6};
  Autotuner tuner(Limits(), 4, 64 * kMiB);
  Sim sim(store, 10e6, kMiB, 4, 64 * kMiB);
  sim.Run(10, &tuner);
  EXPECT_EQ(tuner.target().threads, 4);
  EXPECT_EQ(tuner.target().capacity, 64 * kMiB);
  EXPECT_EQ(tuner.target().state, TunerState::kStable);
}

TEST(Autotuner, NeverPassesTheMemoryCapOrTheThreadRange) {
  // A store no thread count saturates and a window that is always short: everything grows, to
  // the limits and no further.
  const Store store{0.05, 1e9, 1e12};
  TunerLimits l = Limits(40 * kMiB);  // not a power-of-two multiple of the start
  l.max_threads = 12;
  Autotuner tuner(l, 4, 16 * kMiB);
  Sim sim(store, 1e10, 4 * kMiB, 4, 16 * kMiB);
  for (int i = 0; i < 30; ++i) {
    sim.Run(1, &tuner);
    ASSERT_LE(tuner.target().capacity, 40 * kMiB);
    ASSERT_LE(sim.reserved(), 40 * kMiB);
    ASSERT_GE(tuner.target().threads, 1);
    ASSERT_LE(tuner.target().threads, 12);
  }
  EXPECT_EQ(tuner.target().capacity, 40 * kMiB);
  EXPECT_EQ(tuner.target().threads, 12);
}

TEST(Autotuner, StaticSettingsAreNeverChanged) {
  const Store store{0.002, 50e6, 400e6};
  TunerLimits l = Limits();
  l.tune_threads = false;
  l.tune_capacity = false;
  Autotuner tuner(l, 3, 20 * kMiB);
  EXPECT_EQ(tuner.target().state, TunerState::kStatic);
  Sim sim(store, 1e9, kMiB, 3, 20 * kMiB);
  sim.Run(5, &tuner);
  EXPECT_EQ(tuner.target(), (TunerTarget{3, 20 * kMiB, TunerState::kStatic}));

  // Threads static, the window tuned: only the window moves.
  l.tune_capacity = true;
  Autotuner window_only(l, 1, 16 * kMiB);
  Sim sim2(Store{0.0005, 25e6, 25e6}, 1e9, kMiB, 1, 16 * kMiB);
  sim2.Run(10, &window_only);
  EXPECT_EQ(window_only.target().threads, 1);
  EXPECT_GT(window_only.target().capacity, 16 * kMiB);
}

TEST(Autotuner, IdleSamplesAreIgnoredAndStartsAreClamped) {
  Autotuner tuner(Limits(), 100, 1 * kMiB);
  EXPECT_EQ(tuner.target().threads, 32);
  EXPECT_EQ(tuner.target().capacity, 16 * kMiB);
  const TunerTarget start = tuner.target();
  TunerSample idle;
  idle.elapsed = milliseconds(100);
  idle.stall_ns = 1'000'000'000;  // stalls with nothing to stage: not the window's doing
  for (int i = 0; i < 100; ++i) EXPECT_EQ(tuner.Observe(idle), start);
}

TEST(Autotuner, StableTargetsAreSearchedAgainWhenTheWindowRunsLowForLong) {
  // Slow consumer first (stable at the start), then a fast one on a latency-bound store.
  const Store store{0.004, 50e6, 800e6};
  Autotuner tuner(Limits(), 2, 16 * kMiB);
  Sim slow(store, 5e6, kMiB, 2, 16 * kMiB);
  slow.Run(5, &tuner);
  ASSERT_EQ(tuner.target().state, TunerState::kStable);
  ASSERT_EQ(tuner.target().threads, 2);
  Sim fast(store, 1e9, kMiB, tuner.target().threads, tuner.target().capacity);
  fast.Run(20, &tuner);
  EXPECT_GT(tuner.target().threads, 2);
}

TEST(Autotuner, StateNames) {
  EXPECT_STREQ(TunerStateName(TunerState::kStatic), "static");
  EXPECT_STREQ(TunerStateName(TunerState::kThreads), "threads");
  EXPECT_STREQ(TunerStateName(TunerState::kCapacity), "capacity");
  EXPECT_STREQ(TunerStateName(TunerState::kStable), "stable");
}

}  // namespace
}  // namespace clairfs
