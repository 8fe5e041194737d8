// Checking a manifest's distinct paths against the dataset: each must name a regular file
// inside the root (symlinks followed). The outcome is kept per path, compactly (48 bytes), so
// that a million paths can be checked in batches, and even while the manifest is still being
// written (PathCheckAhead), before ResolveManifest (cache/plan.h) turns them into files.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cache/object.h"
#include "cache/resolver.h"
#include "cache/string_arena.h"

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

// Checks paths while a manifest is still being written, on a thread of its own, so that
// close() finds most of the work done. Paths are handed over as views that must stay valid
// until Take() or destruction (they lie in the parser's arena). What a path named when it was
// checked is what validation reports: a file that disappears between its check and close() is
// refused only later, when it is fetched (its version is checked then, as always).
//
// Not thread-safe: one owner (a manifest writer, under its lock) calls Add and Take; the
// worker thread is internal. Every wait is bounded by the backing store's own deadlines.
class PathCheckAhead {
 public:
  explicit PathCheckAhead(const PathResolver& resolver) : resolvers_(CheckResolvers(resolver)) {}
  ~PathCheckAhead();
  PathCheckAhead(const PathCheckAhead&) = delete;
  PathCheckAhead& operator=(const PathCheckAhead&) = delete;

  // Queues paths, which continue the paths queued before (path index = count so far).
  void Add(std::span<const std::string_view> paths);
  size_t queued() const { return queued_; }
  // How many of the paths checked so far are bad (0 before a batch is done). Take() returns
  // them and validation refuses each, so a writer may refuse its text at once.
  size_t errors_found() const;
  // Waits until every queued path is checked and returns the outcomes; queues nothing more.
  PathChecks Take();

 private:
  void Run();

  std::vector<PathResolver> resolvers_;  // the worker's
  size_t queued_ = 0;
  mutable std::mutex mu_;  // leaf lock: guards todo_, checks_ (when not busy_), busy_, stop_,
                           // errors_found_
  std::condition_variable cv_;
  std::vector<std::string_view> todo_;  // every path queued, by index
  PathChecks checks_;                   // outcomes of todo_[0, checks_.size())
  bool busy_ = false;                   // the worker is checking a batch
  bool flush_ = false;                  // Take() waits: check what is queued, however little
  bool stop_ = false;
  size_t errors_found_ = 0;  // checks_.errors.size() after the last batch
  std::thread worker_;       // started with the first Add
};

}  // namespace clairfs
