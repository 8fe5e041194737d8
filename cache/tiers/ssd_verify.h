// VerifySsdCache: checks every object of an SSD cache directory offline (the clairfs-cache
// tool): for each record (ssd_format.h), that its key is well formed, that the bytes are
// there with the size the key and record say, and that they hash to the record's xxh3.
// Optionally deletes the objects that fail (record and bytes), as the daemon would on reading
// them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/base/status.h"

namespace clairfs {

enum class VerifyMode {
  kCheck,   // read only: the database is opened read-only
  kRepair,  // also delete the bad objects
};

struct VerifyReport {
  struct Bad {
    std::string key;     // DisplayKey of the object (path, and [offset+length] for a chunk)
    std::string reason;  // what is wrong with it
  };
  uint64_t objects = 0;  // records checked
  uint64_t bytes = 0;    // bytes of data read and hashed
  std::vector<Bad> bad;  // objects that fail, in key order
  uint64_t deleted = 0;  // kRepair: bad objects deleted
  bool clean() const { return bad.empty(); }
};

// dir: an existing SSD cache directory (it holds RocksDB's CURRENT file). Takes its lock
// (cache/tiers/ssd_dir.h) for the whole walk: kLocked, naming the holder's pid, when a daemon
// (or another check) holds it. kNotFound when dir is not a cache (a symbolic link, not a
// directory, no database in it); the database's own failures as its Status (kIoError,
// kCorruption). A bad object is not a failure: it is in the report.
Result<VerifyReport> VerifySsdCache(const std::string& dir, VerifyMode mode);

}  // namespace clairfs
