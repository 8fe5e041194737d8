// Config: the daemon's options, read from YAML. The only place that includes yaml-cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/base/status.h"
#include "fs/core/fs_options.h"

namespace clairfs {

struct TierConfig {
  std::string kind = "ram";  // "ram" (daemon memory) or "ssd" (RocksDB in dir)
  uint64_t capacity = 0;     // bytes of file data; 0 (omitted, "auto"): ram sized to the
                             // memory limit, at most 1GiB (conf/memory_budget.h); ssd half
                             // the free space
  int threads = 2;           // prefetch threads filling it in first-reference order
  std::string dir;           // ssd: cache directory; empty: DefaultSsdDir()
};

struct CacheConfig {
  std::vector<TierConfig> tiers{TierConfig{"ram", 0, 2, ""},
                                TierConfig{"ssd", 0, 2, ""}};  // fastest first
  uint64_t staging_capacity = 256ull << 20;                    // bytes the staging window may hold
  // cache.staging.capacity omitted (or "auto"): sized to the memory limit at start, at most
  // 256 MiB (conf/memory_budget.h); false once the file or -o gives a size.
  bool staging_auto = true;
  int staging_threads = 4;                // threads filling the window in read order
  int demand_threads = 4;                 // threads fetching what readers reached first
  double fetch_timeout = 60;              // seconds a reader waits on a fetch
  // Files larger than this are cut into chunks of this size, each cached on its own
  // (cache/base/object_key.h); at most the staging capacity. Unset: 4 MiB, or the staging
  // capacity if that is smaller.
  uint64_t chunk_size = 4ull << 20;
  // The same for files that range entries name (records read in a shuffled order): a record
  // costs one such chunk to fetch from the store, a peer or the SSD tier. Unset: 256 KiB, or
  // the staging capacity if that is smaller.
  uint64_t record_chunk_size = 256ull << 10;
  // How far (in object reads) readers may run out of order before a position they skipped is
  // given up (cache/plan/consumption.h).
  uint32_t consumption_lag = 1u << 16;
  // fuse.open_mode none: reads the kernel answers from its page cache never reach the daemon,
  // so a planned read more than this many reads behind the furthest one that did is taken as
  // served from it (given up, as consumption_lag gives up) and the staging window moves on.
  uint32_t page_cache_lag = 4096;
  // Seconds after which a stream nobody reads or registers is removed (a crashed job must not
  // pin its plan); 0: never.
  double stream_idle = 3600;
  // Streams the plan may hold at once: each costs about 12 bytes per object of the plan for
  // its consumption record, so a user registering stream after stream cannot exhaust memory.
  uint32_t max_streams = 64;
  // The SSD tier also keeps copies of the RAM tier's objects, in the room the plan leaves it,
  // so that a remount or the next job finds them there (docs/architecture.md, "Warm
  // restarts"); false: each object in one tier only.
  bool keep_copies = true;

  // Seconds one backing-store call (stat, open, a 4 MiB read step) may take; then it fails
  // with ETIMEDOUT and is abandoned (cache/backing/io_executor.h).
  double backing_timeout = 30;
};

// The peer tier, when clairfs runs under an MPI launcher (one daemon per rank).
struct ClusterConfig {
  // Join the other ranks of an MPI launcher (one daemon per rank, sharing their tiers); also
  // clairfs --cluster. Off: an MPI environment the process inherited is ignored.
  bool enabled = false;
  double plan_timeout = 30;      // seconds a node waits for the other nodes' plans
  double peer_timeout = 2;       // seconds a reader waits for one peer's reply
  double down_for = 60;          // seconds a peer that missed a reply is skipped
  int serve_threads = 2;         // threads answering other nodes' requests
  double backing_advantage = 0;  // read the backing store instead of a holding peer only when
                                 // it is measured this many times faster; 0: never
};

struct LogConfig {
  std::string level = "info";  // trace, debug, info, warn, error, critical, off
  std::string file;            // empty: stderr in the foreground, syslog as a daemon
  // Size-based rotation of file: past max_size bytes it becomes file.1 (file.1 becomes
  // file.2, ...; file.<max_files> is dropped) and a new file is started. 0: never (logrotate
  // and SIGHUP still work).
  uint64_t max_size = 64ull << 20;
  int max_files = 4;
};

// Warnings for a job whose reads do not match its plan (cache/prefetch/read_watch.h).
struct WarnConfig {
  double no_plan_after = 60;   // seconds of reads with no plan registered; 0: never warn
  uint32_t check_reads = 512;  // reads after a registration judged against it; 0: never
  uint32_t order_slack = 8192;  // reads a job may run ahead of its plan's position
};

struct Config {
  FsOptions fuse;
  CacheConfig cache;
  ClusterConfig cluster;
  LogConfig log;
  WarnConfig warn;
  // Checks ranges; the message names the bad key.
  Status Validate() const;
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
