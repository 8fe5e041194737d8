// Plan: a validated manifest, its objects and where each object is placed. Immutable once
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
#include "cache/object_key.h"
#include "cache/resolver.h"
#include "cache/status.h"

namespace clairfs {

inline constexpr uint32_t kNoPos = 0xFFFFFFFFu;

// How a planned object reaches its readers.
enum class Route : uint8_t {
  kTier,     // held in a local tier (Placement::tier), filled in first-reference order
  kStaging,  // fetched into the staging window in read order
  kDirect,   // larger than the staging window: read from the backing store by its readers
  kPeer,     // another node owns it: staged in read order once that node holds it
};

// Where the plan puts one object: a route and, for Route::kTier, the tier (0: fastest). Two
// bytes, so a PlanObject stays as compact as with an int8 code.
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

// One object of the plan (cache/object_key.h): a whole file or a chunk of one.
struct PlanObject {
  std::string key;      // ObjectKey of a canonical path, relative to the dataset root
  FileVersion version;  // of the whole file
  uint64_t bytes = 0;   // ObjectBytes(key, version)
  uint32_t freq = 0;        // how often it appears in the access string
  uint32_t first = kNoPos;  // position of its first appearance
  Placement place = kStaging;

  static PlanObject Of(std::string key, const FileVersion& version) {
    PlanObject o{std::move(key), version};
    o.bytes = ObjectBytes(o.key, version);
    return o;
  }
  std::string_view path() const { return KeyPath(key); }
};

// The access string is a sequence of positions, each the read of one object: a manifest entry
// becomes the positions of the objects it overlaps, in offset order (one for a file no larger
// than a chunk).
class Plan {
 public:
  Plan() = default;
  Plan(const Plan&) = delete;  // the indexes hold views into objects
  Plan& operator=(const Plan&) = delete;

  std::vector<PlanObject> objects;
  std::vector<uint32_t> sequence;     // the access string: an object id per position
  std::vector<uint32_t> epoch_begin;  // position where each epoch starts
  std::vector<uint32_t> next_same;    // position -> next position of the same object, or kNoPos
  std::vector<std::vector<uint32_t>> tier_order;  // per tier: its objects by first reference
  uint64_t chunk_size = 0;         // the grid of files read whole
  uint64_t record_chunk_size = 0;  // the grid of files range entries name
  // Per chunked file (a canonical path): the grid it was cut on. Set by MergePlan; a file keeps
  // its grid in every plan appended to this one.
  std::unordered_map<std::string, uint64_t> grids;
  uint64_t entries = 0;       // manifest entries behind the sequence
  uint64_t range_entries = 0;  // of those, entries naming a byte range

  // Computes freq, first, next_same and the indexes from objects and sequence.
  void Finalize();
  // A copy of objects (with their placement), sequence, epochs and counts, finalized;
  // tier_order is left empty for the next placement.
  std::shared_ptr<Plan> Clone() const;
  // Object id of a key, or kNoPos.
  uint32_t Find(std::string_view key) const;
  struct ChunkedFileInfo {
    FileVersion version;
    uint64_t chunk = 0;  // its grid
  };
  // A chunked file the plan holds chunks of (its version and grid), or null.
  const ChunkedFileInfo* ChunkedFile(std::string_view path) const;
  // 0-based epoch of a position (epochs() if past the end).
  uint32_t EpochOf(uint32_t pos) const;
  uint32_t epochs() const { return static_cast<uint32_t>(epoch_begin.size()); }
  uint64_t total_bytes() const { return total_bytes_; }
  // Distinct files, and how many of them are chunked.
  uint64_t files() const { return whole_files_ + chunked_.size(); }
  uint64_t chunked_files() const { return chunked_.size(); }

 private:
  std::unordered_map<std::string_view, uint32_t> index_;
  std::unordered_map<std::string_view, ChunkedFileInfo> chunked_;
  uint64_t total_bytes_ = 0;
  uint64_t whole_files_ = 0;
};

// A manifest whose every path was resolved against the dataset: its own distinct files (by
// canonical path, with the version they had when resolved), what its entries read, and its
// epochs. What a validated manifest becomes; MergePlan turns it into a plan over any base
// without resolving again.
struct ResolvedManifest {
  struct File {
    std::string path;
    FileVersion version;
  };
  struct Target {
    uint32_t file = 0;  // index into files
    ByteRange range;    // inside the file (checked)
  };
  std::vector<File> files;
  std::vector<Target> targets;
  std::vector<uint32_t> sequence;     // index into targets, one per entry
  std::vector<uint32_t> epoch_begin;  // index into sequence
  uint64_t lines = 0;                 // of the text, for the report of MergePlan
  uint64_t range_entries = 0;
};

// Checks every path of m against the dataset, and every range against its file's size. All or
// nothing: on any error returns kInvalidArgument whose message is the report
// (docs/control-interface.md): the error count and the first errors as "line N: ...", every
// byte of user input escaped (EscapeForReport).
Result<std::shared_ptr<const ResolvedManifest>> ResolveManifest(const ParsedManifest& m,
                                                                PathResolver& resolver);
// The plan of base's epochs (when appending; base may be null) followed by m's; objects both
// name are base's. A file larger than its grid is cut into chunks: the grid is
// record_chunk_size (0: chunk_size) for a file some range entry of m names, so that a record
// costs a small chunk to fetch and serve, else chunk_size; a file base has chunks of keeps
// base's grid. Fails (kInvalidArgument, a report) only when the plan would have more than
// ManifestParser::kMaxEntries positions. base is untouched.
Result<std::shared_ptr<Plan>> MergePlan(const Plan* base, const ResolvedManifest& m,
                                        uint64_t chunk_size, uint64_t record_chunk_size = 0);
// ResolveManifest then MergePlan.
Result<std::shared_ptr<Plan>> BuildPlan(const ParsedManifest& m, PathResolver& resolver,
                                        const Plan* base, uint64_t chunk_size,
                                        uint64_t record_chunk_size = 0);

// Capacities the planner fills, fastest tier first.
struct PlacementLimits {
  std::vector<std::string> tier_names;
  std::vector<uint64_t> tier_capacity;
  uint64_t staging_capacity = 0;
};

// HDMLP placement over objects: by frequency (descending, ties by first reference) each goes
// to the fastest tier it still fits in; the rest are staged in read order, or read directly
// when larger than the staging window. Fills plan.tier_order in first-reference order.
void PlaceObjects(Plan& plan, const PlacementLimits& limits);

struct PlanSummary {
  struct Part {
    std::string name;
    uint64_t objects = 0;
    uint64_t bytes = 0;
    uint64_t capacity = 0;
  };
  uint64_t epochs = 0, entries = 0, range_entries = 0, positions = 0;
  uint64_t files = 0, chunked_files = 0, objects = 0, chunks = 0, bytes = 0;
  uint64_t chunk_size = 0, record_chunk_size = 0;
  std::vector<Part> tiers;
  Part staging{"staging"}, direct{"direct"}, peer{"peer"};  // peer: staged from other nodes
  // Bytes the plan will read from the backing store: each tier object once, every staged or
  // direct position each time it is read, nothing for objects other nodes hold.
  uint64_t predicted_backing_bytes = 0;
};
PlanSummary Summarize(const Plan& plan, const PlacementLimits& limits);

}  // namespace clairfs
