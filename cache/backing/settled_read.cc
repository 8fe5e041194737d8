#include "cache/backing/settled_read.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace clairfs {
namespace {

// A whole-file read proceeds in steps of this size; each must complete within the timeout.
constexpr uint64_t kReadChunk = 4ull << 20;
// How long a retry waits for the clock to pass a modification it could not rule out.
constexpr int64_t kClockWaitNs = 60'000'000;
// A write in progress when a read begins has set its stamp before (a write updates the stamps
// first, then copies): a file modified less than this long before a read began may be in the
// middle of a single write, so it cannot be proven stable yet.
constexpr int64_t kSettleNs = 10'000'000;
// A file modified less than this long before a read began keeps its pages (drop_pages).
constexpr int64_t kQuietNs = 1'000'000'000;
// A stamp this far past the local clock was set by another clock (a network file system's
// server): the local clock's granularity says nothing about it.
constexpr int64_t kForeignClockNs = 20'000'000;

int64_t CoarseRealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

// The latest modification stamp of a version (data or metadata).
int64_t StampOf(const FileVersion& v) { return std::max(v.mtime_ns, v.ctime_ns); }

// Polls (bounded by kClockWaitNs) until the kernel's file-timestamp clock is past stamp.
void WaitForClockPast(int64_t stamp) {
  const int64_t give_up = CoarseRealtimeNs() + kClockWaitNs;
  for (int64_t now = CoarseRealtimeNs(); now <= stamp && now < give_up; now = CoarseRealtimeNs()) {
    struct timespec pause = {0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
}

Status Changed(const std::string& path) {
  return Status::Error(Code::kIoError, path + ": changed while being read");
}

// Clears O_NONBLOCK from a descriptor that turned out to be a regular file (a regular file
// ignores it on local file systems; a network or FUSE file system might not).
Status ClearNonblock(int fd, const std::string& path) {
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) return Status::FromErrno(errno, path);
  return Status::Ok();
}

// One attempt at reading range of the file. *changed: the bytes may not all belong to one
// version; *stamp: the latest modification stamp seen.
Result<BlobPtr> ReadOnce(int root_fd, const std::string& path, ByteRange range,
                         IoProgress& progress, bool drop_pages, bool* changed, int64_t* stamp) {
  const int64_t began = CoarseRealtimeNs();
  Fd fd(OpenBeneath(root_fd, path, O_RDONLY | O_NONBLOCK));
  if (fd.get() < 0) return Status::FromErrno(errno, path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, path);
  if (!S_ISREG(st.st_mode)) {
    return Status::Error(Code::kInvalidArgument, path + ": not a regular file");
  }
  if (Status s = ClearNonblock(fd.get(), path); !s.ok()) return s;
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (!range.whole() && (range.offset > file_size || range.length > file_size - range.offset)) {
    return Status::Error(Code::kInvalidArgument, path + ": range " + std::to_string(range.offset) +
                                                     "+" + std::to_string(range.length) +
                                                     " is not inside the file (size " +
                                                     std::to_string(file_size) + ")");
  }
  const uint64_t base = range.offset;
  const uint64_t size = range.whole() ? file_size : range.length;
  // A chunk is read exactly: the kernel's readahead past its end would read bytes of the next
  // chunk from the store for nothing (chunks are fetched in plan order, not file order).
  // Advice only: its failure changes nothing.
  if (!range.whole()) (void)posix_fadvise(fd.get(), 0, 0, POSIX_FADV_RANDOM);
  const FileVersion version = VersionOf(st);
  *stamp = StampOf(version);
  auto blob = Blob::Allocate(size, version);
  uint64_t done = 0;
  while (done < size) {
    const uint64_t want = std::min(size - done, kReadChunk);
    ssize_t n = pread(fd.get(), blob->mutable_data() + done, want, static_cast<off_t>(base + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, path);
    if (n == 0) {  // shrank
      *changed = true;
      return Changed(path);
    }
    done += static_cast<uint64_t>(n);
    progress.Touch();
  }
  // A whole-file read checks that nothing follows the bytes read (the file grew); a range is
  // checked by the version alone, which holds the size.
  ssize_t n = 0;
  if (range.whole()) {
    char extra;
    do {
      n = pread(fd.get(), &extra, 1, static_cast<off_t>(size));
    } while (n < 0 && errno == EINTR);
    if (n < 0) return Status::FromErrno(errno, path);
  }
  struct stat after;
  if (fstat(fd.get(), &after) != 0) return Status::FromErrno(errno, path);
  *stamp = std::max(*stamp, StampOf(VersionOf(after)));
  // A later write changes a stamp, except one in the same clock tick as the first fstat (the
  // stamps are as coarse as the kernel's clock tick), and a single write in progress during the
  // whole read (its stamps were set before it copied). So a file modified since kSettleNs
  // before `began` cannot be proven stable and counts as changed (unless its stamp comes from
  // another clock, too far ahead of this one to be compared).
  const bool recent = *stamp >= began - kSettleNs && *stamp <= CoarseRealtimeNs() + kForeignClockNs;
  if (n > 0 || VersionOf(after) != version || recent) {
    *changed = true;
    return Changed(path);
  }
  // Only the pages of a file left alone for a while are dropped: DONTNEED also starts the
  // writeback of dirty pages, which stalls a writer at work mid-write, long enough for its
  // half-written middle to pass the checks above as settled.
  if (drop_pages && *stamp < began - kQuietNs) {
    (void)posix_fadvise(fd.get(), static_cast<off_t>(base), static_cast<off_t>(size),
                        POSIX_FADV_DONTNEED);
  }
  blob->Seal();
  return BlobPtr(std::move(blob));
}

}  // namespace

void Fd::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

// Opens path beneath root without following any symlink; a trailing symlink is opened itself
// when flags has O_PATH|O_NOFOLLOW, and fails with ELOOP otherwise.
int OpenBeneath(int root_fd, const std::string& path, int flags) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const char* p = path.empty() ? "." : path.c_str();
  int fd;
  do {
    fd = static_cast<int>(syscall(SYS_openat2, root_fd, p, &how, sizeof(how)));
  } while (fd < 0 && errno == EINTR);
  return fd;
}

Status ChangedSinceOpen(const std::string& path) {
  return Status::Error(Code::kStale, path + ": changed since it was opened", ESTALE);
}

Result<BlobPtr> ReadSettled(int root_fd, const std::string& path, ByteRange range,
                            IoProgress& progress, bool drop_pages) {
  for (int attempt = 0;; ++attempt) {
    bool changed = false;
    int64_t stamp = 0;
    auto r = ReadOnce(root_fd, path, range, progress, drop_pages, &changed, &stamp);
    if (!changed || attempt == 1) return r;
    WaitForClockPast(stamp + kSettleNs);
    progress.Touch();
  }
}

Result<VersionBytes> PreadAtVersion(int fd, const std::string& path, size_t n, uint64_t off,
                                    const FileVersion& version, IoProgress& progress) {
  const uint64_t want = off >= version.size ? 0 : std::min<uint64_t>(n, version.size - off);
  VersionBytes out;
  out.data = std::make_unique_for_overwrite<char[]>(want == 0 ? 1 : want);
  size_t& got = out.size;
  for (int attempt = 0;; ++attempt) {
    const int64_t began = CoarseRealtimeNs();
    got = 0;
    while (got < want) {
      const ssize_t r = pread(fd, out.data.get() + got, want - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::FromErrno(errno, path);
      if (r == 0) break;  // shorter than the version: truncated
      got += static_cast<size_t>(r);
      progress.Touch();
    }
    struct stat after;
    if (fstat(fd, &after) != 0) return Status::FromErrno(errno, path);
    out.changed = got < want || VersionOf(after) != version;
    if (out.changed) return out;
    // As in ReadOnce: a stamp this recent may belong to a write still copying its bytes.
    const int64_t stamp = StampOf(version);
    const bool recent = stamp >= began - kSettleNs && stamp <= CoarseRealtimeNs() + kForeignClockNs;
    if (!recent) return out;
    if (attempt == 1) {
      out.changed = true;
      return out;
    }
    WaitForClockPast(stamp + kSettleNs);
    progress.Touch();
  }
}

}  // namespace clairfs
