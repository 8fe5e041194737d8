#include "conf/memory_budget.h"

#include <algorithm>
#include <cstdio>

namespace clairfs {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
// Code, libraries, thread stacks touched, FUSE request buffers (libfuse keeps one of about
// 1 MiB per worker), allocator slack, freed file-data mappings kept for reuse (at most 16 MiB:
// cache/base/blob_memory.h), a plan of a few hundred thousand entries (about 60 bytes each:
// docs/benchmarks.md) and the stats made ahead (at most 32,768 records of about 250 bytes, and
// a 4-byte stamp per planned object: cache/backing/stat_ahead.h). Measured: docs/reliability.md,
// "Memory limits".
constexpr uint64_t kFixed = 56 * kMiB;
// Per SSD tier: RocksDB's two 16 MiB memtables of file data (cache/tiers/ssd_format.cc), its block
// cache and the index of records.
constexpr uint64_t kSsdTier = 48 * kMiB;
constexpr uint64_t kDefaultRam = 1ull << 30;      // a RAM tier left to the default
constexpr uint64_t kDefaultStaging = 256 * kMiB;  // the window left to the default

}  // namespace

std::string HumanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes < (1ull << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / kMiB);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  }
  return buf;
}

uint64_t MemoryHeadroom(uint64_t limit) { return std::max<uint64_t>(16 * kMiB, limit / 16); }

MemoryNeed EstimateMemory(const Config& c) {
  MemoryNeed n;
  n.fixed = kFixed;
  n.staging = c.cache.prefetch.staging_capacity;
  uint64_t fill_threads = 0;
  for (const TierConfig& t : c.cache.tiers) {
    fill_threads += static_cast<uint64_t>(std::max(t.threads, 0));
    if (t.kind == "ram") {
      n.ram_tiers += t.capacity;
    } else {
      n.ssd += kSsdTier;
    }
  }
  const PrefetchOptions& p = c.cache.prefetch;
  n.in_flight =
      (fill_threads + static_cast<uint64_t>(std::max(p.demand_threads, 0))) * p.chunk_size;
  if (c.fuse.open_mode == OpenMode::kNone) n.node_reads = c.fuse.node_read_bytes;
  return n;
}

Status FitMemory(Config* c, uint64_t limit, const std::string& what, MemoryFit* fit) {
  const uint64_t headroom = MemoryHeadroom(limit);
  const uint64_t usable = limit > headroom ? limit - headroom : 0;
  MemoryNeed need = EstimateMemory(*c);  // auto RAM tiers count 0 here
  std::vector<size_t> auto_ram;
  int first_ram = -1;
  for (size_t i = 0; i < c->cache.tiers.size(); ++i) {
    const TierConfig& t = c->cache.tiers[i];
    if (t.kind != "ram") continue;
    if (t.capacity == 0) {
      auto_ram.push_back(i);
    } else if (first_ram < 0) {
      first_ram = static_cast<int>(i);
    }
  }
  const uint64_t min_staging = std::max(
      {c->cache.prefetch.chunk_size, c->cache.prefetch.record_chunk_size, uint64_t{64} << 10});
  const uint64_t fixed_part =
      need.own() + need.ram_tiers +
      (c->cache.prefetch.tune_staging_capacity ? min_staging : need.staging);
  const std::string own = HumanBytes(need.own()) + " for the daemon's own memory (" +
                          HumanBytes(need.fixed) + " fixed, " + HumanBytes(need.in_flight) +
                          " fetches in flight, " + HumanBytes(need.node_reads) + " read buffers, " +
                          HumanBytes(need.ssd) + " RocksDB)";
  if (fixed_part > usable) {
    // Name the key that made it too much: an explicit RAM tier, else an explicit window.
    std::string key = "cache.tiers";
    if (first_ram >= 0) {
      key = "cache.tiers[" + std::to_string(first_ram) + "].capacity";
    } else if (!c->cache.prefetch.tune_staging_capacity) {
      key = "cache.staging.capacity";
    }
    std::string message =
        "config key '" + key + "': " + HumanBytes(need.ram_tiers) + " of RAM tiers + " +
        HumanBytes(c->cache.prefetch.tune_staging_capacity ? min_staging : need.staging) +
        " of staging window + " + own + " + " + HumanBytes(headroom) + " headroom is more than " +
        what;
    const uint64_t others = fixed_part - need.ram_tiers;
    if (first_ram >= 0 && usable > others) {
      message +=
          "; with the rest as it is, at most " + HumanBytes(usable - others) + " of RAM tiers fit";
    } else if (need.own() + min_staging <= usable) {
      message += "; at most " + HumanBytes(usable - need.own()) +
                 " of RAM tiers and staging window together fit";
    } else {
      message +=
          "; fewer threads (cache.demand_threads, cache.tiers[i].threads), a smaller "
          "cache.chunk_size or no SSD tier would lower the daemon's own memory";
    }
    return Status::Error(Code::kInvalidArgument, message);
  }
  // Capacities left to the default get what keeps the daemon's whole need within half of the
  // usable limit: the other half is the job's, whose processes share the cgroup.
  const uint64_t share = usable / 2;
  uint64_t left = share > fixed_part ? share - fixed_part : 0;
  if (c->cache.prefetch.tune_staging_capacity) {
    const uint64_t extra = auto_ram.empty() ? left : left / 4;
    const uint64_t staging =
        std::clamp(min_staging + extra, min_staging, std::max(min_staging, kDefaultStaging));
    left -= staging - min_staging;
    if (staging < kDefaultStaging) {
      fit->warnings.push_back("cache.staging.capacity sized to " + HumanBytes(staging) +
                              " (default " + HumanBytes(kDefaultStaging) + ") to fit " + what);
    }
    c->cache.prefetch.staging_capacity = staging;
  }
  if (!auto_ram.empty()) {
    const uint64_t each = std::min(kDefaultRam, left / auto_ram.size());
    for (size_t i : auto_ram) {
      c->cache.tiers[i].capacity = each;
      if (each < kDefaultRam) {
        fit->warnings.push_back("cache.tiers[" + std::to_string(i) + "].capacity sized to " +
                                HumanBytes(each) + " (default " + HumanBytes(kDefaultRam) +
                                ") to fit " + what);
      }
    }
  }
  need = EstimateMemory(*c);
  fit->summary = "memory: " + HumanBytes(need.ram_tiers) + " of RAM tiers + " +
                 HumanBytes(need.staging) + " of staging window + " + own + " = " +
                 HumanBytes(need.total()) + ", within " + what + " less " + HumanBytes(headroom) +
                 " headroom" +
                 (auto_ram.empty() && !c->cache.prefetch.tune_staging_capacity
                      ? ""
                      : " (capacities left to the default take at most half of it)");
  return Status::Ok();
}

}  // namespace clairfs
