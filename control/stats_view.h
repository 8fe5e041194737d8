// The content of .clairfs/stats as a JSON object: the daemon's counters (cache/base/stats.h), the
// prefetcher's progress and the values derived from them (hit rates, readiness), computed in
// one place so that `stats`, `metrics` (control/metrics.h) and clairfs-ctl agree.
// docs/control-interface.md ("stats") documents every key.
#pragma once

#include <nlohmann/json.hpp>

#include "cache/plan/summary.h"
#include "cache/prefetch/prefetcher.h"
#include "control/node_stats.h"

namespace clairfs {

// How much of what the plan stages ahead is in place, each in [0, 1]:
//   tiers   bytes the tiers hold over the bytes the plan places in them (1 with no tier share);
//   window  bytes in the staging window over what it can hold of the plan's staged bytes,
//           min(plan staging bytes, staging capacity) (1 with nothing to stage);
//   ready   the smaller of the two (what `clairfs-ctl wait` waits for).
struct Readiness {
  double tiers = 1.0;
  double window = 1.0;
  double ready = 1.0;
};
// summary: of the active plan, null without one (then everything is 1).
Readiness ComputeReadiness(const PlanSummary* summary, const std::vector<uint64_t>& tier_used,
                           uint64_t staging_bytes, uint64_t staging_capacity);

// The stats object. summary: of the active plan (null without one). Reads counters relaxed,
// one at a time: values are each current, not a consistent cut. Thread-safe.
nlohmann::json StatsObject(const NodeStats& stats, Prefetcher& prefetcher,
                           const PlanSummary* summary);

}  // namespace clairfs
