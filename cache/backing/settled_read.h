// Reading a file's bytes as one version, on the calling thread (an I/O thread of PosixBacking).
// The settle rule: bytes are served only when the file's version (size, stamps, identity) is
// the same before and after the read and its stamps are old enough that no write can still be
// copying (kSettleNs); otherwise the read is retried once after the clock has passed the stamp,
// then reported as a change. Internal to cache/backing: PosixBacking is its only user.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "cache/backing/io_executor.h"
#include "cache/base/object.h"
#include "cache/base/object_key.h"
#include "cache/base/status.h"

namespace clairfs {

// An owned descriptor. Movable, so that an abandoned call's descriptor is closed by the I/O
// thread that opened it when its result is dropped.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  void Reset();
  int fd_;
};

// Opens path beneath root without following any symlink; a trailing symlink is opened itself
// when flags has O_PATH|O_NOFOLLOW, and fails with ELOOP otherwise. -1 and errno on failure.
int OpenBeneath(int root_fd, const std::string& path, int flags);

// range of the regular file at path (beneath root_fd), all of one version, or an error:
// kIoError "changed while being read" when two attempts could not prove the bytes stable,
// kInvalidArgument for a range outside the file or a file that is not regular. drop_pages: once
// the bytes are read whole and settled, the kernel is told it may drop the range's pages
// (advice: its failure changes nothing), unless the file was modified within the second
// before the read (a writer may be at work).
Result<BlobPtr> ReadSettled(int root_fd, const std::string& path, ByteRange range,
                            IoProgress& progress, bool drop_pages = false);

// Exactly the bytes [off, off+n) clipped to version.size, read through fd (a descriptor of the
// file opened at `version`). changed: they may not all be of that version (the file was
// truncated, its fstat after the read differs, or it was modified too recently to rule out a
// write in progress, twice).
struct VersionBytes {
  std::unique_ptr<char[]> data;
  size_t size = 0;
  bool changed = false;
};
Result<VersionBytes> PreadAtVersion(int fd, const std::string& path, size_t n, uint64_t off,
                                    const FileVersion& version, IoProgress& progress);

// The error for a descriptor whose file is no longer the version it was opened at (kStale,
// which the kernel gets as ESTALE).
Status ChangedSinceOpen(const std::string& path);

}  // namespace clairfs
