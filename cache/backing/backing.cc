#include "cache/backing/backing.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>

#include "cache/backing/settled_read.h"
#include "cache/base/log.h"

namespace clairfs {
namespace {

// s, with a refusal for want of permission turned into "missing" (see MaybeAs).
Status Unseen(Status s) {
  if (s.code() != Code::kPermissionDenied) return s;
  std::string what = s.message();
  if (const size_t colon = what.rfind(": "); colon != std::string::npos) what.resize(colon);
  return Status::FromErrno(ENOENT, what);
}

// Under an identity (PosixBacking::AsCaller), a regular file must be readable too: EACCES
// otherwise, as if a directory above it could not be searched. name relative to dir_fd, or ""
// for dir_fd itself; st is its lstat.
int ReadableAs(int dir_fd, const char* name, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return 0;
  const int flags = AT_EACCESS | (*name ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH);
  if (syscall(SYS_faccessat2, dir_fd, name, R_OK, flags) != 0) return errno;
  return 0;
}

// Runs body as `as` when as is set (AsCaller), else as the daemon. Under an identity, what it
// may not see (EACCES: a directory it may not search, a file it may not read) is reported as
// missing (ENOENT), so that the caller learns nothing of names it could not stat.
Status MaybeAs(const PosixBacking::AsIdentity& as, const std::function<Status()>& body) {
  return as ? Unseen(as(body)) : body();
}

// The lstat of each of paths (canonical, relative to the root) into (*st)[i], (*status)[i]. By
// directory: each is opened once (beneath the root, no symlink followed) and its names are
// stat'ed relative to it without following a final symlink, which is what opening the whole
// path would report, in one system call instead of three. as: run under a caller's identity
// (PosixBacking::AsCaller), where a regular file must be readable too (ReadableAs).
void StatBatch(int root_fd, const std::vector<std::string>& paths, bool as,
               std::vector<struct stat>* st, std::vector<Status>* status, IoProgress& progress) {
  st->assign(paths.size(), {});
  status->assign(paths.size(), Status::Ok());
  std::vector<uint32_t> order(paths.size());
  std::vector<size_t> slash(paths.size());
  for (uint32_t i = 0; i < paths.size(); ++i) {
    order[i] = i;
    slash[i] = paths[i].rfind('/');
  }
  const auto dir = [&](uint32_t i) {
    return slash[i] == std::string::npos ? std::string_view()
                                         : std::string_view(paths[i]).substr(0, slash[i]);
  };
  const auto by_dir = [&](uint32_t a, uint32_t b) { return dir(a) < dir(b); };
  if (!std::is_sorted(order.begin(), order.end(), by_dir)) {  // a dataset's order mostly is
    std::sort(order.begin(), order.end(), by_dir);
  }
  Fd dfd;
  int dir_errno = 0;  // of opening open_dir
  std::string_view open_dir;
  bool have_dir = false;
  for (uint32_t i : order) {
    const std::string_view name = slash[i] == std::string::npos
                                      ? std::string_view(paths[i])
                                      : std::string_view(paths[i]).substr(slash[i] + 1);
    if (name.empty() || name == "." || name == "..") {  // not a plain name: the long way
      Fd fd(OpenBeneath(root_fd, paths[i], O_PATH));
      if (fd.get() < 0 || fstat(fd.get(), &(*st)[i]) != 0) {
        (*status)[i] = Status::FromErrno(errno, paths[i]);
      } else if (int err = as ? ReadableAs(fd.get(), "", (*st)[i]) : 0; err != 0) {
        (*status)[i] = Status::FromErrno(err, paths[i]);
      }
      progress.Touch();
      continue;
    }
    if (!have_dir || dir(i) != open_dir) {
      open_dir = dir(i);
      have_dir = true;
      // "dir/." fails as the whole path would: ELOOP through a symlink, ENOTDIR a file.
      dfd = Fd(OpenBeneath(root_fd, open_dir.empty() ? "" : std::string(open_dir) + "/.", O_PATH));
      dir_errno = dfd.get() < 0 ? errno : 0;
    }
    const char* leaf = paths[i].c_str() + (paths[i].size() - name.size());  // name ends it
    if (dir_errno != 0) {
      (*status)[i] = Status::FromErrno(dir_errno, paths[i]);
    } else if (fstatat(dfd.get(), leaf, &(*st)[i], AT_SYMLINK_NOFOLLOW) != 0) {
      (*status)[i] = Status::FromErrno(errno, paths[i]);
    } else if (int err = as ? ReadableAs(dfd.get(), leaf, (*st)[i]) : 0; err != 0) {
      (*status)[i] = Status::FromErrno(err, paths[i]);
    }
    progress.Touch();
  }
}

}  // namespace

struct PosixBacking::RootDir {
  explicit RootDir(int f) : fd(f) {}
  ~RootDir() { close(fd); }
  RootDir(const RootDir&) = delete;
  RootDir& operator=(const RootDir&) = delete;
  const int fd;
};

Result<std::unique_ptr<PosixBacking>> PosixBacking::Open(const std::string& root_dir, IoOptions io,
                                                         Stats* stats, OnDisconnect on_disconnect) {
  int fd = open(root_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "cannot open dataset directory '" + root_dir + "'");
  auto root = std::make_shared<const RootDir>(fd);
  RootAtOpen at_open;
  if (fstat(fd, &at_open.st) != 0) {
    return Status::FromErrno(errno, "cannot stat dataset directory '" + root_dir + "'");
  }
  at_open.acl_access = FdXattr(fd, "system.posix_acl_access", root_dir);
  at_open.acl_default = FdXattr(fd, "system.posix_acl_default", root_dir);
  return std::unique_ptr<PosixBacking>(
      new PosixBacking(std::move(root), std::move(at_open), io, stats, root_dir, on_disconnect));
}

PosixBacking::PosixBacking(std::shared_ptr<const RootDir> root, RootAtOpen at_open, IoOptions io,
                           Stats* stats, std::string root_path, OnDisconnect on_disconnect)
    : root_path_(std::move(root_path)),
      root_at_open_(std::move(at_open)),
      on_disconnect_(on_disconnect),
      root_(std::move(root)),
      drop_pages_(io.pages == IoOptions::Pages::kDrop),
      io_(io, stats) {}

bool StoreUnreachable(const Status& s) {
  return s.code() == Code::kTimedOut || s.code() == Code::kDisconnected ||
         s.code() == Code::kUnreachable;
}

std::shared_ptr<const PosixBacking::RootDir> PosixBacking::Root() const {
  std::lock_guard lock(root_mu_);
  return root_;
}

template <typename T>
Result<T> PosixBacking::Note(Result<T> r) const {
  if (r.ok()) return r;
  const Status& s = r.status();
  if (s.code() == Code::kDisconnected) Reopen(s);
  // Faults of the store itself: a failed system call (os_errno() set) whose code is kIoError or
  // kStale. Answers about a file (kNotFound, kPermissionDenied...) and failures that are not
  // the store's (a read that raced a write, a deadline) are not logged.
  const bool fault = s.code() == Code::kIoError || s.code() == Code::kStale;
  if (fault && s.os_errno() != 0) {
    if (uint64_t more = 0; fault_log_.Allow(&more)) {
      LogWarn("backing store: {}{}", r.status().message(),
              more ? fmt::format(" ({} more since the last line)", more) : "");
    }
  }
  return r;
}

void PosixBacking::Reopen(const Status& cause) const {
  if (on_disconnect_ != OnDisconnect::kReopen) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  {
    std::lock_guard lock(root_mu_);
    if (now - last_reopen_ns_ < 1'000'000'000) return;
    last_reopen_ns_ = now;
  }
  // The open itself may hang on whatever is mounted there now: an I/O call with its deadline.
  auto r = io_.Run<Fd>("", [path = root_path_](IoProgress&) -> Result<Fd> {
    Fd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0) return Status::FromErrno(errno, "dataset directory '" + path + "'");
    struct stat st;
    if (fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "dataset directory");
    return fd;
  });
  std::lock_guard lock(root_mu_);
  if (!r.ok()) {
    if (!reopen_logged_) {
      reopen_logged_ = true;
      LogError("backing store disconnected ({}); reopening {} failed: {}; retrying",
               cause.message(), root_path_, r.status().message());
    }
    return;
  }
  root_ = std::make_shared<const RootDir>(r.value().release());
  reopen_logged_ = false;
  LogWarn("backing store disconnected ({}); reopened {}", cause.message(), root_path_);
}

PosixBacking::~PosixBacking() { io_.Stop(); }

void PosixBacking::Stop() { io_.Stop(); }

// Each call below copies what it uses (the root, the path) into the closure run on the I/O
// thread: an abandoned call may run on after its caller, and this object, are gone.

void Backing::LstatMany(std::vector<std::string>* paths, std::vector<struct stat>* st,
                        std::vector<Status>* status) const {
  st->assign(paths->size(), {});
  status->assign(paths->size(), Status::Ok());
  for (size_t i = 0; i < paths->size(); ++i) (*status)[i] = Lstat((*paths)[i], &(*st)[i]);
}

void PosixBacking::LstatMany(std::vector<std::string>* paths, std::vector<struct stat>* st,
                             std::vector<Status>* status) const {
  LstatManyAs(paths, st, status, nullptr);
}

void PosixBacking::LstatManyAs(std::vector<std::string>* paths_in, std::vector<struct stat>* st,
                               std::vector<Status>* status, const AsIdentity* as_in) const {
  struct Out {
    std::vector<struct stat> st;
    std::vector<Status> status;
    std::vector<std::string> paths;  // given back
  };
  const size_t n = paths_in->size();
  // The paths move into the call (an abandoned call may run on after its caller returned)
  // and come back with its result.
  auto r = Note(io_.Run<std::shared_ptr<Out>>(
      std::string("\0stat batch", 11),
      [root = Root(), paths = std::move(*paths_in), as = as_in ? *as_in : AsIdentity()](
          IoProgress& progress) mutable -> Result<std::shared_ptr<Out>> {
        auto out = std::make_shared<Out>();
        const Status switched = MaybeAs(as, [&]() -> Status {
          StatBatch(root->fd, paths, static_cast<bool>(as), &out->st, &out->status, progress);
          return Status::Ok();
        });
        if (!switched.ok()) return switched;  // the identity could not be taken
        if (as) {
          for (Status& st_i : out->status) st_i = Unseen(std::move(st_i));
        }
        out->paths = std::move(paths);
        return out;
      }));
  if (!r.ok()) {
    st->assign(n, {});
    status->assign(n, r.status());
    return;
  }
  *st = std::move(r.value()->st);
  *status = std::move(r.value()->status);
  *paths_in = std::move(r.value()->paths);
}

Status PosixBacking::Lstat(const std::string& path, struct stat* st) const {
  return LstatAs(path, st, nullptr);
}

Status PosixBacking::LstatAs(const std::string& path, struct stat* st,
                             const AsIdentity* as_in) const {
  auto r = Note(io_.Run<struct stat>(
      path, [ root = Root(), path,
              as = as_in ? *as_in : AsIdentity() ](IoProgress&) -> Result<struct stat> {
        struct stat s;
        if (path.empty()) {
          if (fstat(root->fd, &s) != 0) return Status::FromErrno(errno, "stat of dataset root");
          return s;
        }
        const Status done = MaybeAs(as, [&]() -> Status {
          Fd fd(OpenBeneath(root->fd, path, O_PATH));
          if (fd.get() < 0) return Status::FromErrno(errno, path);
          if (fstat(fd.get(), &s) != 0) return Status::FromErrno(errno, path);
          if (int err = as ? ReadableAs(fd.get(), "", s) : 0; err != 0) {
            return Status::FromErrno(err, path);
          }
          return Status::Ok();
        });
        if (!done.ok()) return done;
        return s;
      }));
  if (!r.ok()) return r.status();
  *st = r.value();
  return Status::Ok();
}

Result<std::string> PosixBacking::ReadLink(const std::string& path) const {
  return ReadLinkAs(path, nullptr);
}

Result<std::string> PosixBacking::ReadLinkAs(const std::string& path,
                                             const AsIdentity* as_in) const {
  return Note(io_.Run<std::string>(path,
                                   [root = Root(), path, as = as_in ? *as_in : AsIdentity()](
                                       IoProgress&) -> Result<std::string> {
                                     std::string target(PATH_MAX, '\0');
                                     const Status done = MaybeAs(as, [&]() -> Status {
                                       Fd fd(OpenBeneath(root->fd, path, O_PATH));
                                       if (fd.get() < 0) return Status::FromErrno(errno, path);
                                       ssize_t n =
                                           readlinkat(fd.get(), "", target.data(), target.size());
                                       if (n < 0) return Status::FromErrno(errno, path);
                                       target.resize(static_cast<size_t>(n));
                                       return Status::Ok();
                                     });
                                     if (!done.ok()) return done;
                                     return target;
                                   }));
}

// PosixBacking::AsCaller's view: the lookups of the backing under an identity, no reads.
class CallerBacking final : public Backing {
 public:
  CallerBacking(const PosixBacking& backing, PosixBacking::AsIdentity as)
      : backing_(backing), as_(std::move(as)) {}
  Status Lstat(const std::string& path, struct stat* st) const override {
    return backing_.LstatAs(path, st, &as_);
  }
  void LstatMany(std::vector<std::string>* paths, std::vector<struct stat>* st,
                 std::vector<Status>* status) const override {
    backing_.LstatManyAs(paths, st, status, &as_);
  }
  Result<std::string> ReadLink(const std::string& path) const override {
    return backing_.ReadLinkAs(path, &as_);
  }
  Result<BlobPtr> Read(const std::string& path, ByteRange) const override {
    return Status::FromErrno(EACCES, path + ": not read through a caller's view");
  }

