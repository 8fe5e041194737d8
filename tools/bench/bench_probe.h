// Counters clairfs-bench reads around every epoch: a clairfs mount's stats file and a block
// device's read counters (/sys/block/DEV/stat), e.g. the loop device under an emulated
// parallel file system. Both are optional; a probe that cannot be read yields nothing and
// never fails the run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace clairfs::bench {

struct ProbeSnapshot {
  nlohmann::json stats;                // the parsed stats file; null when absent or unreadable
  std::optional<uint64_t> read_bytes;  // device sectors read x 512
  std::optional<uint64_t> read_ios;    // device reads completed
};

class Probe {
 public:
  // stats_path: a JSON file to snapshot ("" for none). block_dev: "loop0", "/dev/loop0" or
  // "" for none. Warnings about unreadable sources go to stderr, once per source.
  Probe(std::string stats_path, const std::string& block_dev);

  ProbeSnapshot Take();

  const std::string& stats_path() const { return stats_path_; }
  const std::string& block_dev() const { return block_dev_; }

 private:
  std::string stats_path_;
  std::string block_dev_;  // the device's name under /sys/block, or ""
  bool warned_stats_ = false;
  bool warned_dev_ = false;
};

// The numeric leaves of after minus before, flattened to "a.b" keys (array elements by their
// "name" member, else by index). Keys missing or non-numeric on either side are left out.
// For counters (backing_bytes, served.ram) this is what happened in between; for gauges
// (ram_bytes) it is the change. Null when either side is null.
nlohmann::json NumericDelta(const nlohmann::json& before, const nlohmann::json& after);

}  // namespace clairfs::bench
