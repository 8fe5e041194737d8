#include "control/metrics.h"

#include <charconv>
#include <cmath>

namespace clairfs {

using nlohmann::json;

namespace {

// Backslash and newline escaped; with quotes, the double quote too (label values).
std::string Escape(std::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quotes && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) { return Escape(value, true); }

std::string EscapeHelp(std::string_view help) { return Escape(help, false); }

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, end);
}

void Exposition::Family(std::string_view name, Type type, std::string_view help) {
  name_ = name;
  out_ += "# HELP " + name_ + " " + EscapeHelp(help) + "\n";
  out_ += "# TYPE " + name_ + (type == Type::kCounter ? " counter\n" : " gauge\n");
}

void Exposition::Begin(const Labels& labels) {
  out_ += name_;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out_ += ',';
      out_ += labels[i].first;
      out_ += "=\"" + EscapeLabelValue(labels[i].second) + '"';
    }
    out_ += '}';
  }
  out_ += ' ';
}

void Exposition::Sample(const Labels& labels, uint64_t value) {
  Begin(labels);
  out_ += std::to_string(value) + "\n";
}

void Exposition::Sample(const Labels& labels, double value) {
  Begin(labels);
  out_ += FormatValue(value) + "\n";
}

void Exposition::Sample(const Labels& labels, const json& value) {
  if (value.is_number_unsigned()) return Sample(labels, value.get<uint64_t>());
  if (value.is_number()) return Sample(labels, value.get<double>());
  Sample(labels, std::nan(""));
}

