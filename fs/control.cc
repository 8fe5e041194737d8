#include "fs/control.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "cache/resolver.h"

namespace clairfs {

using nlohmann::json;

ControlPlane::ControlPlane(const Backing& backing, Prefetcher& prefetcher, Stats& stats,
                           std::vector<std::string> root_aliases)
    : backing_(backing),
      prefetcher_(prefetcher),
      stats_(stats),
      aliases_(std::move(root_aliases)) {}

std::unique_ptr<ControlPlane::Writer> ControlPlane::OpenWriter(bool append, bool truncate) {
  return std::make_unique<Writer>(append, truncate);
}

void ControlPlane::Write(Writer& w, std::string_view bytes) {
  std::lock_guard lock(w.mu_);
  w.parser_.Feed(bytes);
  w.dirty_ = true;
}

Status ControlPlane::Commit(Writer& w, bool last) {
  std::lock_guard wlock(w.mu_);
  if (!w.dirty_ && !(last && w.truncate_ && !w.committed_)) return w.last_;
  const bool append = w.append_;
  ParsedManifest parsed = std::move(w.parser_).Finish();
  w.parser_ = ManifestParser();
  w.dirty_ = false;
  w.truncate_ = false;
  w.committed_ = true;
  w.append_ = true;  // more writes on this descriptor add epochs to what was committed
  const auto start = std::chrono::steady_clock::now();
  std::lock_guard lock(commit_mu_);
  std::shared_ptr<const Plan> base = append ? prefetcher_.plan() : nullptr;
  PathResolver resolver(backing_, aliases_);
  auto plan = BuildPlan(parsed, resolver, base.get());
  if (!plan.ok()) {
    stats_.errors.manifest_rejected.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("{}", plan.status().message());
    std::lock_guard elock(errors_mu_);
    errors_ = plan.status().message();
    w.last_ = Status::Error(Code::kInvalidArgument, plan.status().message());
    return w.last_;
  }
  const uint64_t entries = plan.value()->sequence.size();
  const uint64_t files = plan.value()->files.size();
  prefetcher_.Install(std::move(plan.value()), append);
  parsed = ParsedManifest();
  malloc_trim(0);  // the parser's and the old plan's memory goes back to the system
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("manifest {}: {} entries, {} files in the plan ({:.3f} s)",
               append ? "appended" : "installed", entries, files, secs);
  {
    std::lock_guard elock(errors_mu_);
    errors_.clear();
  }
  w.last_ = Status::Ok();
  return w.last_;
}

std::string ControlPlane::StatsJson() const {
  const auto get = [](const Stats::Counter& c) { return c.load(std::memory_order_relaxed); };
  json served = json::object();
  json tiers = json::array();
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_kind = {{"ram", {0, 0}}};
  uint64_t checksum_errors = 0;
  const PlacementLimits& limits = prefetcher_.limits();
  const std::vector<uint64_t> used = prefetcher_.TierUsedBytes();
  const std::vector<uint64_t> corrupt = prefetcher_.TierCorruptions();
  for (size_t t = 0; t < limits.tier_names.size() && t < kMaxTiers; ++t) {
    const std::string& name = limits.tier_names[t];
    served[name] = served.value(name, uint64_t{0}) + get(stats_.served_tier[t]);
    by_kind[name].first += used[t];
    by_kind[name].second += limits.tier_capacity[t];
    checksum_errors += corrupt[t];
    tiers.push_back({{"name", name},
                     {"bytes", used[t]},
                     {"capacity", limits.tier_capacity[t]},
                     {"served", get(stats_.served_tier[t])},
                     {"fetched", get(stats_.tier_fetched[t])},
                     {"promoted", get(stats_.tier_promoted[t])}});
  }
  served["staging"] = get(stats_.served_staging);
  served["backing"] = get(stats_.served_backing);
  served["peer"] = get(stats_.served_peer);
  const PrefetchProgress p = prefetcher_.progress();
  json j = {
      {"files_opened", get(stats_.files_opened)},
      {"bytes_read", get(stats_.bytes_read)},
      {"served", served},
      {"backing_reads", get(stats_.backing_reads)},
      {"backing_bytes", get(stats_.backing_bytes)},
      {"unplanned_opens", get(stats_.unplanned_opens)},
      {"peer_fetched", get(stats_.peer_fetched)},
      {"peer_bytes_in", get(stats_.peer_bytes_in)},
      {"peer_bytes_out", get(stats_.peer_bytes_out)},
      {"peer_errors", get(stats_.peer_errors)},
      {"peer_adopted", get(stats_.peer_adopted)},
      {"prefetch",
       {{"planned_files", p.planned_files},
        {"fetched_files", get(stats_.fetched_files)},
        {"epoch", p.epoch},
        {"position", p.position},
        {"entries", p.entries},
        {"staging_bytes", p.staging_bytes},
        {"staging_capacity", limits.staging_capacity}}},
      {"tiers", tiers},
      {"stall_ns", get(stats_.stall_ns)},
      {"errors",
       {{"fetch", get(stats_.errors.fetch)},
        {"checksum", checksum_errors},
        {"timeout", get(stats_.errors.timeout)},
        {"stale", get(stats_.errors.stale)},
        {"tier_full", get(stats_.errors.tier_full)},
        {"manifest_rejected", get(stats_.errors.manifest_rejected)},
        {"backing_timeout", get(stats_.errors.backing_timeout)}}},
  };
  for (const auto& [kind, bytes_capacity] : by_kind) {
    j[kind + "_bytes"] = bytes_capacity.first;
    j[kind + "_capacity"] = bytes_capacity.second;
  }
  return j.dump(2) + "\n";
}

std::string ControlPlane::PlanJson() const {
  auto plan = prefetcher_.plan();
  json j;
  if (!plan) {
    PlanSummary empty;
    j = {{"epochs", 0},
         {"entries", 0},
         {"files", 0},
         {"bytes", 0},
         {"tiers", json::array()},
         {"staging", {{"files", 0}, {"bytes", 0}}},
         {"direct", {{"files", 0}, {"bytes", 0}}},
         {"predicted_backing_bytes", 0}};
    return j.dump(2) + "\n";
  }
  const PlanSummary s = Summarize(*plan, prefetcher_.limits());
  json tiers = json::array();
  for (const auto& t : s.tiers) {
    tiers.push_back(
        {{"name", t.name}, {"files", t.files}, {"bytes", t.bytes}, {"capacity", t.capacity}});
  }
  j = {{"epochs", s.epochs},
       {"entries", s.entries},
       {"files", s.files},
       {"bytes", s.bytes},
       {"tiers", tiers},
       {"staging",
        {{"files", s.staging.files}, {"bytes", s.staging.bytes}, {"capacity", s.staging.capacity}}},
       {"direct", {{"files", s.direct.files}, {"bytes", s.direct.bytes}}},
       {"from_peers", {{"files", s.peer.files}, {"bytes", s.peer.bytes}}},
       {"predicted_backing_bytes", s.predicted_backing_bytes}};
  if (cluster_info_) j["cluster"] = json::parse(cluster_info_());
  return j.dump(2) + "\n";
}

std::string ControlPlane::ErrorsText() const {
  std::lock_guard lock(errors_mu_);
  return errors_;
}

}  // namespace clairfs
