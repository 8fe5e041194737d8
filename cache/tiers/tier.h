// Tier: one level of this node's cache (RamTier, SsdTier), holding objects by their key
// (cache/base/object_key.h). The other nodes' tiers are read through PeerSource
// (cache/prefetch/cluster_hooks.h), not this interface.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "cache/base/object.h"
#include "cache/base/status.h"

namespace clairfs {

// Whether a tier is in service. A tier whose device failed (a full disk, EIO) switches itself
// off: Get and Contains answer a miss and Put is refused, without I/O, until it recovers.
enum class TierState { kOn, kOff };

inline const char* TierStateName(TierState s) { return s == TierState::kOn ? "on" : "off"; }

struct TierHealth {
  TierState state = TierState::kOn;
  uint64_t disabled = 0;   // times the tier switched itself off
  uint64_t io_errors = 0;  // failed device operations (logged, rate-limited)
  std::string cause;       // why it is off (empty when on)
};

// All methods are thread-safe. A tier never returns an object whose version differs from the
// one asked for; a failure inside a tier is reported as a miss (kNotFound) or a Status, never
// as wrong bytes.
class Tier {
 public:
  virtual ~Tier() = default;
  virtual const std::string& name() const = 0;
  // The object stored for key if its version equals version; kNotFound otherwise, answered
  // without I/O for an absent or stale object.
  virtual Result<BlobPtr> Get(std::string_view key, const FileVersion& version) = 0;
  // Stores blob for key, replacing an older version. kNoSpace if the tier's capacity would be
  // exceeded (nothing is evicted to make room: the planner decides what a tier holds).
  virtual Status Put(std::string_view key, BlobPtr blob) = 0;
  virtual bool Contains(std::string_view key, const FileVersion& version) = 0;
  // Removes key's object, if any.
  virtual void Erase(std::string_view key) = 0;
  // Evicts every object for which keep(key, version) is false.
  virtual void RetainOnly(
      const std::function<bool(std::string_view, const FileVersion&)>& keep) = 0;
  virtual uint64_t used_bytes() const = 0;
  virtual uint64_t capacity() const = 0;
  // Objects found corrupt (and deleted) so far.
  virtual uint64_t corruptions() const { return 0; }
  // Whether the tier is in service, and its failures so far.
  virtual TierHealth Health() const { return {}; }
  // Whether what the tier holds outlives the daemon (an SSD tier: the next mount finds it).
  virtual bool persistent() const { return false; }
};

}  // namespace clairfs
