#include "bench_probe.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace clairfs::bench {

namespace {

// Collects the numeric leaves of j under dotted keys.
void Flatten(const nlohmann::json& j, const std::string& prefix,
             std::map<std::string, nlohmann::json>* out) {
  if (j.is_number()) {
    (*out)[prefix] = j;
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      Flatten(value, prefix.empty() ? key : prefix + "." + key, out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      const auto& e = j[i];
      std::string key = std::to_string(i);
      if (e.is_object() && e.contains("name") && e["name"].is_string()) {
        key = e["name"].get<std::string>();
      }
      Flatten(e, prefix.empty() ? key : prefix + "." + key, out);
    }
  }
}

}  // namespace

Probe::Probe(std::string stats_path, const std::string& block_dev)
    : stats_path_(std::move(stats_path)) {
  block_dev_ = block_dev.substr(block_dev.rfind('/') + 1);  // npos + 1 == 0
}

ProbeSnapshot Probe::Take() {
  ProbeSnapshot s;
  if (!block_dev_.empty()) {
    // Fields: reads completed, reads merged, sectors read, ... (Documentation/block/stat.rst).
    std::ifstream in("/sys/block/" + block_dev_ + "/stat");
    uint64_t ios = 0, merged = 0, sectors = 0;
    if (in >> ios >> merged >> sectors) {
      s.read_ios = ios;
      s.read_bytes = sectors * 512;
    } else if (!warned_dev_) {
      warned_dev_ = true;
      std::fprintf(stderr, "clairfs-bench: cannot read /sys/block/%s/stat\n", block_dev_.c_str());
    }
  }
  if (!stats_path_.empty()) {
    std::ifstream in(stats_path_);
    std::stringstream text;
    text << in.rdbuf();
    s.stats = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!in || s.stats.is_discarded()) {
      s.stats = nullptr;
      if (!warned_stats_) {
        warned_stats_ = true;
        std::fprintf(stderr, "clairfs-bench: cannot read JSON from %s\n", stats_path_.c_str());
      }
    }
  }
  return s;
}

nlohmann::json NumericDelta(const nlohmann::json& before, const nlohmann::json& after) {
  if (before.is_null() || after.is_null()) return nullptr;
  std::map<std::string, nlohmann::json> a, b;
  Flatten(before, "", &a);
  Flatten(after, "", &b);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : b) {
    auto it = a.find(key);
    if (it == a.end()) continue;
    if (value.is_number_integer() && it->second.is_number_integer()) {
      out[key] = value.get<int64_t>() - it->second.get<int64_t>();  // exact for counters
    } else {
      out[key] = value.get<double>() - it->second.get<double>();
    }
  }
  return out;
}

}  // namespace clairfs::bench
