// Merging: the plan of a base with one stream changed, by a resolved manifest (MergePlan) or
// removed (RemoveStream), and whether the base has room for the stream (StreamRoom). No I/O:
// what a manifest reads was resolved before (resolve.h). Every other stream of the base keeps
// its positions, serial and object ids; the base itself is never changed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "cache/base/status.h"
#include "cache/manifest/key_index.h"
#include "cache/plan/plan.h"
#include "cache/plan/resolve.h"

namespace clairfs {

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

}  // namespace clairfs
