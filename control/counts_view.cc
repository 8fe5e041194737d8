#include "control/counts_view.h"

#include <algorithm>
#include <iterator>
#include <sstream>

#include "control/metrics.h"

namespace clairfs {

using nlohmann::json;

namespace {

// The whitelists. What is not named here is hidden from the counts view. Before adding a
// field, ask: can its value, or its change over time, tell a size (exact, or as a byte total)
// or a name of a file? Counts of files, entries, objects and reads may be shown (they tell a
// chunked file's size only to within cache.chunk_size, docs/permissions.md); bytes may not,
// except capacities (configuration).
constexpr const char* kStatsCountsText = R"({
  "file_reads": "number",
  "object_reads": "number",
  "served": "numbers",
  "hit_rates": "numbers",
  "hit_rate": "number",
  "readiness": {"tiers": "number", "window": "number", "ready": "number"},
  "backing_reads": "number",
  "unplanned_file_reads": "number",
  "chunk_reads": "number",
  "unplanned_chunk_reads": "number",
  "peer_fetched": "number",
  "peer_errors": "number",
  "peer_adopted": "number",
  "served_unverified": "number",
  "peer_protocol_errors": "number",
  "mpi_errors": "number",
  "peer_refused": {"unsealed": "number", "other_cluster": "number", "other_session": "number",
                   "forged": "number", "replayed": "number"},
  "kept": {"queued": "number", "written": "number", "skipped": "number",
           "dropped": "number", "failed": "number", "pending": "number"},
  "access": {"open_denied": "number", "control_denied": "number"},
  "metadata": {"lookups": "number", "lookups_ahead": "number", "reader_stats": "number"},
  "watch": {"directories": "number", "events": "number", "invalidations": "number",
            "refused": "number", "overflows": "number"},
  "stat_ahead": {"batches": "number", "stats": "number", "used": "number", "missed": "number",
                 "signposts": "number", "reached": "number"},
  "fresh": {"checked": "number", "swept": "number", "rounds": "number",
            "invalidated": "number", "entries": "number", "failed": "number"},
  "prefetch": {"planned_files": "number", "planned_objects": "number", "fetches": "number",
               "staging_fetches": "number", "epoch": "number", "position": "number",
               "positions": "number", "given_up": "number", "entries": "number",
               "streams": [{}], "staging_capacity": "number",
               "staging_max_capacity": "number", "staging_threads": "number",
               "tuner_state": "name"},
  "tiers": [{"name": "name", "capacity": "number", "served": "number", "fetched": "number",
             "promoted": "number", "state": "name", "disabled": "number",
             "io_errors": "number"}],
  "stall_ns": "number",
  "stall_seconds": "number",
  "errors": "numbers",
  "warnings": [{"kind": "name", "seconds": "number"}],
  "ram_capacity": "number",
  "ssd_capacity": "number"
})";

constexpr const char* kPlanCountsText = R"({
  "epochs": "number",
  "streams": [{}],
  "entries": "number",
  "range_entries": "number",
  "positions": "number",
  "files": "number",
  "chunked_files": "number",
  "objects": "number",
  "chunks": "number",
  "chunk_size": "number",
  "record_chunk_size": "number",
  "tiers": [{"name": "name", "objects": "number", "capacity": "number",
             "kept_objects": "number"}],
  "staging": {"objects": "number", "capacity": "number"},
  "direct": {"objects": "number"},
  "from_peers": {"objects": "number"},
  "cluster": {"rank": "number", "ranks": "number", "registered": ["number"],
              "generations": ["number"], "parts_sent": "number", "unanswered": ["number"],
              "unreachable": ["number"], "unregistered": ["number"],
              "waiting_seconds": "number", "plan_timeout": "number", "state": "name",
              "placed_with": ["number"], "owned": {"objects": "number"},
              "from_peers": {"objects": "number", "by_rank": "numbers"},
              "unowned": {"objects": "number"}, "cluster_objects": "number"}
})";

// The metrics families of the counts view (control/metrics.cc names them). Hidden: every family
// of bytes read, held or moved (clairfs_read_bytes_total, clairfs_backing_read_bytes_total,
// clairfs_peer_bytes_total, clairfs_tier_used_bytes, clairfs_staging_used_bytes,
// clairfs_staging_ready_bytes, clairfs_kept_written_bytes_total) and the per-stream ones
// (clairfs_stream_*: stream names).
constexpr std::string_view kCountsFamilies[] = {
    "clairfs_file_reads_total",
    "clairfs_object_reads_total",
    "clairfs_chunk_reads_total",
    "clairfs_unplanned_file_reads_total",
    "clairfs_unplanned_chunk_reads_total",
    "clairfs_backing_reads_total",
    "clairfs_served_unverified_total",
    "clairfs_stall_seconds_total",
    "clairfs_hit_ratio",
    "clairfs_served_ratio",
    "clairfs_peer_fetched_total",
    "clairfs_peer_adopted_total",
    "clairfs_errors_total",
    "clairfs_access_denied_total",
    "clairfs_tier_capacity_bytes",
    "clairfs_tier_on",
    "clairfs_tier_fills_total",
    "clairfs_tier_promotions_total",
    "clairfs_tier_disabled_total",
    "clairfs_tier_io_errors_total",
    "clairfs_plan_files",
    "clairfs_plan_objects",
    "clairfs_plan_epoch",
    "clairfs_plan_position",
    "clairfs_plan_positions",
    "clairfs_plan_given_up",
    "clairfs_prefetch_fetches_total",
    "clairfs_staging_fetches_total",
    "clairfs_staging_capacity_bytes",
    "clairfs_staging_max_capacity_bytes",
    "clairfs_staging_threads",
    "clairfs_tuner_state",
    "clairfs_readiness_ratio",
    "clairfs_kept_copies_total",
    "clairfs_kept_pending",
    "clairfs_metadata_lookups_total",
    "clairfs_metadata_lookups_ahead_total",
    "clairfs_metadata_reader_stats_total",
    "clairfs_watch_directories",
    "clairfs_watch_events_total",
    "clairfs_watch_invalidations_total",
    "clairfs_watch_refused_total",
    "clairfs_watch_overflows_total",
    "clairfs_stat_ahead_batches_total",
    "clairfs_stat_ahead_stats_total",
    "clairfs_stat_ahead_used_total",
    "clairfs_stat_ahead_missed_total",
    "clairfs_stat_ahead_signposts_total",
    "clairfs_stat_ahead_reached_total",
    "clairfs_fresh_checked_total",
    "clairfs_fresh_swept_total",
    "clairfs_fresh_rounds_total",
    "clairfs_fresh_invalidated_total",
    "clairfs_fresh_entries_total",
    "clairfs_fresh_failed_total",
    "clairfs_warning",
};

