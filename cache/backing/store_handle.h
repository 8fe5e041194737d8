// StoreHandle: a file descriptor or a directory stream open on the backing store, shared by
// the mount's handle that owns it and the I/O calls that use it (PosixBacking::ReadAt,
// Fstat, ReadDir). An abandoned call keeps it open until the call returns, so no call ever
// uses a closed or reused descriptor. The last reference closes it on an I/O thread
// (IoExecutor::Post): close() may block on a stalled store (FLUSH on a FUSE store, a CLOSE RPC
// on a network one), and the last reference is usually dropped by a FUSE worker at RELEASE.
// Used by one I/O call at a time (the executor's rule for a stuck path ensures it); the
// directory position is only touched inside those calls.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <memory>
#include <string>

#include "cache/backing/io_executor.h"
#include "cache/base/status.h"

namespace clairfs {

class StoreHandle {
 public:
  // Takes fd, or a directory stream made from it (dir owns its descriptor then); the last
  // reference closes them through post.
  static std::shared_ptr<StoreHandle> Make(int fd, DIR* dir, IoExecutor::Poster post);

  int fd() const { return fd_; }
  DIR* dir() const { return dir_; }  // nullptr for a file
  // A directory's position as telldir() gives it, or 0 at its start; only in I/O calls.
  off_t dir_pos = 0;

  StoreHandle(const StoreHandle&) = delete;
  StoreHandle& operator=(const StoreHandle&) = delete;

 private:
  StoreHandle(int fd, DIR* dir) : fd_(fd), dir_(dir) {}
  ~StoreHandle();
  const int fd_;
  DIR* const dir_;
};
using StoreHandlePtr = std::shared_ptr<StoreHandle>;

// The value of extended attribute name (nullptr: the list of names) of the object fd refers
// to, read through /proc/self/fd/N (which also works for O_PATH descriptors). A file system
// without attributes answers ENODATA for a name and an empty list. what names the object in
// errors. A direct system call, without a deadline: the caller decides where it runs.
Result<std::string> FdXattr(int fd, const char* name, const std::string& what);

}  // namespace clairfs
