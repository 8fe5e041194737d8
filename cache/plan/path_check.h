// Checking a manifest's distinct paths against the dataset: each must name a regular file
// inside the root (symlinks followed). The outcome is kept per path, compactly (48 bytes), so
// that a million paths can be checked in batches, each write() of a manifest checking the
// paths it brought (Registrar::Write), before ResolveManifest (cache/plan/resolve.h) turns them
// into files.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/backing/resolver.h"
#include "cache/base/object.h"
#include "cache/base/string_arena.h"

namespace clairfs {

// A path as resolved: its canonical form and the version of the file it names.
struct CheckedPath {
  // The canonical path: the written path itself (a view into the parser's arena) when it is
  // canonical, else a copy in PathChecks::rewritten. data() == nullptr: not a regular file.
  std::string_view path;
  FileVersion version;
  bool ok() const { return path.data() != nullptr; }
};

// The outcomes for a prefix of a manifest's paths: paths[i] for i < size().
struct PathChecks {
  std::vector<CheckedPath> paths;
  std::vector<std::pair<uint32_t, std::string>> errors;  // (path index, why), ascending
  std::shared_ptr<StringArena> rewritten = std::make_shared<StringArena>();
  size_t size() const { return paths.size(); }
};

// Resolvers for CheckPaths, one per thread it uses (forked from resolver). Kept across calls,
// they remember the directories resolved before.
std::vector<PathResolver> CheckResolvers(const PathResolver& resolver);

// Checks paths[out->size(), paths.size()) and appends their outcomes to out, in batches, each
// by one thread per resolver. The outcome of a path does not depend on the batch or thread
// that checked it. A store that does not answer fails each path of a batch at once (no retry
// path by path).
void CheckPaths(std::span<const std::string_view> paths, std::vector<PathResolver>& resolvers,
                PathChecks* out);

}  // namespace clairfs
