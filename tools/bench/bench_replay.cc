#include "bench_replay.h"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace clairfs::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Batches in flight between the workers and the consumer. Batch k lives in slot k % depth;
// a worker claims k only when k < taken + depth, so the slot is free by then.
class Window {
 public:
  Window(size_t batches, size_t depth) : batches_(batches), depth_(depth), slots_(depth) {}

  // Blocks until the next unclaimed batch fits in the window; false when none is left.
  bool Claim(size_t* k) {
    std::unique_lock lock(mu_);
    space_.wait(lock, [&] { return next_ >= batches_ || next_ < taken_ + depth_; });
    if (next_ >= batches_) return false;
    *k = next_++;
    return true;
  }

  // Publishes the byte count of claimed batch k.
  void Deliver(size_t k, uint64_t bytes) {
    {
      std::lock_guard lock(mu_);
      slots_[k % depth_] = {true, bytes};
    }
    ready_.notify_one();
  }

  // Consumer only, k = 0, 1, ...: waits for batch k, frees its slot and returns its bytes.
  // *waited is set when batch k was not there yet at the call.
  uint64_t Take(size_t k, bool* waited) {
    std::unique_lock lock(mu_);
    Slot& slot = slots_[k % depth_];
    *waited = !slot.full;
    ready_.wait(lock, [&] { return slot.full; });
    slot.full = false;
    const uint64_t bytes = slot.bytes;  // once taken_ moves, a worker may refill the slot
    taken_ = k + 1;
    lock.unlock();
    space_.notify_all();
    return bytes;
  }

 private:
  struct Slot {
    bool full = false;
    uint64_t bytes = 0;
  };
  const size_t batches_;
  const size_t depth_;
  std::mutex mu_;  // leaf lock: guards everything below
  std::condition_variable space_;
  std::condition_variable ready_;
  size_t next_ = 0;   // first unclaimed batch
  size_t taken_ = 0;  // batches the consumer has taken
  std::vector<Slot> slots_;
};

// The consumer's simulated device: computes end at planned times, see bench_replay.h.
class ComputeTimeline {
 public:
  explicit ComputeTimeline(Clock::time_point start) : end_(start) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // best effort; default slack is 50 us
  }

  // Runs a compute of `ns` whose input arrived at `arrival` (or earlier when !waited).
  void Run(double ns, bool waited, Clock::time_point arrival) {
    if (waited && arrival > end_) end_ = arrival;
    total_ns_ += ns;
    if (ns <= 0) return;
    end_ += std::chrono::nanoseconds(static_cast<int64_t>(ns));
    std::this_thread::sleep_until(end_);
  }

  double total_seconds() const { return total_ns_ / 1e9; }

 private:
  Clock::time_point end_;  // planned end of the last compute
  double total_ns_ = 0;
};

double ComputeNs(const ReplayOptions& opt, size_t samples, uint64_t bytes) {
  return static_cast<double>(samples) * opt.compute_ms * 1e6 +
         static_cast<double>(bytes) * opt.compute_ns_per_byte;
}

}  // namespace

EpochResult RunReplayEpoch(int epoch, int root_fd, const std::vector<std::string>& paths,
                           const ReplayOptions& opt) {
  const size_t batch = static_cast<size_t>(opt.batch_size);
  const size_t batches = (paths.size() + batch - 1) / batch;
  Window window(batches, static_cast<size_t>(opt.prefetch_factor) * opt.workers);
  std::vector<WorkerStats> stats(static_cast<size_t>(opt.workers));
  EpochResult r;
  r.epoch = epoch;
  const auto start = Clock::now();
  ComputeTimeline device(start);
  double stall_s = 0;
  {
    std::vector<std::jthread> workers;
    for (auto& w : stats) {
      workers.emplace_back([&window, &paths, &opt, root_fd, batch, &w] {
        Reader reader(opt.verify);
        for (size_t k; window.Claim(&k);) {
          uint64_t bytes = 0;
          const size_t end = std::min(paths.size(), (k + 1) * batch);
          for (size_t i = k * batch; i < end; ++i) {
            const Sample s = reader.ReadWhole(root_fd, paths[i]);
            w.Record(paths[i], s);
            bytes += s.bytes;
          }
          window.Deliver(k, bytes);
        }
      });
    }
    for (size_t k = 0; k < batches; ++k) {
      const auto asked = Clock::now();
      bool waited = false;
      const uint64_t bytes = window.Take(k, &waited);
      const auto arrival = waited ? Clock::now() : asked;
      if (waited) stall_s += std::chrono::duration<double>(arrival - asked).count();
      const size_t samples = std::min(paths.size(), (k + 1) * batch) - k * batch;
      device.Run(ComputeNs(opt, samples, bytes), waited, arrival);
    }
  }  // every batch was taken, so the workers have finished; jthreads join here
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.stall_s = stall_s;
  r.compute_s = device.total_seconds();
  MergeWorkers(stats, &r);
  return r;
}

EpochResult RunComputeOnlyEpoch(int epoch, const std::vector<uint64_t>& sizes,
                                const ReplayOptions& opt) {
  const size_t batch = static_cast<size_t>(opt.batch_size);
  EpochResult r;
  r.epoch = epoch;
  const auto start = Clock::now();
  ComputeTimeline device(start);
  for (size_t first = 0; first < sizes.size(); first += batch) {
    const size_t end = std::min(sizes.size(), first + batch);
    uint64_t bytes = 0;
    for (size_t i = first; i < end; ++i) bytes += sizes[i];
    r.files += end - first;
    r.bytes += bytes;
    device.Run(ComputeNs(opt, end - first, bytes), false, start);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.compute_s = device.total_seconds();
  return r;
}

}  // namespace clairfs::bench
