// Consumption: which positions of one stream's access string its readers have consumed.
//
// Contract: a read of object o consumes o's earliest unconsumed position (readers may consume
// out of order); low() is the first position neither consumed nor given up (the stream's
// `position` in stats), and epoch() its epoch.
//
// Readers are observed, not trusted: a read the kernel answers from its page cache, an mmap
// page brought in once for several records, or a job that skips a file never arrives. So a
// position more than `lag` positions behind the furthest consumed one is given up: counted as
// consumed for low(), never consumed by a later read. A reader that comes to a given-up
// position late is served all the same, only no longer from the staging window. lag bounds
// how far out of order readers may run (loader workers x prefetch factor x batch size).
//
// Memory: no per-position links. Occurrences are indexed in a window [low, horizon) that only
// moves forward: a read of an object with no indexed occurrence extends it to the object's
// next one. Each position is indexed once, so a read costs amortized O(1); memory is one bit
// per position, 4 bytes per indexed position (about lag of them) and 12 bytes per object.
//
// A replaced stream starts unconsumed; an extended one (epochs appended, the same serial)
// keeps what was consumed, also when object ids were renumbered.
//
// Not thread-safe: the owner serializes every call (Prefetcher calls it under its mu_).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "cache/plan/plan.h"

namespace clairfs {

class Consumption {
 public:
  explicit Consumption(uint32_t lag = 1u << 16) : lag_(lag) {}
  // Follows stream (its object ids below objects) from now on. keep: stream extends the one
  // followed so far.
  void Reset(const PlanStream& stream, size_t objects, bool keep);
  // Consumes the earliest unconsumed, not given-up position of object id; that position, or
  // kNoPos when there is none.
  uint32_t Consume(uint32_t id);
  // The position Consume(id) would take if it lies below low() + ahead (indexing up to there
  // if needed), else kNoPos. Amortized O(1): each position is indexed once.
  uint32_t Locate(uint32_t id, uint32_t ahead);
  // Whether the stream still reads id at a position not done (so Consume(id) would take one).
  bool Reads(uint32_t id) const {
    return next_use_[id] != kNoPos || (last_pos_[id] != kNoPos && last_pos_[id] >= horizon_);
  }
  // Whether pos was consumed or given up.
  bool done(uint32_t pos) const { return pos < low_ || consumed(pos); }
  // Whether pos was consumed (not given up).
  bool consumed(uint32_t pos) const { return (consumed_[pos >> 6] >> (pos & 63)) & 1; }
  uint32_t low() const { return low_; }
  // One past the furthest consumed position.
  uint32_t high() const { return high_; }
  uint32_t positions() const { return static_cast<uint32_t>(seq_.size()); }
  uint64_t epoch() const;
  uint64_t epochs() const { return epoch_begin_.size(); }
  uint64_t given_up() const { return given_up_; }

 private:
  // Indexes the position at horizon_.
  void Extend();
  void Advance();

  const uint32_t lag_;
  PositionList seq_;  // the stream's positions (shared with the plan)
  std::vector<uint32_t> epoch_begin_;
  std::vector<uint64_t> consumed_;  // one bit per position
  std::vector<uint32_t> next_use_;  // per object: earliest not-done indexed position, or kNoPos
  std::vector<uint32_t> last_;      // per object: its last indexed position (valid while
                                    // next_use_ is set)
  std::vector<uint32_t> last_pos_;  // per object: its last not-consumed position, or kNoPos
  std::deque<uint32_t> link_;       // per position in [low_, horizon_): the object's next
                                    // indexed not-consumed position, or kNoPos
  uint32_t low_ = 0;
  uint32_t high_ = 0;      // one past the furthest consumed position
  uint32_t horizon_ = 0;   // positions below it are indexed; low_ <= high_ <= horizon_
  uint64_t given_up_ = 0;  // positions given up so far
};

}  // namespace clairfs
