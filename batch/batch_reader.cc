#include "batch/batch_reader.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace clairfs {
namespace {

// Bytes asked of ReadContents at once for a file read from its descriptor or chunk by chunk:
// the daemon holds at most this much of a sample at a time (a blob is written from the tier's
// memory as it is).
constexpr uint64_t kStepBytes = 8ull << 20;

// Writes all of iov (total bytes) into fd at off; 0 or the errno of the failed write.
int WriteAll(int fd, std::vector<iovec> iov, uint64_t off) {
  size_t first = 0;
  while (first < iov.size()) {
    const int n = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t w = pwritev(fd, iov.data() + first, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    off += static_cast<uint64_t>(w);
    size_t left = static_cast<size_t>(w);
    while (first < iov.size() && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (left > 0) {  // a short write inside this piece: the rest of it next
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return 0;
}

// Copies all of iov into map at off.
void CopyAll(char* map, const std::vector<iovec>& iov, uint64_t off) {
  for (const iovec& v : iov) {
    std::memcpy(map + off, v.iov_base, v.iov_len);
    off += v.iov_len;
  }
}

}  // namespace

BatchReader::BatchReader(Parts parts, Credentials self, bool can_switch, bool allow_other)
    : p_(parts), self_(std::move(self)), can_switch_(can_switch), allow_other_(allow_other) {}

int BatchReader::ValidPath(std::string_view path) {
  if (path.empty() || path.size() > 4096 || path.front() == '/' ||
      path.find('\0') != std::string_view::npos) {
    return EINVAL;
  }
  bool first = true;
  for (size_t at = 0; at <= path.size();) {
    const size_t end = std::min(path.find('/', at), path.size());
    const std::string_view part = path.substr(at, end - at);
    if (part.empty() || part == "." || part == "..") return EINVAL;
    // The root's `.clairfs` is the link to the control mount in the mount (it shadows a
    // `.clairfs` of the dataset): a symlink, read through the mount.
    if (first && part == ".clairfs") return ELOOP;
    first = false;
    at = end + 1;
  }
  return 0;
}

int BatchReader::ErrnoOf(const Status& s) {
  switch (s.code()) {
    case Code::kOk:
      return 0;
    case Code::kNotFound:
    case Code::kOutsideRoot:
      return ENOENT;
    case Code::kPermissionDenied:
      return EACCES;
    case Code::kSymlink:
      return ELOOP;
    case Code::kInvalidArgument:
      return EINVAL;
    case Code::kStale:
      return ESTALE;
    case Code::kTimedOut:
      return ETIMEDOUT;
    default:
      return EIO;
  }
}

int BatchReader::Allow(const Caller& caller, const std::string& path) {
  // The daemon's own user, or root for a daemon run as root: the daemon's rights.
  if (caller.uid == self_.uid) return 0;
  // Without an identity to check with, or through a mount other users may not reach, another
  // user gets nothing: the daemon's rights would widen what the mount allows.
  if (!can_switch_ || !allow_other_) return EACCES;
  Credentials as;
  (void)caller.CredentialsOf(&as);  // without its groups the primary group decides: narrower
  const Status s = p_.backing->CheckAccess(
      path, R_OK,
      [as, self = self_](const std::function<Status()>& check) { return RunAs(as, self, check); });
  // A store that does not answer refuses (unlike an open's re-check, no kernel checked first).
  return s.ok() ? 0 : ErrnoOf(s);
}

Status BatchReader::Bind(const std::string& path, OpenContents* h,
                         const std::function<bool(uint64_t size)>& fits) {
  // As DatasetCore::Bind: the version a stat shows (one made ahead stands for it when the
  // watch vouches); a tier's blob of exactly that version is served without a descriptor,
  // else the file is opened (O_NONBLOCK, no symlink followed) and its fstat names the version.
  h->dataset = true;
  h->path = path;
  if (p_.dir_seen) {
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      p_.dir_seen(path.substr(0, slash));
    }
  }
  struct stat st;
  if (!p_.ahead || !p_.ahead->Recent(path, &st)) {
    if (Status s = p_.backing->Lstat(path, &st); !s.ok()) return s;
  }
  if (S_ISLNK(st.st_mode)) return Status::FromErrno(ELOOP, path + ": a symbolic link");
  if (!S_ISREG(st.st_mode)) {
    return Status::Error(Code::kInvalidArgument, path + ": not a regular file");
  }
  if (!fits(static_cast<uint64_t>(st.st_size))) {
    return Status::Error(Code::kNoSpace, path + ": does not fit the window");
  }
  h->st = st;
  FileVersion version = VersionOf(st);
  auto served = p_.prefetcher->Open(path, version, true);  // consumed, as an open is
  if (!served.ok()) return served.status();
  const bool cached = served.value().blob && served.value().blob->version() == version &&
                      served.value().source != OpenResult::Source::kChunked;
  if (!cached) {
    auto fd = p_.backing->OpenFile(path);
    if (!fd.ok()) return fd.status();
    if (!S_ISREG(fd.value().st.st_mode)) {
      return Status::Error(Code::kInvalidArgument, path + ": not a regular file");
    }
    h->store = std::move(fd.value().handle);
    h->st = fd.value().st;
    if (VersionOf(h->st) != version) {  // changed since the stat: the descriptor's version
      version = VersionOf(h->st);
      served.value().blob.reset();
    }
  }
  h->chunked = served.value().source == OpenResult::Source::kChunked;
  if (h->chunked) h->chunk_size = served.value().chunk;
  h->blob = std::move(served.value().blob);
  if (h->blob && h->blob->version() != version) {
    p_.stats->errors.stale.fetch_add(1, std::memory_order_relaxed);
    h->blob.reset();
  }
  if (h->blob) {
    h->store.reset();
  } else if (!h->chunked) {
    p_.stats->served_backing.fetch_add(1, std::memory_order_relaxed);
    p_.stats->backing_reads.fetch_add(1, std::memory_order_relaxed);
  }
  return Status::Ok();
}

BatchReader::Sample BatchReader::Read(const Caller& caller, std::string_view path,
                                      uint64_t offset, uint64_t length, Buffer buffer,
                                      uint64_t at, uint64_t limit) {
  Sample out;
  const auto fail = [&](int e) {
    out.error = e;
    out.length = 0;
    (e == EACCES ? p_.batch_stats->denied : p_.batch_stats->errors)
        .fetch_add(1, std::memory_order_relaxed);
    return out;
  };
  if (const int e = ValidPath(path); e != 0) return fail(e);
  const std::string name(path);
  if (const int e = Allow(caller, name); e != 0) return fail(e);
  OpenContents f;
  const auto fits = [&](uint64_t size) {
    out.file_size = size;  // also with ENOBUFS: the client sizes its next window by it
    const uint64_t from = std::min(offset, size);
    const uint64_t bytes = std::min(length, size - from);
    return at <= limit && bytes <= limit - at;
  };
  if (Status s = Bind(name, &f, fits); !s.ok()) {
    return fail(s.code() == Code::kNoSpace ? ENOBUFS : ErrnoOf(s));
  }
  const uint64_t size = f.blob ? f.blob->size() : static_cast<uint64_t>(f.st.st_size);
  out.file_size = size;
  const uint64_t begin = std::min(offset, size);
  const uint64_t n = std::min(length, size - begin);
  if (at > limit || n > limit - at) return fail(ENOBUFS);
  for (uint64_t done = 0; done < n;) {
    const uint64_t step = f.blob ? n - done : std::min(n - done, kStepBytes);
    ReadReply reply;
    Status s = ReadContents(f, *p_.backing, *p_.prefetcher, *p_.stats, *p_.fs_stats, step,
                            begin + done, &reply);
    if (!s.ok()) return fail(ErrnoOf(s));
    // All of one version, all it holds in the range (ReadContents): fewer is a change.
    if (reply.bytes != step) return fail(ESTALE);
    if (buffer.map != nullptr) {
      CopyAll(buffer.map, reply.iov, at + done);  // [at, limit) lies inside the mapping
    } else if (const int e = WriteAll(buffer.fd, std::move(reply.iov), at + done); e != 0) {
      return fail(EIO);  // the client's buffer refused the bytes (sealed, too large a file)
    }
    done += step;
  }
  out.length = n;
  p_.batch_stats->samples.fetch_add(1, std::memory_order_relaxed);
  p_.batch_stats->bytes.fetch_add(n, std::memory_order_relaxed);
  return out;
}

}  // namespace clairfs
