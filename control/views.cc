#include "control/views.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "control/metrics.h"
#include "control/plan_epochs.h"
#include "control/stats_view.h"

namespace clairfs {

using nlohmann::json;

ControlViews::ControlViews(const Registrar& registrar, Prefetcher& prefetcher,
                           const NodeStats& stats)
    : registrar_(registrar), prefetcher_(prefetcher), stats_(stats) {}

std::shared_ptr<const PlanSummary> ControlViews::Summary(
    const std::shared_ptr<const Plan>& plan) const {
  if (!plan) return nullptr;
  std::lock_guard lock(summary_mu_);
  if (summary_plan_.lock() != plan) {
    summary_ = std::make_shared<const PlanSummary>(Summarize(*plan, prefetcher_.limits()));
    summary_plan_ = plan;
  }
  return summary_;
}

std::shared_ptr<const json> ControlViews::PerEpoch(const std::shared_ptr<const Plan>& plan) const {
  std::lock_guard lock(summary_mu_);
  if (per_epoch_plan_.lock() == plan && per_epoch_) return per_epoch_;
  const std::vector<std::string>& names = prefetcher_.limits().tier_names;
  const auto source = [](const EpochSource& s) {
    return json{{"reads", s.reads}, {"bytes", s.bytes}};
  };
  json out = json::array();
  for (const PlanEpoch& e : PlanEpochs(*plan, names.size())) {
    json tiers = json::array();
    for (size_t t = 0; t < e.tiers.size(); ++t) {
      json one = source(e.tiers[t]);
      one["name"] = names[t];
      one["distinct"] = source(e.tiers_distinct[t]);
      tiers.push_back(std::move(one));
    }
    out.push_back({{"reads", e.total.reads},
                   {"bytes", e.total.bytes},
                   {"tiers", std::move(tiers)},
                   {"backing", source(e.backing)},
                   {"fills", source(e.fills)},
                   {"from_peers", source(e.peers)}});
  }
  per_epoch_ = std::make_shared<const json>(std::move(out));
  per_epoch_plan_ = plan;
  return per_epoch_;
}

json ControlViews::StatsValue() const {
  const auto summary = Summary(prefetcher_.plan());
  json j = StatsObject(stats_, prefetcher_, summary.get());
  if (cluster_rows_) j["cluster"] = ClusterObject(cluster_rows_(), stats_.cluster, report_timing_);
  return j;
}

void ControlViews::FillReport(cluster::NodeReport* report) const {
  const auto summary = Summary(prefetcher_.plan());
  FillNodeReport(stats_, prefetcher_, summary.get(), report);
}

std::string ControlViews::StatsJson() const { return StatsValue().dump(2) + "\n"; }

std::string ControlViews::MetricsText() const { return RenderMetrics(StatsValue()); }

std::string ControlViews::PlanJson() const { return PlanValue().dump(2) + "\n"; }

std::string ControlViews::ViewText(ControlFile file, ControlView view) const {
  if (view == ControlView::kFull) {
    switch (file) {
      case ControlFile::kStats:
        return StatsJson();
      case ControlFile::kPlan:
        return PlanJson();
      case ControlFile::kErrors:
        return registrar_.ErrorsText();
      case ControlFile::kMetrics:
        return MetricsText();
    }
  }
  switch (file) {
    case ControlFile::kStats:
      return StatsCounts(StatsValue()).dump(2) + "\n";
    case ControlFile::kPlan:
      return PlanCounts(PlanValue()).dump(2) + "\n";
    case ControlFile::kErrors:
      return ErrorsCounts(registrar_.ErrorsText());
    case ControlFile::kMetrics:
      return MetricsCounts(StatsValue());
  }
  return "";
}

json ControlViews::PlanValue() const {
  auto plan = prefetcher_.plan();
  json j;
  if (!plan) {
    PlanSummary empty;
    j = {{"epochs", 0},
         {"streams", json::array()},
         {"entries", 0},
         {"range_entries", 0},
         {"positions", 0},
         {"files", 0},
         {"chunked_files", 0},
         {"objects", 0},
         {"chunks", 0},
         {"bytes", 0},
         {"chunk_size", prefetcher_.chunk_size()},
         {"record_chunk_size", prefetcher_.record_chunk_size()},
         {"tiers", json::array()},
         {"staging", {{"objects", 0}, {"bytes", 0}}},
         {"direct", {{"objects", 0}, {"bytes", 0}}},
         {"predicted_backing_bytes", 0},
         {"per_epoch", json::array()}};
    return j;
  }
  const PlanSummary& s = *Summary(plan);
  json tiers = json::array();
  for (const auto& t : s.tiers) {
    tiers.push_back({{"name", t.name},
                     {"objects", t.objects},
                     {"bytes", t.bytes},
                     {"capacity", t.capacity},
                     {"kept_objects", t.kept_objects},  // copies of faster tiers' objects
                     {"kept_bytes", t.kept_bytes}});
  }
  json streams = json::array();
  for (const PlanStream& st : plan->streams) {
    streams.push_back({{"name", st.name},
                       {"epochs", st.epochs()},
                       {"entries", st.entries},
                       {"range_entries", st.range_entries},
                       {"positions", st.sequence.size()}});
  }
  j = {{"epochs", s.epochs},
       {"streams", streams},
       {"entries", s.entries},
       {"range_entries", s.range_entries},
       {"positions", s.positions},
       {"files", s.files},
       {"chunked_files", s.chunked_files},
       {"objects", s.objects},
       {"chunks", s.chunks},
       {"bytes", s.bytes},
       {"chunk_size", s.chunk_size},
       {"record_chunk_size", s.record_chunk_size},
       {"tiers", tiers},
       {"staging",
        {{"objects", s.staging.objects},
         {"bytes", s.staging.bytes},
         {"capacity", s.staging.capacity}}},
       {"direct", {{"objects", s.direct.objects}, {"bytes", s.direct.bytes}}},
       {"from_peers", {{"objects", s.peer.objects}, {"bytes", s.peer.bytes}}},
       {"predicted_backing_bytes", s.predicted_backing_bytes},
       {"per_epoch", *PerEpoch(plan)}};
  if (cluster_info_) j["cluster"] = json::parse(cluster_info_());
  return j;
}

}  // namespace clairfs
