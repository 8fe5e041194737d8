// Bytes another node sent (a kReply, a kPush) become a blob only after their checks: size
// against the key and version, xxh3 against the hash the sender computed. A bad reply is a
// miss, never wrong bytes. PeerDamage counts and logs what failed them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cache/base/log_limit.h"
#include "cache/base/object.h"
#include "cluster/cluster_stats.h"

namespace clairfs::cluster {

// A sealed blob of data[0, n) at version, or null when n is not the size of key at version
// (ObjectBytes) or the bytes do not hash to `hash`.
BlobPtr CheckedBlob(std::string_view key, const FileVersion& version, const char* data, size_t n,
                    uint64_t hash);

// Data that failed its checks. Thread-safe (the reader and the serving threads share one, so
// its log lines are rate-limited together).
class PeerDamage {
 public:
  explicit PeerDamage(ClusterStats* stats) : stats_(stats) {}
  // Data of key from rank r failed its version, size or hash check: counted in
  // Stats::peer_errors, logged (rate-limited).
  void Report(int r, std::string_view key);

 private:
  ClusterStats* const stats_;
  LogLimit log_;
};

}  // namespace clairfs::cluster
