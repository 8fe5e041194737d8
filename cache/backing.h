// Backing: the original dataset files. Everything clairfs serves comes, at first, from here.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstdint>
#include <string>

#include "cache/object.h"
#include "cache/status.h"

namespace clairfs {

// Paths are canonical and relative to the dataset root: no leading '/', no "." or ".."
// components, "" names the root. Implementations never follow a symlink in any component,
// so no call can leave the tree. All methods are thread-safe.
class Backing {
 public:
  virtual ~Backing() = default;
  // stat of the object at path itself (a symlink is reported as a symlink).
  virtual Status Lstat(const std::string& path, struct stat* st) const = 0;
  // Target of the symlink at path.
  virtual Result<std::string> ReadLink(const std::string& path) const = 0;
  // The whole regular file at path, with its version and hash. kInvalidArgument if it is not a
  // regular file; kNoSpace if it is larger than max_bytes; kIoError if it changed while read.
  virtual Result<BlobPtr> ReadFile(const std::string& path, uint64_t max_bytes) const = 0;
};

// The dataset on a local or network file system, reached through a directory descriptor opened
// before the mount, so it works when clairfs is mounted over the dataset path itself.
class PosixBacking final : public Backing {
 public:
  // Opens root_dir; fails if it is not a readable directory.
  static Result<std::unique_ptr<PosixBacking>> Open(const std::string& root_dir);
  ~PosixBacking() override;
  PosixBacking(const PosixBacking&) = delete;
  PosixBacking& operator=(const PosixBacking&) = delete;

  Status Lstat(const std::string& path, struct stat* st) const override;
  Result<std::string> ReadLink(const std::string& path) const override;
  Result<BlobPtr> ReadFile(const std::string& path, uint64_t max_bytes) const override;

  // A new descriptor for path opened with flags (O_NOFOLLOW and O_CLOEXEC are added); the
  // caller owns it. Used for directories and for files served without caching.
  Result<int> OpenAt(const std::string& path, int flags) const;
  Status StatFs(struct statvfs* st) const;

 private:
  explicit PosixBacking(int root_fd) : root_fd_(root_fd) {}
  int root_fd_;
};

}  // namespace clairfs
