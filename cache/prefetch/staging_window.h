// StagingWindow: a bounded window of staged objects that walks each stream's access string in
// exact read order ahead of its readers, and drops each object once its counted occurrences
// were consumed or given up (Consumption).
//
// Contract:
// - Each stream has a cursor that walks its positions in order from its low-water mark, never
//   behind it. Next() advances the stream whose cursor leads its low-water mark the least, so
//   the streams share the window by progress and none starves. A position that is done
//   already, or whose object is not staged (Placement::Staged), is skipped. An object already
//   in the window gets one more counted occurrence; any other object gets an entry and its
//   bytes reserved, if they fit the capacity (else the walk stops: full).
// - A kPeer object is staged only once the peer tier holds it (the window never reads an
//   object another node owns from the backing store; a reader that gets there first fetches it).
// - An entry lives until every counted occurrence (in any stream) was consumed (Take) or given
//   up (Follow), or its fetch failed (Land); its reserved bytes are freed then. bytes() never
//   exceeds the capacity. The capacity only grows (Grow: the tuner, autotune.h), so no entry
//   ever has to be dropped for room.
// - ready_bytes(): the bytes of landed entries (fetched and not yet released): what the window
//   holds ahead of the readers.
// - The bytes stay alive in the reader's handle after the entry is dropped.
// - Across Reset(): an object the new walk reaches whose bytes a landed entry held (same key,
//   version and size) gets its entry filled from them, not fetched again.
//
// Not thread-safe: the owner serializes every call (Prefetcher calls it under its mu_).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/base/object.h"
#include "cache/plan/consumption.h"
#include "cache/plan/plan.h"
#include "cache/prefetch/single_flight.h"
#include "cache/tiers/tier.h"

namespace clairfs {

class PeerSource;  // cache/prefetch/cluster_hooks.h

class StagingWindow {
 public:
  explicit StagingWindow(uint64_t capacity) : capacity_(capacity) {}

  // A new plan (placed), whose streams are followed by streams (in the plan's order): every
  // entry is dropped and each stream's walk restarts at its low-water mark. Next() must be
  // given the same plan until the next Reset(). The bytes of landed entries are kept aside,
  // by key, for the walk to take back (so that a change of one stream does not make every
  // stream's staged objects be fetched again); what the walk has not taken back when it first
  // stops (kFull, kIdle) is released.
  void Reset(const Plan& plan, const std::vector<Consumption>& streams);
  // Stream s's low-water mark moved: its cursor never stays behind it, and counted
  // occurrences behind it that were given up are released. True if bytes were freed.
  bool Follow(size_t s, const Consumption& c);

  enum class Step {
    kFetch,      // *job names the object to fetch into its new entry; Attach its flight next
    kFull,       // the next object does not fit until a consumption frees bytes
    kAwaitPeer,  // the next objects wait for their owners' announcements (poll again)
    kIdle,       // every stream's cursor is at its end
    kMore,       // kSkipLimit positions were skipped: call again (after letting others in)
  };
  // Positions one Next() call skips at most, so that walking past a plan whose objects are
  // mostly in tiers (100 million positions) never holds the owner's lock for long. A skipped
  // position costs a few nanoseconds (two bit tests); a plan with no staged object is not
  // walked at all.
  static constexpr uint32_t kSkipLimit = 65536;
  struct Job {
    uint32_t id = 0;
    std::string key;
    FileVersion version;
  };
  // Advances the cursors as the contract says. streams: as for Reset; peer: may be null.
  Step Next(const Plan& plan, const std::vector<Consumption>& streams, PeerSource* peer, Job* job);
  // The fetch that fills id's entry (set right after Next returned kFetch).
  void Attach(uint32_t id, FlightPtr flight);
  // flight's fetch for id ended with r: kept in the entry, or on failure the entry is dropped
  // (readers then fetch on demand). True if bytes were freed. Ignored when the entry is gone
  // or belongs to another flight.
  bool Land(uint32_t id, const FlightPtr& flight, const Result<BlobPtr>& r);

  struct Hit {
    BlobPtr blob;      // the bytes, if landed
    FlightPtr flight;  // else the fetch to wait on (null: the window does not have it)
    bool freed = false;
  };
  // A reader consumed position pos of stream s for id (pos kNoPos: a read beyond the planned
  // occurrences). The window's bytes or flight for id if it counted pos (or holds id, for
  // kNoPos); a counted occurrence is released.
  Hit Take(uint32_t id, size_t s, uint32_t pos);

  uint64_t bytes() const { return bytes_; }
  uint64_t ready_bytes() const { return ready_; }
  uint64_t capacity() const { return capacity_; }
  // Raises the capacity to capacity; a lower value is ignored.
  void Grow(uint64_t capacity) { capacity_ = std::max(capacity_, capacity); }
  uint32_t cursor(size_t s) const { return s < cursors_.size() ? cursors_[s].next : 0; }

 private:
  struct Entry {
    std::string key;       // the object's (kept across Reset)
    BlobPtr blob;          // null until the fetch lands
    FlightPtr flight;      // the fetch that fills it
    uint32_t pending = 0;  // counted occurrences not yet consumed or given up
    uint64_t bytes = 0;    // reserved bytes
  };
  struct Cursor {
    uint32_t next = 0;                                  // next position to consider
    std::deque<std::pair<uint32_t, uint32_t>> counted;  // (position, id), in cursor order
  };
  void Drop(std::unordered_map<uint32_t, Entry>::iterator it);
  // One counted occurrence of id is gone; true if that dropped its entry.
  bool Release(uint32_t id);

  bool Staged(uint32_t id) const { return (staged_[id >> 6] >> (id & 63)) & 1; }

  uint64_t capacity_;
  uint64_t bytes_ = 0;
  uint64_t ready_ = 0;  // bytes of the entries whose blob landed
  // One bit per object of the plan of the last Reset(): Placement::Staged(). A walk tests it
  // instead of reading the object (72 bytes apart: a cache miss per position).
  std::vector<uint64_t> staged_;
  uint64_t staged_count_ = 0;
  std::vector<Cursor> cursors_;  // per stream
  std::unordered_map<uint32_t, Entry> entries_;
  // Landed bytes of the entries the last Reset() dropped, by key: the walk takes them back.
  std::unordered_map<std::string, BlobPtr> carried_;
};

}  // namespace clairfs
