// The "cluster" section of .clairfs/stats (docs/control-interface.md, "cluster"): one entry
// per rank of the cluster, this node's made from its live counters, the others' from the
// reports they sent (cluster/node_report.h), and totals over them. A daemon outside a cluster
// has no such section. Pure functions of their arguments besides the counters they read
// (relaxed, one at a time): thread-safe.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <vector>

#include "cache/plan/summary.h"
#include "cache/prefetch/prefetcher.h"
#include "cluster/node_report.h"
#include "control/node_stats.h"

namespace clairfs {

// Fills what the cache counts of this node's report: its tiers (kind by name, bytes held,
// capacity, and the objects the active plan places in each, from summary: 0 without a plan)
// and the backing store's bytes and reads.
void FillNodeReport(const NodeStats& stats, Prefetcher& prefetcher, const PlanSummary* summary,
                    cluster::NodeReport* report);

// How often the nodes report, and the age past which a live node's report is stale.
struct ReportTiming {
  std::chrono::milliseconds period{0};
  std::chrono::milliseconds stale_after{0};
};

// The section: {"nodes": [...], "totals": {...}, "report_period_seconds",
// "stale_after_seconds", "reports": {"sent", "received", "refused"}}. A node's entry carries
// its rank, state, and (once it reported) its host, report age, tiers and counters; the totals
// sum the counters and tiers of every node with a report, dead ones included (what they read
// was read), and name the cluster's planned bytes (dataset_bytes: the largest a node reported,
// null while none knows it).
nlohmann::json ClusterObject(const std::vector<cluster::ClusterRow>& rows,
                             const ClusterStats& stats, const ReportTiming& timing);

}  // namespace clairfs
