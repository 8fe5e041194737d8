// Reading one whole file as a loader's worker does, and the per-epoch result every mode fills.
#pragma once

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace clairfs::bench {

inline constexpr size_t kChunkBytes = size_t{1} << 20;  // read(2) size; one call <= 1 MiB

// Outcome of reading one file. error is 0 or the errno of the failing call.
struct Sample {
  uint64_t bytes = 0;
  uint64_t hash = 0;  // XXH3-64 of the content when verifying, else 0
  int64_t latency_ns = 0;
  int error = 0;
};

// One reader thread's buffer and hash state. Not thread-safe: one per thread.
class Reader {
 public:
  explicit Reader(bool verify);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Opens path relative to root_fd (absolute paths as given), read(2)s it in kChunkBytes
  // chunks until EOF, closes it. Latency is open-to-close. No descriptor outlives the call.
  Sample ReadWhole(int root_fd, const std::string& path);

 private:
  std::unique_ptr<char[]> buffer_;
  XXH3_state_t* state_ = nullptr;  // null unless verifying
};

// Per-thread accumulator; merged after the threads joined, so it needs no locking.
struct WorkerStats {
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
  uint64_t hash_sum = 0;            // wrapping sum of per-file hashes
  std::vector<int64_t> latency_ns;  // one entry per successfully read file
  std::string first_error;          // "path: strerror" of this thread's first failure

  void Record(const std::string& path, const Sample& s);
};

// One epoch of any mode. The replay fields stay 0 in the throughput mode; the probe fields
// are empty when the run has no block device or stats file to read.
struct EpochResult {
  int epoch = 0;
  uint64_t files = 0;  // files read successfully (compute-only: samples consumed)
  uint64_t bytes = 0;
  uint64_t errors = 0;
  uint64_t checksum = 0;  // wrapping sum of XXH3-64 per file (--verify)
  double seconds = 0;     // wall time of the epoch
  double p50_us = 0;      // per-file open-to-close latency percentiles
  double p99_us = 0;
  std::string first_error;

  double stall_s = 0;    // replay: time the consumer waited for the next batch
  double compute_s = 0;  // replay: simulated compute the consumer was asked to spend

  std::optional<uint64_t> device_read_bytes;  // block device sectors read x 512, this epoch
  std::optional<uint64_t> device_read_ios;    // block device read requests completed
  nlohmann::json stats_delta;                 // numeric changes of the stats file; null if none

  double FilesPerSecond() const { return seconds > 0 ? files / seconds : 0; }
  double MegabytesPerSecond() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

// Sums the workers' counters into r and sets r's latency percentiles (nearest rank).
void MergeWorkers(std::vector<WorkerStats>& workers, EpochResult* r);

// Throughput mode: `threads` threads claim the next index from one atomic counter (files
// start in plan order, finish out of order) and read each whole file; nothing consumes them.
// Wall time spans the thread start to the last join.
EpochResult RunThroughputEpoch(int epoch, int root_fd, const std::vector<std::string>& paths,
                               int threads, bool verify);

}  // namespace clairfs::bench