namespace {

using Type = Exposition::Type;

// The number at pointer (e.g. "/prefetch/position"), or fallback if absent or not a number.
json At(const json& j, const char* pointer, json fallback = 0) {
  const json::json_pointer p(pointer);
  return j.contains(p) && j.at(p).is_number() ? j.at(p) : fallback;
}

const json& ArrayAt(const json& j, const char* key) {
  static const json kEmpty = json::array();
  return j.contains(key) && j[key].is_array() ? j[key] : kEmpty;
}

// A family with one unlabelled sample from the stats at pointer.
// A ratio absent (or null: nothing read yet) is NaN.
void One(Exposition& e, const json& stats, std::string_view name, Type type, const char* pointer,
         std::string_view help, json fallback = 0) {
  e.Family(name, type, help);
  e.Sample({}, At(stats, pointer, std::move(fallback)));
}

// A family with one sample per member of the object at pointer, labelled label=<member>.
void ByMember(Exposition& e, const json& stats, std::string_view name, Type type,
              const char* pointer, std::string_view label, std::string_view help) {
  e.Family(name, type, help);
  const json::json_pointer p(pointer);
  if (!stats.contains(p) || !stats.at(p).is_object()) return;
  for (const auto& [key, value] : stats.at(p).items()) e.Sample({{label, key}}, value);
}

// A family with one sample per tier, labelled tier=<name>, of each tier's field.
void ByTier(Exposition& e, const json& stats, std::string_view name, Type type, const char* field,
            std::string_view help) {
  e.Family(name, type, help);
  for (const json& t : ArrayAt(stats, "tiers")) {
    e.Sample({{"tier", t.value("name", "")}}, t.contains(field) ? t[field] : json(0));
  }
}

void Traffic(Exposition& e, const json& s) {
  One(e, s, "clairfs_file_reads_total", Type::kCounter, "/file_reads",
      "Reads of dataset files that reached the daemon: opens (open_mode per_open) or reads "
      "of a file's start the page cache did not hold (open_mode none).");
  One(e, s, "clairfs_read_bytes_total", Type::kCounter, "/bytes_read",
      "Bytes returned by read() of dataset files.");
  One(e, s, "clairfs_read_requests_total", Type::kCounter, "/read_requests",
      "FUSE READ requests on dataset files the daemon answered (a read() the page cache "
      "answers sends none).");
  ByMember(e, s, "clairfs_object_reads_total", Type::kCounter, "/served", "source",
           "Object reads (opens of files read whole, first reads of a chunk) by the source "
           "that served them: a tier's name, staging, peer, or backing (read on demand).");
  One(e, s, "clairfs_chunk_reads_total", Type::kCounter, "/chunk_reads",
      "Object reads of chunks of chunked files.");
  One(e, s, "clairfs_unplanned_file_reads_total", Type::kCounter, "/unplanned_file_reads",
      "File reads (as clairfs_file_reads_total) of files the plan does not name.");
  One(e, s, "clairfs_unplanned_chunk_reads_total", Type::kCounter, "/unplanned_chunk_reads",
      "Reads of chunks of a planned file that the plan does not name.");
  One(e, s, "clairfs_backing_reads_total", Type::kCounter, "/backing_reads",
      "Objects or direct opens read from the backing store, by prefetch and readers.");
  One(e, s, "clairfs_backing_read_bytes_total", Type::kCounter, "/backing_bytes",
      "Bytes read from the backing store.");
  One(e, s, "clairfs_served_unverified_total", Type::kCounter, "/served_unverified",
      "Opens served from a cached copy while the backing store did not answer.");
  One(e, s, "clairfs_stall_seconds_total", Type::kCounter, "/stall_seconds",
      "Time readers waited on a fetch, summed over readers.");
  One(e, s, "clairfs_hit_ratio", Type::kGauge, "/hit_rate",
      "Share of object reads since the mount not read on demand from the backing store "
      "(NaN before the first).",
      std::nan(""));
  ByMember(e, s, "clairfs_served_ratio", Type::kGauge, "/hit_rates", "source",
           "Share of object reads since the mount served by each source (NaN before the first).");
}

void Peers(Exposition& e, const json& s) {
  e.Family("clairfs_peer_bytes_total", Type::kCounter,
           "Bytes moved between this node and its peers, by direction (in: received).");
  e.Sample({{"direction", "in"}}, At(s, "/peer_bytes_in"));
  e.Sample({{"direction", "out"}}, At(s, "/peer_bytes_out"));
  One(e, s, "clairfs_peer_fetched_total", Type::kCounter, "/peer_fetched",
      "Objects the prefetch or a reader got from a peer.");
  One(e, s, "clairfs_peer_adopted_total", Type::kCounter, "/peer_adopted",
      "Objects other nodes read from the backing store and pushed to this node, their owner.");
}

void Errors(Exposition& e, const json& s) {
  e.Family("clairfs_errors_total", Type::kCounter,
           "Errors by kind (docs/control-interface.md, stats key errors; peer, peer_protocol "
           "and mpi: the cluster's).");
  const json::json_pointer errors("/errors");
  if (s.contains(errors) && s.at(errors).is_object()) {
    for (const auto& [kind, value] : s.at(errors).items()) e.Sample({{"kind", kind}}, value);
  }
  e.Sample({{"kind", "peer"}}, At(s, "/peer_errors"));
  e.Sample({{"kind", "peer_protocol"}}, At(s, "/peer_protocol_errors"));
  e.Sample({{"kind", "mpi"}}, At(s, "/mpi_errors"));
  e.Family("clairfs_peer_refused_total", Type::kCounter,
           "Peer messages dropped unread because their seal failed, by reason (unsealed, "
           "other_cluster, other_session, forged, replayed).");
  for (const char* why : {"unsealed", "other_cluster", "other_session", "forged", "replayed"}) {
    e.Sample({{"reason", why}}, At(s, ("/peer_refused/" + std::string(why)).c_str()));
  }
  e.Family("clairfs_access_denied_total", Type::kCounter,
           "Opens refused beyond the kernel's own check: dataset opens (open) and opens of the "
           "manifest for writing (control).");
  e.Sample({{"kind", "open"}}, At(s, "/access/open_denied"));
  e.Sample({{"kind", "control"}}, At(s, "/access/control_denied"));
}

void Tiers(Exposition& e, const json& s) {
  ByTier(e, s, "clairfs_tier_used_bytes", Type::kGauge, "bytes", "Bytes a tier holds.");
  ByTier(e, s, "clairfs_tier_capacity_bytes", Type::kGauge, "capacity", "Bytes a tier may hold.");
  e.Family("clairfs_tier_on", Type::kGauge, "1 while a tier is on, 0 after a device fault.");
  for (const json& t : ArrayAt(s, "tiers")) {
    e.Sample({{"tier", t.value("name", "")}}, uint64_t{t.value("state", "") == "on"});
  }
  ByTier(e, s, "clairfs_tier_fills_total", Type::kCounter, "fetched",
         "Objects the prefetch stored into a tier.");
  ByTier(e, s, "clairfs_tier_promotions_total", Type::kCounter, "promoted",
         "Of the fills, objects copied from another tier.");
  ByTier(e, s, "clairfs_tier_disabled_total", Type::kCounter, "disabled",
         "Times a tier was switched off after a device fault.");
  ByTier(e, s, "clairfs_tier_io_errors_total", Type::kCounter, "io_errors",
         "Failed device operations of a tier.");
}

void PlanFamilies(Exposition& e, const json& s) {
  One(e, s, "clairfs_plan_files", Type::kGauge, "/prefetch/planned_files",
      "Distinct files in the active plan.");
  One(e, s, "clairfs_plan_objects", Type::kGauge, "/prefetch/planned_objects",
      "Objects (files read whole, and chunks) in the active plan.");
  One(e, s, "clairfs_plan_epoch", Type::kGauge, "/prefetch/epoch",
      "The lowest of the streams' epochs, counted from 0.");
  One(e, s, "clairfs_plan_position", Type::kGauge, "/prefetch/position",
      "Object reads of the plan consumed or given up, summed over streams.");
  One(e, s, "clairfs_plan_positions", Type::kGauge, "/prefetch/positions",
      "Object reads in the plan, summed over streams.");
  One(e, s, "clairfs_plan_given_up", Type::kGauge, "/prefetch/given_up",
      "Object reads of the plan given up (passed by readers), summed over streams.");
  One(e, s, "clairfs_prefetch_fetches_total", Type::kCounter, "/prefetch/fetches",
      "Prefetches completed (tier fills and staging fetches; an object may count again).");
  One(e, s, "clairfs_staging_fetches_total", Type::kCounter, "/prefetch/staging_fetches",
      "Prefetches into the staging window.");
  One(e, s, "clairfs_staging_used_bytes", Type::kGauge, "/prefetch/staging_bytes",
      "Bytes held or reserved by the staging window.");
  One(e, s, "clairfs_staging_capacity_bytes", Type::kGauge, "/prefetch/staging_capacity",
      "Bytes the staging window may hold now (the tuner may grow it).");
  One(e, s, "clairfs_staging_max_capacity_bytes", Type::kGauge, "/prefetch/staging_max_capacity",
      "Bytes the staging window may grow to (the memory budget's window).");
  One(e, s, "clairfs_staging_ready_bytes", Type::kGauge, "/prefetch/staging_ready_bytes",
      "Bytes the staging window holds fetched, ahead of the readers.");
  One(e, s, "clairfs_staging_threads", Type::kGauge, "/prefetch/staging_threads",
      "Staging threads fetching now (the tuner's target, or the configured count).");
  e.Family(
      "clairfs_tuner_state", Type::kGauge,
      "1 for the staging tuner's state (static, threads, capacity, stable), 0 for the others.");
  for (const char* state : {"static", "threads", "capacity", "stable"}) {
    const json::json_pointer ptr("/prefetch/tuner_state");
    e.Sample({{"state", state}}, uint64_t{s.contains(ptr) && s.at(ptr) == state});
  }
  ByMember(e, s, "clairfs_readiness_ratio", Type::kGauge, "/readiness", "part",
           "What the plan stages ahead that is in place: tiers (held over planned tier bytes), "
           "window (staging window filled), ready (the smaller).");
  const json::json_pointer streams("/prefetch/streams");
  const json& list = s.contains(streams) ? s.at(streams) : json::array();
  const struct {
    const char* name;
    const char* field;
    const char* help;
  } kStream[] = {
      {"clairfs_stream_position", "position", "A stream's object reads consumed or given up."},
      {"clairfs_stream_positions", "positions", "A stream's object reads in the plan."},
      {"clairfs_stream_idle_seconds", "idle_seconds",
       "Time since a stream was read or registered."},
  };
  for (const auto& f : kStream) {
    e.Family(f.name, Type::kGauge, f.help);
    if (!list.is_array()) continue;
    for (const json& st : list) {
      e.Sample({{"stream", st.value("name", "")}}, st.contains(f.field) ? st[f.field] : json(0));
    }
  }
}

void Kept(Exposition& e, const json& s) {
  e.Family("clairfs_kept_copies_total", Type::kCounter,
           "Copies of faster tiers' objects for the persistent tier, by outcome.");
  for (const char* outcome : {"queued", "written", "skipped", "dropped", "failed"}) {
    e.Sample({{"outcome", outcome}}, At(s, (std::string("/kept/") + outcome).c_str()));
  }
  One(e, s, "clairfs_kept_written_bytes_total", Type::kCounter, "/kept/bytes",
      "Bytes of the copies written into the persistent tier.");
  One(e, s, "clairfs_kept_pending", Type::kGauge, "/kept/pending",
      "Copies queued and not yet written.");
}

void Watch(Exposition& e, const json& s) {
  One(e, s, "clairfs_watch_directories", Type::kGauge, "/watch/directories",
      "Dataset directories watched for changes on this node (open_mode none).");
  One(e, s, "clairfs_watch_events_total", Type::kCounter, "/watch/events",
      "Change events read from the dataset's directories.");
  One(e, s, "clairfs_watch_invalidations_total", Type::kCounter, "/watch/invalidations",
      "Names, attributes or pages the kernel was told to drop after a change.");
  One(e, s, "clairfs_watch_refused_total", Type::kCounter, "/watch/refused",
      "Directory watches that could not be added (their changes count after the timeouts).");
  One(e, s, "clairfs_watch_overflows_total", Type::kCounter, "/watch/overflows",
      "Change event queues lost (their changes count after the timeouts).");
  One(e, s, "clairfs_batch_connections_total", Type::kCounter, "/batch/connections",
      "Batch path connections served (docs/batch-path.md).");
  One(e, s, "clairfs_batch_refused_connections_total", Type::kCounter, "/batch/refused_connections",
      "Batch path connections refused at once (batch.max_clients, batch.max_clients_per_user).");
  One(e, s, "clairfs_batch_requests_total", Type::kCounter, "/batch/requests",
      "Batch requests answered.");
  One(e, s, "clairfs_batch_samples_total", Type::kCounter, "/batch/samples",
      "Samples served through the batch path.");
  One(e, s, "clairfs_batch_bytes_total", Type::kCounter, "/batch/bytes",
      "Bytes written into batch clients' buffers.");
  One(e, s, "clairfs_batch_denied_total", Type::kCounter, "/batch/denied",
      "Batch samples refused for access (EACCES).");
  One(e, s, "clairfs_batch_errors_total", Type::kCounter, "/batch/errors",
      "Batch samples that failed otherwise (ENOENT, ELOOP, ENOBUFS, EIO, ...).");
  One(e, s, "clairfs_batch_protocol_errors_total", Type::kCounter, "/batch/protocol_errors",
      "Batch frames refused or clients cut off (bad frames, limits, timeouts).");
  One(e, s, "clairfs_metadata_lookups_total", Type::kCounter, "/metadata/lookups",
      "LOOKUPs of dataset names answered.");
  One(e, s, "clairfs_metadata_lookups_ahead_total", Type::kCounter, "/metadata/lookups_ahead",
      "LOOKUPs answered with stats made ahead (no backing-store call).");
  One(e, s, "clairfs_metadata_reader_stats_total", Type::kCounter, "/metadata/reader_stats",
      "Backing-store stats made on a reader's path (lookup, getattr, binding a read).");
  One(e, s, "clairfs_stat_ahead_batches_total", Type::kCounter, "/stat_ahead/batches",
      "Backing-store calls statting the files the plan reads next (open_mode none).");
  One(e, s, "clairfs_stat_ahead_stats_total", Type::kCounter, "/stat_ahead/stats",
      "File versions recorded by those calls.");
  One(e, s, "clairfs_stat_ahead_used_total", Type::kCounter, "/stat_ahead/used",
      "Reads that took their file's version from a stat made ahead (no call of their own).");
  One(e, s, "clairfs_stat_ahead_missed_total", Type::kCounter, "/stat_ahead/missed",
      "Reads that found no usable stat made ahead and made their own.");
  One(e, s, "clairfs_stat_ahead_signposts_total", Type::kCounter, "/stat_ahead/signposts",
      "Planned files whose cached attributes were dropped so that a reader reaching them asks.");
  One(e, s, "clairfs_stat_ahead_reached_total", Type::kCounter, "/stat_ahead/reached",
      "Signposts a reader reached: where the readers are, page cache or not.");
  One(e, s, "clairfs_fresh_checked_total", Type::kCounter, "/fresh/checked",
      "Files the plan reads next compared with what the kernel caches, after a stat ahead.");
  One(e, s, "clairfs_fresh_swept_total", Type::kCounter, "/fresh/swept",
      "Nodes the kernel holds statted by the revalidation sweep.");
  One(e, s, "clairfs_fresh_rounds_total", Type::kCounter, "/fresh/rounds",
      "Revalidation sweeps over every node the kernel holds, completed.");
  One(e, s, "clairfs_fresh_invalidated_total", Type::kCounter, "/fresh/invalidated",
      "Nodes whose cached attributes or pages the kernel was told to drop after a change.");
  One(e, s, "clairfs_fresh_entries_total", Type::kCounter, "/fresh/entries",
      "Names the kernel was told to drop because their object went or was replaced.");
  One(e, s, "clairfs_fresh_failed_total", Type::kCounter, "/fresh/failed",
      "Revalidation stats the backing store did not answer (those nodes left as they were).");
}

void Warnings(Exposition& e, const json& s) {
  e.Family("clairfs_warning", Type::kGauge,
           "1 while the job does what this kind of warning says (stats key warnings), else 0.");
  for (const char* kind : {"no_plan", "not_in_plan", "out_of_order"}) {
    bool on = false;
    for (const json& w : ArrayAt(s, "warnings")) on |= w.value("kind", "") == kind;
    e.Sample({{"kind", kind}}, uint64_t{on});
  }
}

// The "cluster" section (control/cluster_view.h), aggregated: a count of nodes per state and
// the cluster's totals, so that each node exports a few samples whatever the cluster's size
// (per-node samples from every node would be N x N series); no sample outside a cluster.
void Cluster(Exposition& e, const json& s) {
  const bool in_cluster = s.contains("cluster") && s["cluster"].is_object();
  const json::json_pointer p("/cluster/nodes");
  const json& nodes = in_cluster && s.contains(p) && s.at(p).is_array() ? s.at(p) : json::array();
  e.Family("clairfs_cluster_nodes", Type::kGauge,
           "Nodes of the cluster by state as this node sees them: self, alive (recent report), "
           "stale, silent (never reported), down, gone, refused.");
  if (in_cluster) {
    for (const char* state : {"self", "alive", "stale", "silent", "down", "gone", "refused"}) {
      uint64_t n = 0;
      for (const json& node : nodes) n += node.value("state", "") == state;
      e.Sample({{"state", state}}, n);
    }
  }
  e.Family("clairfs_cluster_backing_read_bytes_total", Type::kCounter,
           "Bytes the whole cluster read from the backing store, as its nodes last reported.");
  if (in_cluster) e.Sample({}, At(s, "/cluster/totals/backing_bytes"));
  e.Family("clairfs_cluster_reports_total", Type::kCounter,
           "Node reports by outcome: sent (one per receiving node), received, refused "
           "(malformed, or naming another node than their sender).");
  for (const char* outcome : {"sent", "received", "refused"}) {
    const std::string ptr = std::string("/cluster/reports/") + outcome;
    if (in_cluster) e.Sample({{"outcome", outcome}}, At(s, ptr.c_str()));
  }
}

}  // namespace

std::string RenderMetrics(const json& stats) {
  Exposition e;
  Traffic(e, stats);
  Peers(e, stats);
  Errors(e, stats);
  Tiers(e, stats);
  PlanFamilies(e, stats);
  Kept(e, stats);
  Watch(e, stats);
  Warnings(e, stats);
  Cluster(e, stats);
  return e.text();
}

}  // namespace clairfs
