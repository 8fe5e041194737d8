// Plan: the node's plan, the data every planning step shares: its objects (whole files and
// chunks), its streams (each one's access string over those objects) and where each object is
// placed. Immutable once published to the prefetcher; a new manifest makes a new Plan.
//
// A plan is made in steps, each in a file of its own:
// - resolve.h: ResolveManifest checks a parsed manifest's paths and ranges against the dataset
//   (the only step that does I/O: stats through a PathResolver);
// - merge.h: MergePlan makes the plan of a base with one stream changed by a resolved manifest;
//   StreamRoom, RemoveStream (objects, grids and positions: no I/O);
// - place.h: PlaceObjects puts each object in a tier, the staging window or direct reads;
//   kept_copies.h then marks the copies a persistent tier keeps;
// - summary.h: Summarize counts a placed plan for the `plan` file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/base/object.h"
#include "cache/base/object_key.h"
#include "cache/base/string_arena.h"
#include "cache/manifest/key_index.h"
#include "cache/manifest/position_list.h"

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

}  // namespace clairfs
