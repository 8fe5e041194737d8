// Config: the daemon's options, read from YAML. The only place that includes yaml-cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/status.h"
#include "fs/fs_options.h"

namespace clairfs {

struct TierConfig {
  std::string kind = "ram";       // "ram" (the only kind so far)
  uint64_t capacity = 1ull << 30; // bytes of file data the tier may hold
  int threads = 2;                // prefetch threads filling it in first-reference order
};

struct CacheConfig {
  std::vector<TierConfig> tiers{TierConfig{}};  // fastest first
  uint64_t staging_capacity = 256ull << 20;     // bytes the staging window may hold
  int staging_threads = 4;                      // threads filling the window in read order
  int demand_threads = 4;                       // threads fetching what readers reached first
  double fetch_timeout = 60;                    // seconds a reader waits on a fetch
  uint64_t max_file_size = 256ull << 20;        // larger planned files are read directly
};

struct LogConfig {
  std::string level = "info";  // trace, debug, info, warn, error, critical, off
  std::string file;            // empty: stderr in the foreground, syslog as a daemon
};

struct Config {
  FsOptions fuse;
  CacheConfig cache;
  LogConfig log;
  // Checks ranges; the message names the bad key.
  Status Validate() const;
};

// Parses YAML text; unknown keys and bad values fail with the key named ("cache.staging.x").
Result<Config> ParseConfig(std::string_view yaml);
Result<Config> LoadConfigFile(const std::string& path);
// "4GiB", "512MiB", "64KiB", "1.5GB", "4096" -> bytes. Binary (KiB, MiB, GiB, TiB, and K, M,
// G, T) and decimal (kB, MB, GB, TB) units; a bare number is bytes.
Result<uint64_t> ParseSize(std::string_view text);

}  // namespace clairfs
