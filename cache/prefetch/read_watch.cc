#include "cache/prefetch/read_watch.h"

#include <fmt/format.h>

#include <algorithm>

namespace clairfs {

const char* WatchKindName(WatchKind kind) {
  switch (kind) {
    case WatchKind::kNoPlan:
      return "no_plan";
    case WatchKind::kNotInPlan:
      return "not_in_plan";
    case WatchKind::kOutOfOrder:
      return "out_of_order";
  }
  return "unknown";
}

void ReadWatch::PlanInstalled(bool fresh, std::string_view first_path, Clock::time_point) {
  Clear(WatchKind::kNoPlan);
  unplanned_since_.reset();
  unplanned_reads_ = 0;
  no_plan_raised_ = false;
  if (!fresh) return;
  Clear(WatchKind::kNotInPlan);
  Clear(WatchKind::kOutOfOrder);
  judging_ = options_.check_reads > 0;
  judged_ = not_in_plan_ = far_ = 0;
  first_path_ = first_path;
  stray_path_.clear();
}

std::optional<std::string> ReadWatch::Observe(const Read& read, Clock::time_point now) {
  if (!read.have_plan) {
    if (options_.no_plan_after.count() <= 0 || no_plan_raised_) return std::nullopt;
    if (!unplanned_since_) unplanned_since_ = now;
    ++unplanned_reads_;
    if (now - *unplanned_since_ < options_.no_plan_after) return std::nullopt;
    no_plan_raised_ = true;
    const double seconds = std::chrono::duration<double>(now - *unplanned_since_).count();
    Raise(WatchKind::kNoPlan,
          fmt::format("{} files read in {:.0f} s and no plan is registered: every read goes to "
                      "the backing store and nothing is fetched ahead. Register what the job "
                      "will read: write it to .clairfs/manifest in the mount (clairfs-ctl "
                      "register MNT FILE, or clairfs.register_loader in Python)",
                      unplanned_reads_, seconds),
          now);
    return active_.back().message;
  }
  if (!judging_) return std::nullopt;
  ++judged_;
  if (!read.planned) {
    ++not_in_plan_;
    if (stray_path_.empty()) stray_path_ = read.path;
  } else if (!read.consumed || read.ahead > options_.order_slack) {
    ++far_;
  }
  if (judged_ < options_.check_reads) return std::nullopt;
  judging_ = false;
  const uint32_t planned = judged_ - not_in_plan_;
  if (2 * uint64_t{not_in_plan_} >= judged_) {
    Raise(WatchKind::kNotInPlan,
          fmt::format("{} of the first {} files read since the plan was registered are not in "
                      "it (such as '{}'; the plan starts with '{}'): manifest paths must be "
                      "relative to the dataset root, as the job opens them below the mount; "
                      "these reads bypass the cache",
                      not_in_plan_, judged_, stray_path_, first_path_),
          now);
    return active_.back().message;
  }
  if (planned > 0 && 2 * uint64_t{far_} >= planned) {
    Raise(WatchKind::kOutOfOrder,
          fmt::format("{} of the first {} planned files read since the plan was registered "
                      "came more than {} reads away from the plan's position (the plan starts "
                      "with '{}'): the job does not read in the order it registered (another "
                      "seed, shuffle or sampler?), so reads wait while the data fetched ahead "
                      "is for later",
                      far_, planned, options_.order_slack, first_path_),
          now);
    return active_.back().message;
  }
  return std::nullopt;
}

void ReadWatch::Raise(WatchKind kind, std::string message, Clock::time_point now) {
  Clear(kind);
  active_.push_back({kind, std::move(message), now});
}

void ReadWatch::Clear(WatchKind kind) {
  std::erase_if(active_, [&](const ReadWarning& w) { return w.kind == kind; });
}

}  // namespace clairfs
