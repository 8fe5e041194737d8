// Consumption: which positions of the plan's access string the readers have consumed.
//
// Contract: a reader's read of object o consumes o's earliest unconsumed position (readers may
// consume out of order); low() is the first position neither consumed nor given up (the
// `position` of stats), and epoch() its epoch.
//
// Readers are observed, not trusted: a read the kernel answers from its page cache, an mmap
// page brought in once for several records, or a job that skips a file never arrives. So a
// position more than `lag` positions behind the furthest consumed one is given up: counted as
// consumed for low(), never consumed by a later read. A reader that comes to a given-up
// position late is served all the same, only no longer from the staging window. lag bounds
// how far out of order readers may run (loader workers x prefetch factor x batch size).
//
// A replaced plan starts unconsumed; an appended plan (old epochs plus new ones, object ids
// kept) keeps what was consumed.
//
// Not thread-safe: the owner serializes every call (Prefetcher calls it under its mu_).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/plan.h"

namespace clairfs {

class Consumption {
 public:
  explicit Consumption(uint32_t lag = 1u << 16) : lag_(lag) {}
  // Follows plan from now on. keep: plan extends the previous one (an append or a replan).
  void Reset(std::shared_ptr<const Plan> plan, bool keep);
  // Consumes the earliest unconsumed, not given-up position of object id; that position, or
  // kNoPos when there is none.
  uint32_t Consume(uint32_t id);
  // Whether pos was consumed or given up.
  bool done(uint32_t pos) const { return pos < low_ || consumed_[pos] != 0; }
  uint32_t low() const { return low_; }
  uint64_t epoch() const { return plan_ ? plan_->EpochOf(low_) : 0; }
  uint64_t given_up() const { return given_up_; }

 private:
  const uint32_t lag_;
  std::shared_ptr<const Plan> plan_;
  std::vector<uint8_t> consumed_;   // per position
  std::vector<uint32_t> next_use_;  // per object: earliest unconsumed position, or kNoPos
  uint32_t low_ = 0;
  uint32_t high_ = 0;      // one past the furthest consumed position
  uint64_t given_up_ = 0;  // positions given up so far
};

}  // namespace clairfs
