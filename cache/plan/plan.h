// Plan: a validated manifest, its objects and where each object is placed. Immutable once
// published to the prefetcher; a new manifest makes a new Plan.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/backing/resolver.h"
#include "cache/base/object.h"
#include "cache/base/object_key.h"
#include "cache/base/status.h"
#include "cache/base/string_arena.h"
#include "cache/manifest/key_index.h"
#include "cache/manifest/manifest.h"
#include "cache/plan/path_check.h"

namespace clairfs {

inline constexpr uint32_t kNoPos = 0xFFFFFFFFu;
// PlanObject::kept_in of an object no slower tier keeps a copy of.
inline constexpr uint8_t kNotKept = 0xFF;

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

// One object of the plan (cache/base/object_key.h): a whole file or a chunk of one.
struct PlanObject {
  std::string_view key;     // ObjectKey of a canonical path, in one of its plan's arenas
  FileVersion version;      // of the whole file
  uint64_t bytes = 0;       // ObjectBytes(key, version)
  uint32_t freq = 0;        // how often it appears in the access string
  uint32_t first = kNoPos;  // position of its first appearance
  Placement place = kStaging;
  // (Route::kTier) The persistent tier that also keeps a copy of it, so that a remount finds
  // it there (PlaceKeptCopies, cache/plan/kept_copies.h); kNotKept if none.
  uint8_t kept_in = kNotKept;
  // (cluster placement) A tier of this node held it, at this version, when the plan was given
  // to the placement (Prefetcher, before ClusterHooks::place): a restarted node that still has
  // it on disk is preferred as its holder (cluster/holders.h).
  bool held = false;

  std::string_view path() const { return KeyPath(key); }
};

// One stream's access string: a sequence of positions, each the read of one object. A
// manifest entry becomes the positions of the objects it overlaps, in offset order (one for a
// file no larger than a chunk). Each process (a rank, a job) registers its own stream.
struct PlanStream {
  std::string name;
  // Identifies this stream's history: kept when epochs are appended (or another stream
  // changes), new when the stream is replaced. Consumption is kept across plans with the same
  // (name, serial).
  uint64_t serial = 0;
  PositionList sequence;              // the access string: an object id per position
  std::vector<uint32_t> epoch_begin;  // position where each epoch starts
  uint64_t entries = 0;               // manifest entries behind the sequence
  uint64_t range_entries = 0;         // of those, entries naming a byte range
  // Distinct objects the sequence reads (set by Plan::Finalize; 0 with a non-empty sequence:
  // not counted).
  uint32_t distinct = 0;

  // 0-based epoch of a position (epochs() if past the end).
  uint32_t EpochOf(uint32_t pos) const;
  uint32_t epochs() const { return static_cast<uint32_t>(epoch_begin.size()); }
};

// The node's plan: the union of its streams over one table of objects. An object's freq adds
// up its reads in every stream; its first reference is the lowest position at which any
// stream reads it (streams are assumed to advance at similar speeds).
class Plan {
 public:
  Plan() = default;
  Plan(const Plan&) = delete;  // the indexes hold views into objects
  Plan& operator=(const Plan&) = delete;

  std::vector<PlanObject> objects;
  // Hold the bytes of the objects' keys (shared with the manifests they came from and with
  // other plans); AddObject() adds to one of this plan's own.
  std::vector<std::shared_ptr<const StringArena>> arenas;
  std::vector<PlanStream> streams;                // ordered by name
  std::vector<std::vector<uint32_t>> tier_order;  // per tier: its objects by first reference
  uint64_t chunk_size = 0;                        // the grid of files read whole
  uint64_t record_chunk_size = 0;                 // the grid of files range entries name
  // Per chunked file (a canonical path): the grid it was cut on. Set by MergePlan; a file keeps
  // its grid in every plan appended to this one.
  std::unordered_map<std::string, uint64_t> grids;

  // Appends an object whose key is copied into this plan's own arena; its id. Call
  // Finalize() before Find() sees it.
  uint32_t AddObject(std::string_view key, const FileVersion& version);
  // Appends an object whose key lies in one of arenas already; its id.
  uint32_t AddObjectViewing(std::string_view key, const FileVersion& version) {
    objects.push_back({key, version, ObjectBytes(key, version)});
    return static_cast<uint32_t>(objects.size() - 1);
  }
  // Computes freq, first and the indexes from objects and streams.
  void Finalize();
  // The same, with index already holding every object's key under its id (as MergePlan builds
  // it): the keys are not hashed twice.
  void Finalize(KeyIndex index);
  // Drops the objects no stream reads and renumbers the others (in order), rewriting every
  // stream's positions, then finalizes. The live keys move to one arena of the plan's own, so
  // the arenas of manifests whose objects are all gone are freed.
  void DropDeadObjects();
  // A copy of objects (with their placement), streams (sharing their sequences' storage) and
  // grids, finalized; tier_order is left empty for the next placement.
  std::shared_ptr<Plan> Clone() const;
  // Object id of a key, or kNoPos.
  uint32_t Find(std::string_view key) const;
  // Index of the stream named name, or -1.
  int FindStream(std::string_view name) const;
  struct ChunkedFileInfo {
    FileVersion version;
    uint64_t chunk = 0;  // its grid
  };
  // A chunked file the plan holds chunks of (its version and grid), or null.
  const ChunkedFileInfo* ChunkedFile(std::string_view path) const;
  uint64_t total_bytes() const { return total_bytes_; }
  // Distinct files, and how many of them are chunked.
  uint64_t files() const { return whole_files_ + chunked_.size(); }
  uint64_t chunked_files() const { return chunked_.size(); }
  // Sums over the streams.
  uint64_t entries() const { return entries_; }
  uint64_t range_entries() const { return range_entries_; }
  uint64_t positions() const { return positions_; }
  // The longest stream's length: every position and every object's `first` lies below it
  // (the cluster's plan parts scale `first` by it: cluster/holders.h, MakeParts).
  uint64_t span() const { return span_; }
  // Objects no stream reads (left by replaced streams, kept so that ids stay stable).
  uint64_t dead_objects() const { return dead_; }

