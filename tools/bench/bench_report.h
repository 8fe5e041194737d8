// clairfs-bench output: a human table or one JSON object (keys documented in clairfs_bench.cc).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_read.h"
#include "bench_replay.h"

namespace clairfs::bench {

enum class Mode { kThroughput, kReplay, kComputeOnly };

// Everything about a run the report states besides its epochs.
struct RunInfo {
  std::string root;
  std::string plan;  // the list's path, or "walk"
  Mode mode = Mode::kThroughput;
  int threads = 1;       // reader threads (replay: workers)
  ReplayOptions replay;  // meaningful unless mode == kThroughput
  bool verify = false;
  std::string via = "read";     // "read" (open/read/close) or "batch" (the batch path)
  int batch_samples = 0;        // via batch: entries a request
  std::string stats_path;       // "" when no stats file was read
  std::string block_dev;        // "" when no device was read
  nlohmann::json stats_before;  // stats file before the first epoch; null if none
  nlohmann::json stats_after;   // after the last epoch
};

const char* ModeName(Mode mode);
void PrintJson(const RunInfo& info, const std::vector<EpochResult>& results);
void PrintTable(const RunInfo& info, const std::vector<EpochResult>& results);

}  // namespace clairfs::bench
