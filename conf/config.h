// Config: the daemon's options, read from YAML. The only place that includes yaml-cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

// conf/ includes, of the other layers, only cache/base/status.h and the components' option headers
// (*_options.h: plain structs with only standard headers, no code to link; docs/configuration.md,
// "Defaults"), so that it parses straight into the structs the components take.
#include "batch/batch_options.h"
#include "cache/backing/io_options.h"
#include "cache/base/status.h"
#include "cache/prefetch/prefetch_options.h"
#include "cluster/peer_options.h"
#include "fs/core/fs_options.h"

namespace clairfs {

// A tier of cache.tiers; the daemon builds it (daemon/compose.h) and gives its threads to the
// prefetcher (PrefetchOptions::tier_threads).
struct TierConfig {
  std::string kind = "ram";  // "ram" (daemon memory) or "ssd" (RocksDB in dir)
  uint64_t capacity = 0;     // bytes of file data; 0 (omitted, "auto"): ram sized to the
                             // memory limit, at most 1GiB (conf/memory_budget.h); ssd half
                             // the free space
  int threads = PrefetchOptions::kTierThreads;  // prefetch threads filling it in first-reference
                                                // order
  std::string dir;                              // ssd: cache directory; empty: DefaultSsdDir()

  bool operator==(const TierConfig&) const = default;

  // A tier of this kind with the defaults above.
  static TierConfig OfKind(const char* kind) {
    TierConfig t;
    t.kind = kind;
    return t;
  }
};

// The cache.* keys (and warn.*, which the prefetcher's read watch takes).
struct CacheConfig {
  std::vector<TierConfig> tiers{TierConfig::OfKind("ram"),
                                TierConfig::OfKind("ssd")};  // fastest first
  // cache.staging.*, cache.demand_threads, cache.fetch_timeout, cache.chunk_size,
  // cache.record_chunk_size, cache.consumption_lag, cache.stream_idle, cache.max_streams,
  // cache.keep_copies and warn.*. tier_threads stays empty here (the tiers' threads).
  // chunk_size and record_chunk_size left out of the file are at most the staging capacity.
  PrefetchOptions prefetch;
  // cache.staging.capacity omitted (or "auto"): prefetch.tune_staging_capacity; its most is
  // sized to the memory limit at start (at most prefetch.staging_capacity,
  // conf/memory_budget.h) and the tuner grows the window within it. False once the file or -o
  // gives a size. cache.staging.threads likewise: prefetch.tune_staging_threads.
  // fuse.open_mode none: reads the kernel answers from its page cache never reach the daemon,
  // so a planned read more than this many reads behind the furthest one that did is taken as
  // served from it (given up, as consumption_lag gives up) and the staging window moves on.
  // The daemon gives the prefetcher the smaller of the two lags in that mode.
  uint32_t page_cache_lag = 4096;
  IoOptions io;  // cache.backing_timeout: io.timeout

  bool operator==(const CacheConfig&) const = default;
};

// The peer tier, when clairfs runs under an MPI launcher (one daemon per rank).
struct ClusterConfig {
  // Join the other ranks of an MPI launcher (one daemon per rank, sharing their tiers); also
  // clairfs --cluster. Off: an MPI environment the process inherited is ignored.
  bool enabled = false;
  // The cluster's secret (cluster/cluster_key.h: LoadClusterKey's checks), the same file on
  // every node; every message between the daemons is sealed with it. Needed in cluster mode.
  std::string key_file;
  cluster::PeerOptions peer;  // plan_timeout, peer_timeout, down_for, serve_threads
  // Read the backing store instead of a holding peer only when it is measured this many times
  // faster; 0: never (ClusterHooks::backing_advantage, which the daemon sets from it).
  double backing_advantage = kDefaultBackingAdvantage;

  bool operator==(const ClusterConfig&) const = default;
};

// The daemon's log (daemon/daemon_log.h); conf/ is its one home, as no component takes it.
struct LogConfig {
  std::string level = "info";  // trace, debug, info, warn, error, critical, off
  std::string file;            // empty: stderr in the foreground, syslog as a daemon
  // Size-based rotation of file: past max_size bytes it becomes file.1 (file.1 becomes
  // file.2, ...; file.<max_files> is dropped) and a new file is started. 0: never (logrotate
  // and SIGHUP still work).
  uint64_t max_size = 64ull << 20;
  int max_files = 4;

  bool operator==(const LogConfig&) const = default;
};

// The whole file. Every default is a member initialiser of the components' option structs
// (FsOptions, PrefetchOptions, IoOptions, PeerOptions, BatchOptions) or of the structs above,
// written nowhere else; tests/unit/config_test checks that conf/clairfs.yaml parses to Config{}.
struct Config {
  FsOptions fuse;  // fuse.* and control.group
  CacheConfig cache;
  ClusterConfig cluster;
  LogConfig log;
  BatchOptions batch;  // batch.*: the batch path (docs/batch-path.md)
  // Checks ranges; the message names the bad key.
  Status Validate() const;

  bool operator==(const Config&) const = default;
};

// Replaces "{rank}" in every SSD tier directory with rank.
void SubstituteRank(Config* config, int rank);

// The default SSD directory of a dataset (absolute, normalized path) for this user; instance as
// for ResolveForDataset. Root: /var/tmp/clairfs/<name>-<xxh3>[-rank<N>]; another user:
// $XDG_CACHE_HOME/clairfs/... or ~/.cache/clairfs/... (docs/configuration.md).
std::string DefaultSsdDir(const std::string& dataset, int instance = -1);

struct MemoryFit;  // conf/memory_budget.h

// Fills what depends on the machine and the dataset (absolute, normalized path): default SSD
// directories (suffixed "-rank<N>" when instance >= 0, so that ranks sharing a machine do not
// share a cache) and capacities. Fails, naming the key, when a capacity cannot be met: RAM
// tiers plus the staging window plus the daemon's own memory more than the memory it may use
// (the machine's, or its cgroup's limit if lower: FitMemory in conf/memory_budget.h, which also
// sizes the capacities left to the default), an SSD tier larger than its file system's free
// space plus what its cache already holds. fit (if not null) receives what to log.
Status ResolveForDataset(Config* config, const std::string& dataset, int instance = -1,
                         MemoryFit* fit = nullptr);

// The refusal of a configuration key, the one form every check of this layer uses:
// kInvalidArgument, "config key 'KEY': WHY".
Status BadKey(const std::string& key, const std::string& why);

// Parses YAML text; unknown keys and bad values fail with the key named ("cache.staging.x").
Result<Config> ParseConfig(std::string_view yaml);
Result<Config> LoadConfigFile(const std::string& path);

// A config key set on the command line (-o cache.staging.capacity=1GiB): the dotted path of
// the key in the YAML file, a list element by its index (cache.tiers.1.capacity), and the value
// as YAML would read it after the colon (a scalar, or a flow value such as [{kind: ram}]).
struct ConfigOverride {
  std::string key;
  std::string value;
};

// Reads the YAML file at path (empty: none, the built-in defaults), sets each override in turn
// as if written in the file (an index into cache.tiers that the file does not list reaches the
// default tiers), then parses and validates as ParseConfig. Errors name the file and the
// reason it could not be read, or the key.
Result<Config> LoadConfig(const std::string& path, const std::vector<ConfigOverride>& overrides);
// "4GiB", "512MiB", "64KiB", "1.5GB", "4096" -> bytes. Binary (KiB, MiB, GiB, TiB, and K, M,
// G, T) and decimal (kB, MB, GB, TB) units; a bare number is bytes.
Result<uint64_t> ParseSize(std::string_view text);

}  // namespace clairfs
