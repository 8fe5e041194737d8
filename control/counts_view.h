// The two views of the generated control files (stats, plan, errors, metrics), chosen per
// caller when the file is opened (docs/permissions.md, "What the control files show"):
//   kFull    the mount's owner (the daemon's user), root, and members of control.group: every
//            field, paths, stream names and byte sizes included;
//   kCounts  everyone else: counts, ratios, capacities and states only; no path, no stream
//            name, no per-stream detail, no byte quantity derived from the dataset's files.
// The counts view is built from the full one by a whitelist (kStatsCountsText, kPlanCountsText
// and kCountsFamilies in control_views.cc): a field, metrics family or JSON key is shown only if
// the whitelist names it, with a value of the type it names, so a field added to the full view
// stays hidden from other users until it is added here on purpose.
// Pure functions of their arguments (no FUSE, no locks): thread-safe.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

namespace clairfs {

enum class ControlView { kFull, kCounts };

// The generated control files.
enum class ControlFile { kStats, kPlan, kErrors, kMetrics };

// "full" or "counts".
std::string_view ControlViewName(ControlView view);

// The view a caller gets: kFull for uid 0 (root may stat every file) and for a controller (the
// mount's owner or a member of control.group: AccessPolicy::IsController), else kCounts.
ControlView ViewFor(uid_t uid, bool controller);

// What the counts view says in place of what it hides (the stats and plan key "hidden").
inline constexpr std::string_view kHiddenNote =
    "paths, stream names, per-stream details and byte sizes are shown only to the mount's "
    "owner and members of control.group";

// The value through a whitelist schema, or a discarded value (is_discarded()) when it does not
// pass. A schema is a JSON value:
//   "number"    a number or null is copied; anything else does not pass;
//   "name"      a string is copied (only for names the daemon or its configuration chose:
//               tier names, states, warning kinds; never a path or a stream name);
//   "numbers"   an object: its members whose values are numbers (or null) are copied with
//               their keys (names the daemon chose: sources, error kinds, ranks);
//   {k: s, ...} an object: only the keys listed, each through its schema s;
//   [s]         an array: each element through s (elements that do not pass are left out).
// Any other schema (an unknown word, a number) passes nothing.
nlohmann::json Whitelist(const nlohmann::json& value, const nlohmann::json& schema);

// True if every leaf of schema is one of the words above (a check for the tables' tests).
bool ValidSchema(const nlohmann::json& schema);

// The whitelists of the counts view, as parsed JSON schemas.
const nlohmann::json& StatsCountsSchema();
const nlohmann::json& PlanCountsSchema();

// The counts view of a stats object (StatsObject) and of a plan object (Registrar's plan):
// the whitelisted fields, plus "view": "counts" and "hidden": kHiddenNote. A stats warning
// keeps its kind and age; its message is a fixed sentence for its kind.
nlohmann::json StatsCounts(const nlohmann::json& full_stats);
nlohmann::json PlanCounts(const nlohmann::json& full_plan);

// The counts view of `errors`: empty when the full report is (the last manifest was
// accepted), else a fixed sentence saying one was rejected; nothing of the report's text.
std::string ErrorsCounts(const std::string& full_report);

// The metrics families shown in the counts view, and whether `name` is one of them.
std::span<const std::string_view> CountsFamilies();
bool CountsFamily(std::string_view name);
// The counts view of `metrics`: RenderMetrics of StatsCounts(full_stats), keeping only the
// families CountsFamily allows (a family whose source is hidden would read as zeros).
std::string MetricsCounts(const nlohmann::json& full_stats);

}  // namespace clairfs
