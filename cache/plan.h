// Plan: a validated manifest, its files and where each file is placed. Immutable once
// published to the prefetcher; a new manifest makes a new Plan.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/manifest.h"
#include "cache/object.h"
#include "cache/resolver.h"
#include "cache/status.h"

namespace clairfs {

inline constexpr uint32_t kNoPos = 0xFFFFFFFFu;

// How a planned file reaches its readers.
enum class Route : uint8_t {
  kTier,     // held in a local tier (Placement::tier), filled in first-reference order
  kStaging,  // fetched into the staging window in read order
  kDirect,   // too large to hold whole: read from the backing store at open
  kPeer,     // another node owns it: staged in read order once that node holds it
};

// Where the plan puts one file: a route and, for Route::kTier, the tier (0: fastest). Two
// bytes, so a PlanFile stays as compact as with an int8 code.
struct Placement {
  Route route = Route::kStaging;
  uint8_t tier = 0;  // with Route::kTier only

  static constexpr Placement Tier(size_t t) { return {Route::kTier, static_cast<uint8_t>(t)}; }
  bool InTier() const { return route == Route::kTier; }
  // In tier t or a faster one.
  bool InTierAtOrAbove(size_t t) const { return InTier() && tier <= t; }
  // Fetched into the staging window (kStaging or kPeer).
  bool Staged() const { return route == Route::kStaging || route == Route::kPeer; }
  bool operator==(const Placement&) const = default;
};
inline constexpr Placement kStaging{Route::kStaging};
inline constexpr Placement kDirect{Route::kDirect};
inline constexpr Placement kPeer{Route::kPeer};

struct PlanFile {
  std::string path;  // canonical, relative to the dataset root
  FileVersion version;
  uint32_t freq = 0;        // how often it appears in the access string
  uint32_t first = kNoPos;  // position of its first appearance
  Placement place = kStaging;
};

class Plan {
 public:
  Plan() = default;
  Plan(const Plan&) = delete;  // index_ holds views into files
  Plan& operator=(const Plan&) = delete;

  std::vector<PlanFile> files;
  std::vector<uint32_t> sequence;     // the access string: a file id per position
  std::vector<uint32_t> epoch_begin;  // position where each epoch starts
  std::vector<uint32_t> next_same;    // position -> next position of the same file, or kNoPos
  std::vector<std::vector<uint32_t>> tier_order;  // per tier: its files by first reference

  // Computes freq, first, next_same and the path index from files and sequence.
  void Finalize();
  // A copy of files (with their placement), sequence and epochs, finalized; tier_order is
  // left empty for the next placement.
  std::shared_ptr<Plan> Clone() const;
  // File id of a canonical path, or kNoPos.
  uint32_t Find(std::string_view path) const;
  // 0-based epoch of a position (epochs() if past the end).
  uint32_t EpochOf(uint32_t pos) const;
  uint32_t epochs() const { return static_cast<uint32_t>(epoch_begin.size()); }
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::unordered_map<std::string_view, uint32_t> index_;
  uint64_t total_bytes_ = 0;
};

// A manifest whose every path was resolved against the dataset: its own distinct files (by
// canonical path, with the version they had when resolved), its entries and epochs. What a
// validated manifest becomes; MergePlan turns it into a plan over any base without resolving
// again.
struct ResolvedManifest {
  std::vector<PlanFile> files;
  std::vector<uint32_t> sequence;     // index into files, one per entry
  std::vector<uint32_t> epoch_begin;  // index into sequence
  uint64_t lines = 0;                 // of the text, for the report of MergePlan
};

// Checks every path of m against the dataset. All or nothing: on any error returns
// kInvalidArgument whose message is the report (docs/control-interface.md): the error count
// and the first errors as "line N: ...", every byte of user input escaped (EscapeForReport).
Result<std::shared_ptr<const ResolvedManifest>> ResolveManifest(const ParsedManifest& m,
                                                                PathResolver& resolver);
// The plan of base's epochs (when appending; base may be null) followed by m's; files both
// name are base's. Fails (kInvalidArgument, a report) only when the plan would have more than
// ManifestParser::kMaxEntries entries. base is untouched.
Result<std::shared_ptr<Plan>> MergePlan(const Plan* base, const ResolvedManifest& m);
// ResolveManifest then MergePlan.
Result<std::shared_ptr<Plan>> BuildPlan(const ParsedManifest& m, PathResolver& resolver,
                                        const Plan* base);

// Capacities the planner fills, fastest tier first.
struct PlacementLimits {
  std::vector<std::string> tier_names;
  std::vector<uint64_t> tier_capacity;
  uint64_t staging_capacity = 0;
  uint64_t max_file_size = 0;
};

// HDMLP placement: files by frequency (descending, ties by first reference) go to the fastest
// tier they still fit in; the rest are staged in read order, or read directly when larger than
// the staging window or max_file_size. Fills plan.tier_order in first-reference order.
void PlaceFiles(Plan& plan, const PlacementLimits& limits);

struct PlanSummary {
  struct Part {
    std::string name;
    uint64_t files = 0;
    uint64_t bytes = 0;
    uint64_t capacity = 0;
  };
  uint64_t epochs = 0, entries = 0, files = 0, bytes = 0;
  std::vector<Part> tiers;
  Part staging{"staging"}, direct{"direct"}, peer{"peer"};  // peer: staged from other nodes
  // Bytes the plan will read from the backing store: each tier file once, every staged or
  // direct entry each time it is read, nothing for files other nodes hold.
  uint64_t predicted_backing_bytes = 0;
};
PlanSummary Summarize(const Plan& plan, const PlacementLimits& limits);

}  // namespace clairfs
