// StagingWindow: a bounded window of staged objects that walks the access string in exact read
// order ahead of the readers, and drops each object once its counted occurrences were consumed
// or given up (Consumption).
//
// Contract:
// - The cursor walks positions in order from the low-water mark, never behind it. A position
//   that is done already, or whose object is not staged (Placement::Staged), is skipped. An
//   object already in the window gets one more counted occurrence; any other object gets an
//   entry and its bytes reserved, if they fit the capacity (else the walk stops: full).
// - A kPeer object is staged only once the peer tier holds it (the window never reads an
//   object another node owns from the backing store; a reader that gets there first fetches it).
// - An entry lives until every counted occurrence was consumed (Take), or the low-water mark
//   passed its last counted occurrence (Follow: the rest were given up), or its fetch failed
//   (Land); its reserved bytes are freed then. bytes() never exceeds the capacity.
// - The bytes stay alive in the reader's handle after the entry is dropped.
//
// Not thread-safe: the owner serializes every call (Prefetcher calls it under its mu_).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>

#include "cache/consumption.h"
#include "cache/object.h"
#include "cache/plan.h"
#include "cache/single_flight.h"
#include "cache/tier.h"

namespace clairfs {

class StagingWindow {
 public:
  explicit StagingWindow(uint64_t capacity) : capacity_(capacity) {}

  // A new plan: every entry is dropped and the walk restarts at cursor.
  void Reset(uint32_t cursor);
  // The low-water mark is now low: the cursor never stays behind it, and entries whose every
  // counted occurrence lies before it are dropped. True if bytes were freed.
  bool Follow(uint32_t low);

  enum class Step {
    kFetch,      // *job names the object to fetch into its new entry; Attach its flight next
    kFull,       // the next object does not fit until a consumption frees bytes
    kAwaitPeer,  // the next object waits for its owner's announcement (poll again)
    kIdle,       // the end of the access string
  };
  struct Job {
    uint32_t id = 0;
    std::string key;
    FileVersion version;
  };
  // Advances the cursor as the contract says. peer: may be null.
  Step Next(const Plan& plan, const Consumption& consumption, Tier* peer, Job* job);
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
  // A reader consumed position pos of id (kNoPos: an open beyond the planned occurrences).
  // The window's bytes or flight for id if it counted pos (or holds id, for kNoPos); a counted
  // occurrence is released.
  Hit Take(uint32_t id, uint32_t pos);

  uint64_t bytes() const { return bytes_; }
  uint32_t cursor() const { return cursor_; }

 private:
  struct Entry {
    BlobPtr blob;          // null until the fetch lands
    FlightPtr flight;      // the fetch that fills it
    uint32_t pending = 0;  // counted occurrences not yet consumed
    uint32_t last = 0;     // the last counted occurrence
    uint64_t bytes = 0;    // reserved bytes
  };
  void Drop(std::unordered_map<uint32_t, Entry>::iterator it);

  const uint64_t capacity_;
  uint64_t bytes_ = 0;
  uint32_t cursor_ = 0;  // next position to consider
  std::unordered_map<uint32_t, Entry> entries_;
  std::deque<std::pair<uint32_t, uint32_t>> counted_;  // (position, id), in cursor order
};

}  // namespace clairfs
