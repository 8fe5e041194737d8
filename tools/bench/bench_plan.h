// The read plan of clairfs-bench: epoch sections of paths, from a list/manifest or a walk.
#pragma once

#include <string>
#include <vector>

namespace clairfs::bench {

// Epoch sections of paths (relative to the root unless absolute), in read order. Never empty
// after a successful load, and no section is empty.
using Plan = std::vector<std::vector<std::string>>;

// Parses a list or clairfs manifest: one path per line; lines starting with '#' are skipped,
// except that "#epoch" begins a new section (a leading or repeated one adds no empty section).
// Returns false and sets *error on I/O failure or when no section holds a path.
bool LoadList(const std::string& path, Plan* plan, std::string* error);

// Collects the regular files under root (symlinks followed for files, not for directories),
// sorted by path, as one section. Returns false and sets *error when there are none.
bool WalkRoot(const std::string& root, Plan* plan, std::string* error);

}  // namespace clairfs::bench