 private:
  const PosixBacking& backing_;
  const PosixBacking::AsIdentity as_;
};

std::shared_ptr<const Backing> PosixBacking::AsCaller(AsIdentity as) const {
  return std::make_shared<const CallerBacking>(*this, std::move(as));
}

Result<BlobPtr> PosixBacking::Read(const std::string& path, ByteRange range) const {
  return Note(io_.Run<BlobPtr>(
      path,
      [root = Root(), path, range, drop = drop_pages_](IoProgress& progress) -> Result<BlobPtr> {
        return ReadSettled(root->fd, path, range, progress, drop);
      }));
}

Result<PosixBacking::Opened> PosixBacking::OpenFile(const std::string& path,
                                                    const FirstRead* first) const {
  std::optional<FirstRead> read;
  if (first) read = *first;
  auto r = Note(io_.Run<Opened>(
      path,
      [root = Root(), path, post = io_.poster(), read](IoProgress& progress) -> Result<Opened> {
        Fd fd(OpenBeneath(root->fd, path, O_RDONLY | O_NONBLOCK));
        if (fd.get() < 0) return Status::FromErrno(errno, path);
        Opened out;
        if (fstat(fd.get(), &out.st) != 0) return Status::FromErrno(errno, path);
        if (!S_ISREG(out.st.st_mode)) {
          return Status::Error(Code::kInvalidArgument, path + ": not a regular file");
        }
        if (read) {  // failed or changed: left to the caller's own read, which reports it
          auto bytes =
              PreadAtVersion(fd.get(), path, read->n, read->off, VersionOf(out.st), progress);
          if (bytes.ok() && !bytes.value().changed) {
            out.first = Bytes{std::move(bytes.value().data), bytes.value().size};
          }
        }
        out.handle = StoreHandle::Make(fd.release(), nullptr, post);
        return out;
      }));
  return r;
}

Result<PosixBacking::Opened> PosixBacking::OpenDir(const std::string& path) const {
  auto r = Note(io_.Run<Opened>(
      path, [root = Root(), path, post = io_.poster()](IoProgress&) -> Result<Opened> {
        // O_DIRECTORY fails with ENOTDIR before a FIFO or device is opened.
        Fd fd(OpenBeneath(root->fd, path, O_RDONLY | O_DIRECTORY));
        if (fd.get() < 0) return Status::FromErrno(errno, path);
        Opened out;
        if (fstat(fd.get(), &out.st) != 0) return Status::FromErrno(errno, path);
        DIR* dir = fdopendir(fd.get());
        if (!dir) return Status::FromErrno(errno, path);
        const int owned = fd.release();  // the stream owns it now
        out.handle = StoreHandle::Make(owned, dir, post);
        return out;
      }));
  return r;
}

Result<PosixBacking::Bytes> PosixBacking::ReadAt(const StoreHandlePtr& h, const std::string& path,
                                                 size_t n, uint64_t off) const {
  return Note(io_.Run<Bytes>(path, [h, path, n, off](IoProgress& progress) -> Result<Bytes> {
    Bytes out;
    out.data = std::make_unique_for_overwrite<char[]>(n == 0 ? 1 : n);
    while (out.size < n) {
      const ssize_t r = pread(h->fd(), out.data.get() + out.size, n - out.size,
                              static_cast<off_t>(off + out.size));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::FromErrno(errno, path);
      if (r == 0) break;
      out.size += static_cast<size_t>(r);
      progress.Touch();
    }
    return out;
  }));
}

Result<PosixBacking::Bytes> PosixBacking::ReadAtVersion(const StoreHandlePtr& h,
                                                        const std::string& path, size_t n,
                                                        uint64_t off,
                                                        const FileVersion& version) const {
  // A change is an answer about the file, not a fault of the store: passed past Note (which
  // logs ESTALE from the store itself) as `changed`.
  auto r = Note(io_.Run<VersionBytes>(
      path, [h, path, n, off, version](IoProgress& progress) -> Result<VersionBytes> {
        return PreadAtVersion(h->fd(), path, n, off, version, progress);
      }));
  if (!r.ok()) return r.status();
  if (r.value().changed) return ChangedSinceOpen(path);
  return Bytes{std::move(r.value().data), r.value().size};
}

Status PosixBacking::Fstat(const StoreHandlePtr& h, const std::string& path,
                           struct stat* st) const {
  auto r = Note(io_.Run<struct stat>(
      path, [ h, path ](IoProgress&) -> Result<struct stat> {
        struct stat s;
        if (fstat(h->fd(), &s) != 0) return Status::FromErrno(errno, path);
        return s;
      }));
  if (!r.ok()) return r.status();
  *st = r.value();
  return Status::Ok();
}

Result<std::vector<PosixBacking::DirEntry>> PosixBacking::ReadDir(const StoreHandlePtr& h,
                                                                  const std::string& path,
                                                                  off_t off, size_t bytes) const {
  using Entries = std::vector<DirEntry>;
  // The stream is used by one call at a time: a call abandoned inside readdir() makes the next
  // one on its key fail at once (IoExecutor), which the root's key "" would not.
  const std::string key = path.empty() ? "." : path;
  return Note(io_.Run<Entries>(key, [h, path, off, bytes](IoProgress&) -> Result<Entries> {
    DIR* dir = h->dir();
    if (off != h->dir_pos) {
      if (off == 0) {
        rewinddir(dir);
      } else {
        seekdir(dir, off);
      }
      h->dir_pos = off;
    }
    Entries out;
    size_t used = 0;
    for (;;) {
      errno = 0;
      struct dirent* d = readdir(dir);
      if (!d) {
        if (errno != 0 && out.empty()) return Status::FromErrno(errno, path);
        break;
      }
      h->dir_pos = telldir(dir);
      out.push_back({d->d_name, d->d_ino, d->d_type, h->dir_pos});
      // A FUSE directory entry: 24 bytes and the name, 8-byte aligned.
      used += (24 + out.back().name.size() + 7) & ~size_t{7};
      if (used >= bytes) break;
    }
    return out;
  }));
}

Result<std::string> PosixBacking::Xattr(const std::string& path, const char* name) const {
  // The name is copied: the call may outlive this caller.
  std::optional<std::string> wanted;
  if (name) wanted = name;
  return Note(
      io_.Run<std::string>(path, [root = Root(), path, wanted](IoProgress&) -> Result<std::string> {
        Fd fd(OpenBeneath(root->fd, path, O_PATH));
        if (fd.get() < 0) return Status::FromErrno(errno, path);
        struct stat st;
        if (fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, path);
        if (S_ISLNK(st.st_mode)) {
          return wanted ? Result<std::string>(Status::FromErrno(ENODATA, path)) : std::string();
        }
        return FdXattr(fd.get(), wanted ? wanted->c_str() : nullptr, path);
      }));
}

Result<int> PosixBacking::WatchDir(std::shared_ptr<const int> inotify, const std::string& path,
                                   uint32_t mask) const {
  return Note(io_.Run<int>(path, [root = Root(), inotify, path, mask](IoProgress&) -> Result<int> {
    Fd fd(OpenBeneath(root->fd, path, O_PATH | O_DIRECTORY));
    if (fd.get() < 0) return Status::FromErrno(errno, path);
    const std::string proc = "/proc/self/fd/" + std::to_string(fd.get());
    const int wd = inotify_add_watch(*inotify, proc.c_str(), mask | IN_ONLYDIR);
    if (wd < 0) return Status::FromErrno(errno, path);
    return wd;
  }));
}

Status PosixBacking::CheckAccess(const std::string& path, int mask, AsIdentity as) const {
  auto r = Note(io_.Run<bool>(path, [root = Root(), path, mask, as = std::move(as)](IoProgress&) {
    Status s = as([&]() -> Status {
      Fd fd(OpenBeneath(root->fd, path, O_PATH));
      if (fd.get() < 0) return Status::FromErrno(errno, path);
      if (syscall(SYS_faccessat2, fd.get(), "", mask, AT_EACCESS | AT_EMPTY_PATH) != 0) {
        return Status::FromErrno(errno, path);
      }
      return Status::Ok();
    });
    return s.ok() ? Result<bool>(true) : Result<bool>(s);
  }));
  return r.status();
}

Status PosixBacking::StatFs(struct statvfs* st) const {
  auto r = Note(io_.Run<struct statvfs>(
      "", [root = Root()](IoProgress&) -> Result<struct statvfs> {
        struct statvfs s;
        if (fstatvfs(root->fd, &s) != 0) return Status::FromErrno(errno, "statfs of dataset");
        return s;
      }));
  if (!r.ok()) return r.status();
  *st = r.value();
  return Status::Ok();
}

}  // namespace clairfs