 private:
  std::shared_ptr<StringArena> own_;  // in arenas once made
  KeyIndex index_;                    // over objects' keys
  std::unordered_map<std::string_view, ChunkedFileInfo> chunked_;
  uint64_t total_bytes_ = 0;
  uint64_t whole_files_ = 0;
  uint64_t entries_ = 0, range_entries_ = 0, positions_ = 0, span_ = 0, dead_ = 0;
};

// A manifest whose every path was resolved against the dataset: its own distinct files (by
// canonical path, with the version they had when resolved), what its entries read, and its
// epochs. What a validated manifest becomes; MergePlan turns it into a plan over any base
// without resolving again.
struct ResolvedManifest {
  using File = CheckedPath;  // path: canonical, in one of arenas
  struct Target {
    uint32_t file = 0;  // index into files
    ByteRange range;    // inside the file (checked)
  };
  std::string stream;  // the stream it registers ("" for "default")
  // Hold the files' paths: the parser's arena (a path written canonically is not copied) and
  // one for the canonical forms of the others.
  std::vector<std::shared_ptr<const StringArena>> arenas;
  std::vector<File> files;
  std::vector<Target> targets;
  PositionList sequence;              // index into targets, one per entry
  std::vector<uint32_t> epoch_begin;  // index into sequence
  uint64_t lines = 0;                 // of the text, for the report of MergePlan
  uint64_t range_entries = 0;
  // Every path was written canonically and names a file: files[i].path is the parsed
  // manifest's paths[i], so the parser's index of its paths indexes files (MergePlan).
  bool files_as_written = false;
};

// Checks every path of m against the dataset, and every range against its file's size. All or
// nothing: on any error returns kInvalidArgument whose message is the report
// (docs/control-interface.md): the error count and the first errors as "line N: ...", every
// byte of user input escaped (EscapeForReport).
// checks: the outcomes of m's first paths if they were checked already (CheckPaths, by the
// writes of the manifest).
Result<std::shared_ptr<const ResolvedManifest>> ResolveManifest(const ParsedManifest& m,
                                                                PathResolver& resolver,
                                                                PathChecks checks = {});
// How a manifest changes the stream it names.
enum class StreamChange : uint8_t {
  kReplace,  // the stream becomes the manifest's epochs (no entries: the stream is removed)
  kAppend,   // the manifest's epochs are added after the stream's (created if absent)
};

// The plan of base (may be null) with m's stream changed by m; every other stream of base is
// kept as it is (its positions, serial and object ids). Objects base has are base's (same
// ids); a replaced stream's objects no other stream reads stay as dead objects until they
// outnumber the live ones, then ids are renumbered. A file larger than its grid is cut into
// chunks: the grid is record_chunk_size (0: chunk_size) for a file some range entry of m
// names, so that a record costs a small chunk to fetch and serve, else chunk_size; a file base
// has chunks of keeps base's grid, a file base holds whole stays whole. Fails
// (kInvalidArgument, a report) only when the stream would have more than
// ManifestParser::kMaxEntries positions. base is untouched. m is released before the
// positions are written, so that when the caller held the last reference its storage is
// reused in place. files_index (optional): an index of m's files' paths by file id (the
// parser's, when m.files_as_written); taken as the plan's own index when the plan's objects
// are m's files in order (no base; every target a whole file no larger than its grid), which
// saves hashing every key again.
Result<std::shared_ptr<Plan>> MergePlan(const Plan* base, std::shared_ptr<const ResolvedManifest> m,
                                        StreamChange change, uint64_t chunk_size,
                                        uint64_t record_chunk_size = 0,
                                        KeyIndex* files_index = nullptr);
// Whether base (may be null) has room for m's stream: kInvalidArgument (a report naming
// cache.max_streams) when m would add a stream to a base that holds max_streams already. A
// replacement of a stream base has, and a removal, always fit. reserved: names of streams
// promised to manifests accepted but not installed yet (Registrar's reservations): each
// one base lacks takes a place too, and m's own name among them fits.
Status StreamRoom(const Plan* base, const ResolvedManifest& m, StreamChange change,
                  uint32_t max_streams, std::span<const std::string_view> reserved = {});
// A copy of base without the stream named name; null if base has no such stream.
std::shared_ptr<Plan> RemoveStream(const Plan& base, std::string_view name);
// ResolveManifest then MergePlan.
Result<std::shared_ptr<Plan>> BuildPlan(const ParsedManifest& m, PathResolver& resolver,
                                        const Plan* base, StreamChange change, uint64_t chunk_size,
                                        uint64_t record_chunk_size = 0);

// Capacities the planner fills, fastest tier first.
struct PlacementLimits {
  std::vector<std::string> tier_names;
  std::vector<uint64_t> tier_capacity;
  uint64_t staging_capacity = 0;
  // The tier that keeps copies of the faster tiers' objects across restarts (the fastest
  // persistent tier below a volatile one: the SSD tier under the RAM tier), in the room the
  // placement leaves it; kNotKept: none.
  uint8_t keep_tier = kNotKept;
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
    // Copies of faster tiers' objects kept here as well (PlaceKeptCopies), not in objects/bytes.
    uint64_t kept_objects = 0;
    uint64_t kept_bytes = 0;
  };
  uint64_t epochs = 0;  // of the stream with the most
  uint64_t streams = 0, entries = 0, range_entries = 0, positions = 0;
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
