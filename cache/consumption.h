// Consumption: which occurrences of the plan's access string the readers have consumed.
//
// Contract: a reader's open of file f consumes f's earliest unconsumed occurrence (readers may
// consume out of order); low() is the first unconsumed position (the `position` of stats),
// and epoch() its epoch. A replaced plan starts unconsumed; an appended plan (old epochs plus
// new ones, file ids kept) keeps what was consumed.
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
  // Follows plan from now on. keep: plan extends the previous one (an append or a replan).
  void Reset(std::shared_ptr<const Plan> plan, bool keep);
  // Consumes the earliest unconsumed occurrence of file id; its position, or kNoPos when every
  // occurrence was consumed already.
  uint32_t Consume(uint32_t id);
  bool consumed(uint32_t pos) const { return consumed_[pos] != 0; }
  uint32_t low() const { return low_; }
  uint64_t epoch() const { return plan_ ? plan_->EpochOf(low_) : 0; }

 private:
  std::shared_ptr<const Plan> plan_;
  std::vector<uint8_t> consumed_;   // per position
  std::vector<uint32_t> next_use_;  // per file: earliest unconsumed position, or kNoPos
  uint32_t low_ = 0;
};

}  // namespace clairfs
