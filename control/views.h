// ControlViews: the generated control files of <mount>/.clairfs/ (docs/control-interface.md),
// without FUSE:
//   stats    JSON counters (control/stats_view.h)
//   metrics  the stats in the Prometheus text format (control/metrics.h)
//   plan     JSON summary of the active plan, with its reads per epoch (control/plan_epochs.h)
//   errors   the report of the last manifest validation (Registrar::ErrorsText)
// What a reader sees depends on who it is (ViewText, control/counts_view.h). Every text is
// computed when it is asked for, from the prefetcher's current plan and the counters; a plan's
// summary and per-epoch reads are computed once per plan. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "cache/plan/plan.h"
#include "cache/plan/summary.h"
#include "cache/prefetch/prefetcher.h"
#include "cluster/node_report.h"
#include "control/cluster_view.h"
#include "control/counts_view.h"
#include "control/node_stats.h"
#include "control/registrar.h"

namespace clairfs {

class ControlViews {
 public:
  // All references must outlive this object.
  ControlViews(const Registrar& registrar, Prefetcher& prefetcher, const NodeStats& stats);

  // A JSON object text shown as "cluster" in the plan (cluster/ provides it). Before serving.
  void SetClusterInfo(std::function<std::string()> info) { cluster_info_ = std::move(info); }

  // In a cluster, before serving: every rank's row (cluster::ClusterNode::ClusterReports),
  // shown as stats' "cluster" section (control/cluster_view.h) with the report timing. Without
  // it (a daemon outside a cluster) stats has no "cluster" key.
  void SetClusterReports(std::function<std::vector<cluster::ClusterRow>()> rows,
                         ReportTiming timing) {
    cluster_rows_ = std::move(rows);
    report_timing_ = timing;
  }
  // What the cache counts of this node's report (FillNodeReport under the active plan's
  // summary): the source of cluster::ClusterNode's reports.
  void FillReport(cluster::NodeReport* report) const;

  // The generated files in full, as the mount's owner sees them.
  std::string StatsJson() const;
  std::string MetricsText() const;
  std::string PlanJson() const;
  std::string ErrorsText() const { return registrar_.ErrorsText(); }
  // A generated file as a caller with `view` may see it: for kFull the text above, for kCounts
  // the counts view built from it by whitelist (control/counts_view.h).
  std::string ViewText(ControlFile file, ControlView view) const;

 private:
  // The summary of plan (null for none), computed once per plan: stats reads need it for
  // readiness, and summarizing walks every object.
  std::shared_ptr<const PlanSummary> Summary(const std::shared_ptr<const Plan>& plan) const;
  // The plan's `per_epoch` (control/plan_epochs.h), computed once per plan at the first read
  // of `plan` (it walks every position), under summary_mu_.
  std::shared_ptr<const nlohmann::json> PerEpoch(const std::shared_ptr<const Plan>& plan) const;
  // The full stats and plan objects (StatsJson and PlanJson are their texts).
  nlohmann::json StatsValue() const;
  nlohmann::json PlanValue() const;

  const Registrar& registrar_;
  Prefetcher& prefetcher_;
  const NodeStats& stats_;
  std::function<std::string()> cluster_info_;
  std::function<std::vector<cluster::ClusterRow>()> cluster_rows_;
  ReportTiming report_timing_;
  mutable std::mutex summary_mu_;  // leaf
  mutable std::weak_ptr<const Plan> summary_plan_;
  mutable std::shared_ptr<const PlanSummary> summary_;
  mutable std::weak_ptr<const Plan> per_epoch_plan_;
  mutable std::shared_ptr<const nlohmann::json> per_epoch_;
};

}  // namespace clairfs
