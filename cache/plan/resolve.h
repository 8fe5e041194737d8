// Resolving a manifest: every path a parsed manifest names is checked against the dataset
// (stats through a PathResolver, the one step of planning that does I/O) and every range
// against its file's size. The outcome, a ResolvedManifest, holds the files' canonical paths
// and versions; merging it into a plan (merge.h) never touches the dataset again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/backing/resolver.h"
#include "cache/base/object_key.h"
#include "cache/base/status.h"
#include "cache/base/string_arena.h"
#include "cache/manifest/manifest.h"
#include "cache/manifest/position_list.h"
#include "cache/plan/path_check.h"

namespace clairfs {

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

}  // namespace clairfs