// The fixed sentence a warning of the counts view carries, by kind (cache/prefetch/read_watch.h).
std::string_view WarningSentence(std::string_view kind) {
  if (kind == "no_plan") return "files are read and no plan is registered";
  if (kind == "not_in_plan") return "most reads name files the plan does not hold";
  if (kind == "out_of_order") return "most planned reads come far from the plan's order";
  return "a warning";
}

bool IsNumberOrNull(const json& v) { return v.is_number() || v.is_null(); }

}  // namespace

std::string_view ControlViewName(ControlView view) {
  return view == ControlView::kFull ? "full" : "counts";
}

ControlView ViewFor(uid_t uid, bool controller) {
  return uid == 0 || controller ? ControlView::kFull : ControlView::kCounts;
}

json Whitelist(const json& value, const json& schema) {
  const json discarded(json::value_t::discarded);
  if (schema.is_string()) {
    const std::string& word = schema.get_ref<const std::string&>();
    if (word == "number") return IsNumberOrNull(value) ? value : discarded;
    if (word == "name") return value.is_string() ? value : discarded;
    if (word == "numbers") {
      if (!value.is_object()) return discarded;
      json out = json::object();
      for (const auto& [key, v] : value.items()) {
        if (IsNumberOrNull(v)) out[key] = v;
      }
      return out;
    }
    return discarded;
  }
  if (schema.is_object()) {
    if (!value.is_object()) return discarded;
    json out = json::object();
    for (const auto& [key, sub] : schema.items()) {
      const auto it = value.find(key);
      if (it == value.end()) continue;
      json shown = Whitelist(*it, sub);
      if (!shown.is_discarded()) out[key] = std::move(shown);
    }
    return out;
  }
  if (schema.is_array() && schema.size() == 1) {
    if (!value.is_array()) return discarded;
    json out = json::array();
    for (const json& element : value) {
      json shown = Whitelist(element, schema[0]);
      if (!shown.is_discarded()) out.push_back(std::move(shown));
    }
    return out;
  }
  return discarded;
}

bool ValidSchema(const json& schema) {
  if (schema.is_string()) {
    const std::string& word = schema.get_ref<const std::string&>();
    return word == "number" || word == "name" || word == "numbers";
  }
  if (schema.is_object()) {
    return std::all_of(schema.begin(), schema.end(), [](const json& s) { return ValidSchema(s); });
  }
  return schema.is_array() && schema.size() == 1 && ValidSchema(schema[0]);
}

const json& StatsCountsSchema() {
  static const json schema = json::parse(kStatsCountsText);
  return schema;
}

const json& PlanCountsSchema() {
  static const json schema = json::parse(kPlanCountsText);
  return schema;
}

namespace {

json Marked(json shown) {
  if (!shown.is_object()) shown = json::object();
  shown["view"] = ControlViewName(ControlView::kCounts);
  shown["hidden"] = kHiddenNote;
  return shown;
}

}  // namespace

json StatsCounts(const json& full_stats) {
  json shown = Whitelist(full_stats, StatsCountsSchema());
  if (shown.is_object() && shown.contains("warnings")) {
    for (json& w : shown["warnings"]) {
      w["message"] = WarningSentence(w.value("kind", ""));
    }
  }
  return Marked(std::move(shown));
}

json PlanCounts(const json& full_plan) { return Marked(Whitelist(full_plan, PlanCountsSchema())); }

std::string ErrorsCounts(const std::string& full_report) {
  if (full_report.empty()) return "";
  return "the last manifest was rejected (the report is shown only to the mount's owner and "
         "members of control.group)\n";
}

std::span<const std::string_view> CountsFamilies() { return kCountsFamilies; }

bool CountsFamily(std::string_view name) {
  return std::find(std::begin(kCountsFamilies), std::end(kCountsFamilies), name) !=
         std::end(kCountsFamilies);
}

std::string MetricsCounts(const json& full_stats) {
  const std::string text = RenderMetrics(StatsCounts(full_stats));
  // Every line of the text is "# HELP <family> ...", "# TYPE <family> ..." or a sample
  // "<family>[{labels}] <value>" (control/metrics.h): a line is kept if its family is allowed.
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::string_view rest(line);
    if (rest.starts_with("# HELP ") || rest.starts_with("# TYPE ")) {
      rest.remove_prefix(7);
    } else if (rest.starts_with("#")) {
      continue;  // no other comments are written; none is let through
    }
    const std::string_view family = rest.substr(0, rest.find_first_of(" {"));
    if (CountsFamily(family)) {
      out += line;
      out += '\n';
    }
  }
  return out;
}

}  // namespace clairfs
