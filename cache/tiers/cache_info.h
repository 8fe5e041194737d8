// The description of an SSD cache directory: <dir>/clairfs.json, so that a directory says what
// it holds without opening its database (`clairfs-ctl cache list` reads it). Written only by
// the process holding the directory's lock (cache/tiers/ssd_dir.h), mode 0600, atomically (a
// temporary file renamed over it; neither is ever opened through a symbolic link):
//
//   {"format": 1, "dataset": "/data/imagenet", "version": "0.1.0",
//    "created": 1764120000, "last_used": 1764123456}
//
// dataset: the absolute path of the dataset the cache was last used for ("" if unknown);
// version: the clairfs that last wrote it; created: when the first daemon described it;
// last_used: the last start on it or clean stop of a daemon using it (a killed daemon's last
// use is its start). Times are seconds since the epoch. Informational: the objects' own
// records (ssd_format.h), not this file, decide what the cache serves.
#pragma once

#include <cstdint>
#include <string>

#include "cache/base/status.h"

namespace clairfs {

inline constexpr char kCacheInfoFile[] = "clairfs.json";

struct CacheInfo {
  std::string dataset;    // absolute path of the dataset cached; "" if unknown
  std::string version;    // clairfs version that last wrote the description
  int64_t created = 0;    // seconds since the epoch
  int64_t last_used = 0;  // seconds since the epoch
};

// The description in dir: kNotFound if there is none, kCorruption if it is not one (not a
// regular file, too large, not the JSON above).
Result<CacheInfo> ReadCacheInfo(const std::string& dir);

// Replaces the description in dir atomically (see above).
Status WriteCacheInfo(const std::string& dir, const CacheInfo& info);

// A use of dir for dataset, now: keeps the creation time of the description there (now if
// there is none or it is unreadable) and sets the rest. *previous (if given) receives the
// dataset the description named before ("" if none). An empty dataset keeps the one named.
Status RecordCacheUse(const std::string& dir, const std::string& dataset,
                      std::string* previous = nullptr);

}  // namespace clairfs
