#include "control/stats_view.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>

namespace clairfs {

using nlohmann::json;

namespace {

json StreamsJson(const PrefetchProgress& p) {
  json streams = json::array();
  for (const StreamProgress& s : p.streams) {
    streams.push_back({{"name", s.name},
                       {"epoch", s.epoch},
                       {"epochs", s.epochs},
                       {"position", s.position},
                       {"positions", s.positions},
                       {"entries", s.entries},
                       {"given_up", s.given_up},
                       {"staging_cursor", s.staging_cursor},
                       {"idle_seconds", s.idle_seconds}});
  }
  return streams;
}

double Ratio(uint64_t part, uint64_t whole) {
  return whole == 0 ? 1.0 : std::min(1.0, static_cast<double>(part) / static_cast<double>(whole));
}

}  // namespace

Readiness ComputeReadiness(const PlanSummary* summary, const std::vector<uint64_t>& tier_used,
                           uint64_t staging_bytes, uint64_t staging_capacity) {
  Readiness r;
  if (summary == nullptr) return r;
  uint64_t planned = 0, held = 0;
  for (const PlanSummary::Part& t : summary->tiers) planned += t.bytes;
  for (uint64_t used : tier_used) held += used;
  r.tiers = Ratio(held, planned);
  r.window = Ratio(staging_bytes, std::min(summary->staging.bytes, staging_capacity));
  r.ready = std::min(r.tiers, r.window);
  return r;
}

json StatsObject(const NodeStats& node, Prefetcher& prefetcher, const PlanSummary* summary) {
  const auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  const Stats& stats = node.cache;
  json served = json::object();
  json tiers = json::array();
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_kind = {{"ram", {0, 0}}};
  uint64_t checksum_errors = 0;
  const PlacementLimits& limits = prefetcher.limits();
  const std::vector<uint64_t> used = prefetcher.TierUsedBytes();
  const std::vector<uint64_t> corrupt = prefetcher.TierCorruptions();
  const std::vector<TierHealth> health = prefetcher.TierHealths();
  for (size_t t = 0; t < limits.tier_names.size() && t < kMaxTiers; ++t) {
    const std::string& name = limits.tier_names[t];
    served[name] = served.value(name, uint64_t{0}) + get(stats.served_tier[t]);
    by_kind[name].first += used[t];
    by_kind[name].second += limits.tier_capacity[t];
    checksum_errors += corrupt[t];
    tiers.push_back({{"name", name},
                     {"bytes", used[t]},
                     {"capacity", limits.tier_capacity[t]},
                     {"served", get(stats.served_tier[t])},
                     {"fetched", get(stats.tier_fetched[t])},
                     {"promoted", get(stats.tier_promoted[t])},
                     {"state", TierStateName(health[t].state)},  // "off" after a device fault
                     {"disabled", health[t].disabled},           // times switched off
                     {"io_errors", health[t].io_errors}});       // failed device operations
  }
  served["staging"] = get(stats.served_staging);
  served["backing"] = get(stats.served_backing);
  served["peer"] = get(stats.served_peer);
  // Shares of the object reads by source; null (each) until the first object read.
  uint64_t reads = 0;
  for (const auto& [source, n] : served.items()) reads += n.get<uint64_t>();
  json hit_rates = json::object();
  for (const auto& [source, n] : served.items()) {
    hit_rates[source] = reads ? json(static_cast<double>(n.get<uint64_t>()) / reads) : json();
  }
  const json hit_rate =
      reads ? json(1.0 - static_cast<double>(served["backing"].get<uint64_t>()) / reads) : json();
  const PrefetchProgress p = prefetcher.progress();
  const Readiness ready = ComputeReadiness(summary, used, p.staging_bytes, p.staging_capacity);
  const uint64_t stall_ns = get(stats.stall_ns);
  json j = {
      {"file_reads", get(stats.file_reads)},
      {"bytes_read", get(node.fs.bytes_read)},
      {"read_requests", get(node.fs.read_requests)},
      {"served", served},
      {"object_reads", reads},
      {"hit_rates", hit_rates},
      {"hit_rate", hit_rate},
      {"readiness", {{"tiers", ready.tiers}, {"window", ready.window}, {"ready", ready.ready}}},
      {"backing_reads", get(stats.backing_reads)},
      {"backing_bytes", get(stats.backing_bytes)},
      {"unplanned_file_reads", get(stats.unplanned_file_reads)},
      {"chunk_reads", get(stats.chunk_reads)},
      {"unplanned_chunk_reads", get(stats.unplanned_chunk_reads)},
      {"peer_fetched", get(stats.peer_fetched)},
      {"peer_bytes_in", get(node.cluster.peer_bytes_in)},
      {"peer_bytes_out", get(node.cluster.peer_bytes_out)},
      {"peer_errors", get(node.cluster.peer_errors)},
      {"peer_adopted", get(stats.peer_adopted)},
      {"served_unverified", get(node.fs.served_unverified)},
      {"peer_protocol_errors", get(node.cluster.peer_protocol_errors)},
      {"mpi_errors", get(node.cluster.mpi_errors)},
      {"peer_refused",
       {{"unsealed", get(node.cluster.peer_refused.unsealed)},
        {"other_cluster", get(node.cluster.peer_refused.other_cluster)},
        {"other_session", get(node.cluster.peer_refused.other_session)},
        {"forged", get(node.cluster.peer_refused.forged)},
        {"replayed", get(node.cluster.peer_refused.replayed)}}},
      {"kept",
       {{"queued", get(stats.kept.queued)},
        {"written", get(stats.kept.written)},
        {"bytes", get(stats.kept.bytes)},
        {"skipped", get(stats.kept.skipped)},
        {"dropped", get(stats.kept.dropped)},
        {"failed", get(stats.kept.failed)},
        {"pending", prefetcher.KeepPending()}}},
      {"access",
       {{"open_denied", get(node.fs.open_denied)},
        {"control_denied", get(node.fs.control_denied)}}},
      {"watch",
       {{"directories", get(node.watch.directories)},
        {"events", get(node.watch.events)},
        {"invalidations", get(node.watch.invalidations)},
        {"refused", get(node.watch.refused)},
        {"overflows", get(node.watch.overflows)}}},
      {"batch",
       {{"connections", get(node.batch.connections)},
        {"refused_connections", get(node.batch.refused_connections)},
        {"requests", get(node.batch.requests)},
        {"samples", get(node.batch.samples)},
        {"bytes", get(node.batch.bytes)},
        {"denied", get(node.batch.denied)},
        {"errors", get(node.batch.errors)},
        {"protocol_errors", get(node.batch.protocol_errors)}}},
      {"stat_ahead",
       {{"batches", get(stats.stat_ahead.batches)},
        {"stats", get(stats.stat_ahead.stats)},
        {"used", get(stats.stat_ahead.used)},
        {"missed", get(stats.stat_ahead.missed)},
        {"signposts", get(stats.stat_ahead.signposts)},
        {"reached", get(stats.stat_ahead.reached)}}},
      {"fresh",
       {{"checked", get(node.fresh.checked)},
        {"swept", get(node.fresh.swept)},
        {"rounds", get(node.fresh.rounds)},
        {"invalidated", get(node.fresh.invalidated)},
        {"entries", get(node.fresh.entries)},
        {"failed", get(node.fresh.failed)}}},
      {"prefetch",
       {{"planned_files", p.planned_files},
        {"planned_objects", p.planned_objects},
        // Fetches, not distinct objects: an object is staged again in each epoch that reads
        // it, and refilled after an eviction or a plan change (so this can pass
        // planned_objects). Tier fills per tier: tiers[].fetched.
        {"fetches", get(stats.fetched_objects)},
        {"staging_fetches", get(stats.staging_fetched)},
        {"epoch", p.epoch},
        {"position", p.position},
        {"positions", p.positions},
        {"given_up", p.given_up},
        {"entries", p.entries},
        {"streams", StreamsJson(p)},
        {"staging_bytes", p.staging_bytes},
        {"staging_ready_bytes", p.staging_ready_bytes},
        // The window's capacity now and the most it may have (the tuner grows it within the
        // memory budget; static: both the configured one), the staging threads running now, and
        // the tuner's state (cache/prefetch/autotune.h).
        {"staging_capacity", p.staging_capacity},
        {"staging_max_capacity", limits.staging_capacity},
        {"staging_threads", p.staging_threads},
        {"tuner_state", TunerStateName(p.tuner_state)}}},
      {"tiers", tiers},
      {"stall_ns", stall_ns},
      {"stall_seconds", static_cast<double>(stall_ns) / 1e9},
      {"errors",
       {{"fetch", get(stats.errors.fetch)},
        {"checksum", checksum_errors},
        {"timeout", get(stats.errors.timeout)},
        {"stale", get(stats.errors.stale)},
        {"stale_node", get(node.fs.errors.stale_node)},
        {"tier_full", get(stats.errors.tier_full)},
        {"manifest_rejected", get(stats.errors.manifest_rejected)},
        {"access_check", get(node.fs.errors.access_check)},
        {"backing_timeout", get(stats.errors.backing_timeout)}}},
  };
  // What the job does wrong, as ReadWatch (cache/prefetch/read_watch.h) sees it; [] when nothing.
  json warnings = json::array();
  const auto now = std::chrono::steady_clock::now();
  for (const ReadWarning& w : p.warnings) {
    warnings.push_back({{"kind", WatchKindName(w.kind)},
                        {"message", w.message},
                        {"seconds", std::chrono::duration<double>(now - w.since).count()}});
  }
  j["warnings"] = std::move(warnings);
  for (const auto& [kind, bytes_capacity] : by_kind) {
    j[kind + "_bytes"] = bytes_capacity.first;
    j[kind + "_capacity"] = bytes_capacity.second;
  }
  return j;
}

}  // namespace clairfs
