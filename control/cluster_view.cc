#include "control/cluster_view.h"

#include <algorithm>
#include <map>
#include <string>

namespace clairfs {

using nlohmann::json;

void FillNodeReport(const NodeStats& stats, Prefetcher& prefetcher, const PlanSummary* summary,
                    cluster::NodeReport* report) {
  const PlacementLimits& limits = prefetcher.limits();
  const std::vector<uint64_t> used = prefetcher.TierUsedBytes();
  report->tiers.clear();
  for (size_t t = 0; t < limits.tier_names.size() && t < cluster::kMaxReportTiers; ++t) {
    cluster::TierReport tier;
    tier.kind = cluster::TierKindOf(limits.tier_names[t]);
    tier.used_bytes = t < used.size() ? used[t] : 0;
    tier.capacity = t < limits.tier_capacity.size() ? limits.tier_capacity[t] : 0;
    if (summary != nullptr && t < summary->tiers.size()) tier.objects = summary->tiers[t].objects;
    report->tiers.push_back(tier);
  }
  report->backing_bytes = stats.cache.backing_bytes.load(std::memory_order_relaxed);
  report->backing_reads = stats.cache.backing_reads.load(std::memory_order_relaxed);
}

namespace {

double Seconds(std::chrono::milliseconds d) { return std::chrono::duration<double>(d).count(); }

// Bytes held and capacity by tier kind: "ram_bytes", "ram_capacity", "ssd_bytes", ...
void AddByKind(const std::vector<cluster::TierReport>& tiers, json* out) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_kind = {{"ram", {0, 0}}, {"ssd", {0, 0}}};
  for (const cluster::TierReport& t : tiers) {
    auto& [bytes, capacity] = by_kind[cluster::TierKindName(t.kind)];
    bytes += t.used_bytes;
    capacity += t.capacity;
  }
  for (const auto& [kind, bc] : by_kind) {
    const uint64_t had_bytes = out->value(kind + "_bytes", uint64_t{0});
    const uint64_t had_capacity = out->value(kind + "_capacity", uint64_t{0});
    (*out)[kind + "_bytes"] = had_bytes + bc.first;
    (*out)[kind + "_capacity"] = had_capacity + bc.second;
  }
}

json NodeObject(const cluster::ClusterRow& row) {
  const bool alive =
      row.state == cluster::NodeState::kSelf || row.state == cluster::NodeState::kAlive;
  json j = {{"rank", row.rank},
            {"state", cluster::NodeStateName(row.state)},
            {"alive", alive},
            {"host", nullptr},
            {"age_seconds", nullptr}};
  if (!row.report) return j;
  const cluster::NodeReport& n = *row.report;
  json tiers = json::array();
  for (const cluster::TierReport& t : n.tiers) {
    tiers.push_back({{"kind", cluster::TierKindName(t.kind)},
                     {"bytes", t.used_bytes},
                     {"capacity", t.capacity},
                     {"objects", t.objects}});
  }
  j["host"] = n.host;
  j["age_seconds"] = row.age_seconds;
  j["reports"] = n.sequence;
  j["uptime_seconds"] = static_cast<double>(n.uptime_ms) / 1e3;
  j["plan"] = cluster::PlanStateName(n.plan);
  j["plan_generation"] = n.plan_generation;
  j["backing_bytes"] = n.backing_bytes;
  j["backing_reads"] = n.backing_reads;
  j["peer_bytes_in"] = n.peer_bytes_in;
  j["peer_bytes_out"] = n.peer_bytes_out;
  j["tiers"] = std::move(tiers);
  AddByKind(n.tiers, &j);
  return j;
}

}  // namespace

json ClusterObject(const std::vector<cluster::ClusterRow>& rows, const ClusterStats& stats,
                   const ReportTiming& timing) {
  json nodes = json::array();
  json totals = {{"nodes", rows.size()}, {"alive", 0},         {"reporting", 0},
                 {"backing_bytes", 0},   {"backing_reads", 0}, {"peer_bytes_in", 0},
                 {"peer_bytes_out", 0}};
  uint64_t dataset_bytes = 0;
  for (const cluster::ClusterRow& row : rows) {
    json node = NodeObject(row);
    if (node["alive"].get<bool>()) totals["alive"] = totals["alive"].get<uint64_t>() + 1;
    if (row.report) {
      const cluster::NodeReport& n = *row.report;
      totals["reporting"] = totals["reporting"].get<uint64_t>() + 1;
      for (const auto& [key, v] : {std::pair{"backing_bytes", n.backing_bytes},
                                   std::pair{"backing_reads", n.backing_reads},
                                   std::pair{"peer_bytes_in", n.peer_bytes_in},
                                   std::pair{"peer_bytes_out", n.peer_bytes_out}}) {
        totals[key] = totals[key].get<uint64_t>() + v;
      }
      AddByKind(n.tiers, &totals);
      dataset_bytes = std::max(dataset_bytes, n.dataset_bytes);
    }
    nodes.push_back(std::move(node));
  }
  totals["dataset_bytes"] = dataset_bytes ? json(dataset_bytes) : json();
  const auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  return {{"nodes", std::move(nodes)},
          {"totals", std::move(totals)},
          {"report_period_seconds", Seconds(timing.period)},
          {"stale_after_seconds", Seconds(timing.stale_after)},
          {"reports",
           {{"sent", get(stats.reports.sent)},
            {"received", get(stats.reports.received)},
            {"refused", get(stats.reports.refused)}}}};
}

}  // namespace clairfs
