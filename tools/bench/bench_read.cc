#include "bench_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

namespace clairfs::bench {

namespace {

// Nearest-rank percentile q in [0, 1] of sorted values, in microseconds; 0 when empty.
double PercentileUs(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return static_cast<double>(sorted[rank - 1]) / 1e3;
}

}  // namespace

Reader::Reader(bool verify)
    : buffer_(std::make_unique<char[]>(kChunkBytes)),
      state_(verify ? XXH3_createState() : nullptr) {}

Reader::~Reader() {
  if (state_ != nullptr) XXH3_freeState(state_);
}

Sample Reader::ReadWhole(int root_fd, const std::string& path) {
  Sample s;
  const auto start = std::chrono::steady_clock::now();
  if (state_ != nullptr) XXH3_64bits_reset(state_);
  const int fd = openat(root_fd, path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    s.error = errno;
  } else {
    for (;;) {
      const ssize_t n = read(fd, buffer_.get(), kChunkBytes);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        s.error = errno;
        break;
      }
      s.bytes += static_cast<uint64_t>(n);
      if (state_ != nullptr) XXH3_64bits_update(state_, buffer_.get(), static_cast<size_t>(n));
    }
    if (close(fd) != 0 && s.error == 0) s.error = errno;
  }
  if (state_ != nullptr && s.error == 0) s.hash = XXH3_64bits_digest(state_);
  s.latency_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  return s;
}

void WorkerStats::Record(const std::string& path, const Sample& s) {
  if (s.error != 0) {
    if (errors++ == 0) first_error = path + ": " + std::strerror(s.error);
    return;
  }
  ++files;
  bytes += s.bytes;
  hash_sum += s.hash;
  latency_ns.push_back(s.latency_ns);
}

void MergeWorkers(std::vector<WorkerStats>& workers, EpochResult* r) {
  std::vector<int64_t> latencies;
  for (auto& w : workers) {
    r->files += w.files;
    r->bytes += w.bytes;
    r->errors += w.errors;
    r->checksum += w.hash_sum;
    if (r->first_error.empty()) r->first_error = w.first_error;
    latencies.insert(latencies.end(), w.latency_ns.begin(), w.latency_ns.end());
  }
  std::sort(latencies.begin(), latencies.end());
  r->p50_us = PercentileUs(latencies, 0.50);
  r->p99_us = PercentileUs(latencies, 0.99);
}

EpochResult RunThroughputEpoch(int epoch, int root_fd, const std::vector<std::string>& paths,
                               int threads, bool verify) {
  std::atomic<size_t> next{0};
  std::vector<WorkerStats> stats(static_cast<size_t>(threads));
  const auto start = std::chrono::steady_clock::now();
  {
    std::vector<std::jthread> workers;
    for (auto& w : stats) {
      workers.emplace_back([&next, &paths, root_fd, verify, threads, &w] {
        Reader reader(verify);
        w.latency_ns.reserve(paths.size() / static_cast<size_t>(threads) + 16);
        for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < paths.size();) {
          w.Record(paths[i], reader.ReadWhole(root_fd, paths[i]));
        }
      });
    }
  }  // jthreads join here
  EpochResult r;
  r.epoch = epoch;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MergeWorkers(stats, &r);
  return r;
}

}  // namespace clairfs::bench
