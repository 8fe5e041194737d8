// ReadWatch: notices a job whose reads do not match what it registered, and says why, once.
//
// Two mistakes cost a job its cache without any error:
//  - kNoPlan: it reads and never registers a plan. Raised at the first read at least
//    no_plan_after after the first read made with no plan; cleared when a plan is installed.
//  - kNotInPlan / kOutOfOrder: it registered a plan and reads something else. The first
//    check_reads reads after a registration that brings a new stream (not epochs appended to
//    one, not a cluster replan) are judged: if half or more name files the plan does not hold,
//    the manifest's paths do not match what the job opens (another root, another naming):
//    kNotInPlan. Else, if half or more of the planned ones consumed a position more than
//    order_slack positions beyond their stream's position (or none at all), the job reads in
//    another order than it registered (another seed, another sampler): kOutOfOrder. A job
//    that follows its plan reads within loader workers x prefetch factor x batch size of the
//    position, far below the default slack. Cleared by the next such registration.
// A raised warning is returned by Observe once (the caller logs it) and listed by Active()
// until cleared (the stats show it).
//
// Not thread-safe: the owner serializes every call (Prefetcher calls it under its mu_).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/prefetch/prefetch_options.h"

namespace clairfs {

enum class WatchKind { kNoPlan, kNotInPlan, kOutOfOrder };
const char* WatchKindName(WatchKind kind);  // "no_plan", "not_in_plan", "out_of_order"

struct ReadWarning {
  WatchKind kind;
  std::string message;  // what is wrong, the evidence, what to do
  std::chrono::steady_clock::time_point since;
};

class ReadWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // A read's relation to the active plan.
  struct Read {
    std::string_view path;   // the file read (a chunk's file)
    bool have_plan = false;  // a plan with at least one stream is active
    bool planned = false;    // the plan holds this object
    bool consumed = false;   // it consumed a position of a stream
    uint64_t ahead = 0;      // with consumed: that position minus the stream's position
  };

  explicit ReadWatch(ReadWatchOptions options = {}) : options_(options) {}

  // A plan with streams was installed. fresh: it brings a stream that was not followed
  // before (a new or replaced one); first_path: the first file that stream reads.
  void PlanInstalled(bool fresh, std::string_view first_path, Clock::time_point now);
  // One read by a job (an open, or the first read of a chunk). The warning this read raised,
  // if any, to be logged by the caller.
  std::optional<std::string> Observe(const Read& read, Clock::time_point now);
  const std::vector<ReadWarning>& Active() const { return active_; }

 private:
  void Raise(WatchKind kind, std::string message, Clock::time_point now);
  void Clear(WatchKind kind);

  const ReadWatchOptions options_;
  std::vector<ReadWarning> active_;
  // No plan: when the first read without one came, and reads since.
  std::optional<Clock::time_point> unplanned_since_;
  uint64_t unplanned_reads_ = 0;
  bool no_plan_raised_ = false;
  // Judging the reads after a registration.
  bool judging_ = false;
  uint32_t judged_ = 0, not_in_plan_ = 0, far_ = 0;
  std::string first_path_;  // the registered stream's first file
  std::string stray_path_;  // the first file read that the plan does not hold
};

}  // namespace clairfs
