// LogLimit: a rate limit for log lines about repeated failures (RocksDB, MPI), so that a failing
// device or network logs what went wrong without flooding the log. Thread-safe, lock-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace clairfs {

class LogLimit {
 public:
  // At most `burst` lines per `window`.
  explicit LogLimit(uint32_t burst = 5,
                    std::chrono::steady_clock::duration window = std::chrono::seconds(60))
      : burst_(burst), window_(window.count()) {}

  // True if a line may be logged now. *suppressed (if given): lines refused since the last
  // allowed one, to be mentioned in it.
  bool Allow(uint64_t* suppressed = nullptr) {
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    int64_t start = window_start_.load(std::memory_order_relaxed);
    if (now - start >= window_ &&
        window_start_.compare_exchange_strong(start, now, std::memory_order_relaxed)) {
      used_.store(0, std::memory_order_relaxed);
    }
    if (used_.fetch_add(1, std::memory_order_relaxed) >= burst_) {
      suppressed_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    const uint64_t n = suppressed_.exchange(0, std::memory_order_relaxed);
    if (suppressed) *suppressed = n;
    return true;
  }

 private:
  const uint32_t burst_;
  const int64_t window_;  // in steady_clock ticks
  std::atomic<int64_t> window_start_{std::numeric_limits<int64_t>::min() / 2};
  std::atomic<uint32_t> used_{0};
  std::atomic<uint64_t> suppressed_{0};
};

}  // namespace clairfs
