// Backing: the original dataset files. Everything clairfs serves comes, at first, from here.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cache/io_executor.h"
#include "cache/object.h"
#include "cache/stats.h"
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
//
// Every system call on the dataset runs on an IoExecutor (cache/io_executor.h) and is waited
// for with IoOptions::timeout: a call that does not return in time fails with kTimedOut and is
// abandoned, so a stalled store or one stuck file costs a caller at most the timeout, and a
// path with a stuck call fails at once. Non-regular files are never opened for reading in a way
// that can block (a FIFO swapped in for a file): files are opened with O_NONBLOCK and refused
// with kInvalidArgument unless fstat says they are regular. The I/O threads start at the first
// call: make none before a fork (daemonizing), which they would not survive.
class PosixBacking final : public Backing {
 public:
  // Opens root_dir; fails if it is not a readable directory. stats (optional) must outlive the
  // backing: errors.backing_timeout counts calls that failed for their deadline.
  static Result<std::unique_ptr<PosixBacking>> Open(const std::string& root_dir, IoOptions io = {},
                                                    Stats* stats = nullptr);
  ~PosixBacking() override;
  PosixBacking(const PosixBacking&) = delete;
  PosixBacking& operator=(const PosixBacking&) = delete;

  Status Lstat(const std::string& path, struct stat* st) const override;
  Result<std::string> ReadLink(const std::string& path) const override;
  // Reads in chunks, each of which must complete within the timeout. The version is taken by
  // fstat before and after the read; if it differs, or the file grew, or it was modified at or
  // after the moment the read began (timestamps may be too coarse to show a later write), the
  // read is tried once more, then fails with kIoError "changed while being read". So a blob
  // always holds exactly the bytes of the version it names.
  Result<BlobPtr> ReadFile(const std::string& path, uint64_t max_bytes) const override;

  // A new descriptor for path opened with flags (O_NOFOLLOW and O_CLOEXEC are added); the
  // caller owns it. Used for directories (flags with O_DIRECTORY) and for files served without
  // caching; without O_DIRECTORY or O_PATH the object must be a regular file (else
  // kInvalidArgument), and it is opened with O_NONBLOCK, cleared afterwards unless asked for.
  Result<int> OpenAt(const std::string& path, int flags) const;
  Status StatFs(struct statvfs* st) const;

  // Runs a check under another identity: calls its argument (which does the check) with that
  // identity in force on the current thread, and restores the thread's own before returning.
  using AsIdentity = std::function<Status(const std::function<Status()>&)>;
  // Whether the identity that `as` takes may reach path from the dataset root (search
  // permission on every directory on the way, no symlink followed) and access the object with
  // mask (R_OK, X_OK...). Runs on an I/O thread with the deadline of every call: the identity
  // switch is per thread, so it is made there, around the walk. kPermissionDenied if refused.
  Status CheckAccess(const std::string& path, int mask, AsIdentity as) const;

  // Fails every pending and later call with kUnavailable at once; never waits for a stuck call.
  void Stop();

 private:
  struct RootDir;
  PosixBacking(std::shared_ptr<const RootDir> root, IoOptions io, Stats* stats);
  // Shared with calls still running on I/O threads: the descriptor outlives an abandoned call.
  std::shared_ptr<const RootDir> root_;
  mutable IoExecutor io_;
};

}  // namespace clairfs
