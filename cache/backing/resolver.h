// PathResolver: turns a path as a user wrote it into the canonical path of the object it names
// inside the dataset, following symlinks only while they stay inside the tree.
#pragma once

#include <sys/stat.h>

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/backing/backing.h"

namespace clairfs {

class PathResolver {
 public:
  // root_aliases: absolute, normalized paths that name the dataset root (the dataset directory
  // and the mountpoint); an absolute path or symlink target is inside the tree iff it starts
  // with one of them.
  PathResolver(const Backing& backing, std::vector<std::string> root_aliases);

  // Resolves path (relative to the root, or absolute under a root alias) as the kernel would:
  // empty components are skipped; "." and ".." must follow a directory, and a trailing slash
  // requires one (ENOTDIR otherwise: "file/", "file/.", "file/../x"); ".." is physical (after
  // a symlink to a directory it is that directory's parent). Symlinks in every component are
  // followed, the final one only if follow_final or the path ends in '/'. Returns the
  // canonical relative path and fills *st with the final object's lstat. Errors: kOutsideRoot
  // (a step leaves the tree), kNotFound (also ENOTDIR), kInvalidArgument (symlink loop, a
  // name longer than NAME_MAX). Not thread-safe: it memoizes directories.
  Result<std::string> Resolve(std::string_view path, bool follow_final, struct stat* st);

  // Resolve(paths[i], follow_final, &(*st)[i]) for each i into (*out)[i], with the same
  // results, but the stats of plain names in directories resolved before (most of a
  // dataset's files) are made together (Backing::LstatMany): one wait for many paths.
  void ResolveMany(const std::vector<std::string_view>& paths, bool follow_final,
                   std::vector<Result<std::string>>* out, std::vector<struct stat>* st);

  // A resolver over the same tree with an empty memo, for another thread.
  PathResolver Fork() const { return PathResolver(backing_, aliases_); }

  // Strips a root alias from an absolute path: "/data/set/a/b" -> "a/b". False if none matches.
  bool StripAlias(std::string_view absolute, std::string* relative) const;

 private:
  Result<std::string> Walk(std::string_view start_dir, std::string_view rest, bool follow_final,
                           struct stat* st, int* hops);
  const Backing& backing_;
  std::vector<std::string> aliases_;
  // raw dir path -> canonical dir and the symlinks followed to reach it
  std::unordered_map<std::string, std::pair<std::string, int>> dir_cache_;
};

// True iff a symlink stored at link_path (canonical) with this target, followed by the kernel
// inside the mount, can only reach objects inside the tree. Dangling targets inside count.
bool SymlinkStaysInside(PathResolver& resolver, const std::string& link_path);

}  // namespace clairfs
