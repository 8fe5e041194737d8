// Options of the prefetcher (cache/prefetch/prefetcher.h) and its read watch
// (cache/prefetch/read_watch.h). Plain structs with only standard headers (docs/configuration.md,
// "Defaults"): the member initialisers are the one place each default is written; conf/ parses the
// YAML keys named beside each member into them, and conf/clairfs.yaml must equal them
// (tests/unit/config_test).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace clairfs {

// cluster.backing_advantage (ClusterHooks::backing_advantage): a peer that holds an object is read
// unless the backing store's measured throughput is more than this many times the peers'.
inline constexpr double kDefaultBackingAdvantage = 0;  // never prefer the backing store

struct ReadWatchOptions {
  std::chrono::milliseconds no_plan_after{60'000};  // warn.no_plan_after; 0: never warn
  uint32_t check_reads = 512;                       // warn.check_reads; 0: never judge a plan
  uint32_t order_slack = 8192;                      // warn.order_slack, positions

  bool operator==(const ReadWatchOptions&) const = default;
};

struct PrefetchOptions {
  // Threads filling a tier that tier_threads does not list (cache.tiers[i].threads).
  static constexpr int kTierThreads = 2;
  // cache.staging.capacity: bytes of the window; with tune_staging_capacity the most the tuner
  // may give it (the memory budget sizes it: conf/memory_budget.h).
  uint64_t staging_capacity = 256ull << 20;
  // cache.staging.threads: threads filling the window; with tune_staging_threads the count the
  // tuner starts from.
  int staging_threads = 4;
  // cache.staging.capacity / cache.staging.threads `auto` (the default; a number sets it
  // statically): chosen at run time from what is measured (cache/prefetch/autotune.h).
  bool tune_staging_capacity = true;
  bool tune_staging_threads = true;
  // Not config keys: the tuner's range, start and sample period. The window starts at
  // tune_start_capacity (at least a chunk, at most staging_capacity).
  int tune_min_threads = 1;
  int tune_max_threads = 32;
  uint64_t tune_start_capacity = 64ull << 20;
  std::chrono::milliseconds tune_period{100};
  std::vector<int> tier_threads;                    // threads filling each tier (from the tiers)
  int demand_threads = 4;                           // cache.demand_threads: see FetchPool
  std::chrono::milliseconds fetch_timeout{60'000};  // cache.fetch_timeout: longest fetch wait
  uint32_t consumption_lag = 1u << 16;              // cache.consumption_lag, positions
  uint64_t chunk_size = 4ull << 20;  // cache.chunk_size: files read whole larger are chunked
  // cache.record_chunk_size: files range entries name (records) larger than this are cut in chunks
  // of this size (0: chunk_size): a record then costs a small chunk, not a large one, to fetch and
  // to serve.
  uint64_t record_chunk_size = 256ull << 10;
  // cache.stream_idle: a stream with no read and no registration for this long is removed
  // (0: never).
  std::chrono::milliseconds stream_idle{3'600'000};
  // cache.max_streams: streams a plan may hold (Registrar refuses a registration that would add
  // one more).
  uint32_t max_streams = 64;
  // cache.keep_copies: the fastest persistent tier below a volatile one keeps copies of the faster
  // tiers' objects, in the room the placement leaves it (cache/plan/kept_copies.h).
  bool keep_copies = true;
  // Not a config key: how long Stop lets the kept copies still queued be written (the daemon's stop
  // grace is 5 s).
  std::chrono::milliseconds keep_drain{1'500};
  // warn.*: when the job's reads do not match its plan, or it reads with none (read_watch.h).
  ReadWatchOptions watch;

  bool operator==(const PrefetchOptions&) const = default;
};

}  // namespace clairfs
