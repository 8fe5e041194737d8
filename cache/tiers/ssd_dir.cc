#include "cache/tiers/ssd_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

namespace clairfs {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxLinkDepth = 8;

std::string Mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

Status Unsafe(const std::string& what) {
  return Status::Error(Code::kInvalidArgument, "unsafe SSD cache directory: " + what);
}

// One existing ancestor (a directory, not a link): owned by root or us, and nobody else can
// create, rename or remove entries in it.
Status CheckAncestorNode(const std::string& path, const struct stat& st, const std::string& dir) {
  const uid_t me = geteuid();
  if (!S_ISDIR(st.st_mode)) {
    return Unsafe("'" + path + "' (an ancestor of '" + dir + "') is not a directory");
  }
  if (st.st_uid != 0 && st.st_uid != me) {
    return Unsafe("its ancestor '" + path + "' is owned by uid " + std::to_string(st.st_uid) +
                  ", neither root nor the daemon's user (uid " + std::to_string(me) +
                  "), who could replace '" + dir +
                  "'; choose a directory below one owned by root or by you (cache.tiers[].dir)");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    return Unsafe("its ancestor '" + path + "' (mode " + Mode(st.st_mode) +
                  ") is writable by group or others without the sticky bit, so they could "
                  "replace '" +
                  dir + "'; run: chmod go-w '" + path +
                  "' (or chmod +t), or choose another "
                  "directory (cache.tiers[].dir)");
  }
  return Status::Ok();
}

// Checks "/" and every existing component of p (absolute, normal) as an ancestor; stops at the
// first missing one (created later by us, mode 0700). A component that is a symbolic link must
// be owned by root or us; its target is checked in turn.
Status CheckAncestors(const fs::path& p, const std::string& dir, int depth) {
  if (depth > kMaxLinkDepth) return Unsafe("too many symbolic links above '" + dir + "'");
  struct stat st;
  if (lstat("/", &st) != 0) return Status::FromErrno(errno, "stat /");
  if (Status s = CheckAncestorNode("/", st, dir); !s.ok()) return s;
  fs::path cur = "/";
  for (const fs::path& comp : p.relative_path()) {
    cur /= comp;
    if (lstat(cur.c_str(), &st) != 0) {
      if (errno == ENOENT) return Status::Ok();
      return Status::FromErrno(errno, "stat '" + cur.string() + "'");
    }
    if (S_ISLNK(st.st_mode)) {
      if (st.st_uid != 0 && st.st_uid != geteuid()) {
        return Unsafe("its ancestor '" + cur.string() + "' is a symbolic link owned by uid " +
                      std::to_string(st.st_uid) +
                      ", neither root nor the daemon's user; choose another directory "
                      "(cache.tiers[].dir)");
      }
      char buf[PATH_MAX];
      if (!realpath(cur.c_str(), buf)) {
        return Status::FromErrno(errno, "resolve '" + cur.string() + "' (above '" + dir + "')");
      }
      if (Status s = CheckAncestors(buf, dir, depth + 1); !s.ok()) return s;
      if (lstat(buf, &st) != 0) return Status::FromErrno(errno, std::string("stat ") + buf);
      cur = buf;
    }
    if (Status s = CheckAncestorNode(cur.string(), st, dir); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

std::string NormalCacheDir(const std::string& dir) {
  std::error_code ec;
  fs::path abs = fs::absolute(dir, ec);
  if (ec) abs = dir;
  std::string s = abs.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

Status SecureCacheDir(const std::string& dir, std::vector<std::string>* created) {
  const fs::path p(dir);
  if (!p.is_absolute() || p.lexically_normal() != p || p == p.root_path()) {
    return Status::Error(Code::kInvalidArgument,
                         "SSD cache directory '" + dir + "' must be an absolute normal path");
  }
  if (Status s = CheckAncestors(p.parent_path(), dir, 0); !s.ok()) return s;
  // Missing components, from the top: each is created 0700 (whatever the umask) by us.
  fs::path cur = "/";
  for (const fs::path& comp : p.relative_path()) {
    cur /= comp;
    if (mkdir(cur.c_str(), 0700) == 0) {
      if (created) created->push_back(cur.string());
      if (chmod(cur.c_str(), 0700) != 0) {
        return Status::FromErrno(errno, "chmod 0700 '" + cur.string() + "'");
      }
    } else if (errno != EEXIST) {
      return Status::FromErrno(errno,
                               "cannot create the SSD cache directory '" + cur.string() + "'");
    }
  }
  // Again, now that every ancestor exists: one created by someone else between the check
  // above and our mkdir (possible in a sticky directory such as /var/tmp) is refused here.
  if (Status s = CheckAncestors(p.parent_path(), dir, 0); !s.ok()) return s;
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, "stat '" + dir + "'");
  const uid_t me = geteuid();
  if (S_ISLNK(st.st_mode)) {
    return Unsafe("'" + dir +
                  "' is a symbolic link; it must be a directory of its own: remove the link "
                  "(rm '" +
                  dir + "') or choose another directory (cache.tiers[].dir)");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Unsafe("'" + dir +
                  "' exists and is not a directory; remove it or choose another "
                  "directory (cache.tiers[].dir)");
  }
  if (st.st_uid != me) {
    return Unsafe("'" + dir + "' is owned by uid " + std::to_string(st.st_uid) +
                  ", not by the daemon's user (uid " + std::to_string(me) +
                  "); another user may have planted it: remove it (rm -r '" + dir +
                  "') or choose another directory (cache.tiers[].dir)");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return Unsafe("'" + dir + "' (mode " + Mode(st.st_mode) +
                  ") is writable by group or others, who could plant or replace cache files; "
                  "remove it (rm -r '" +
                  dir + "') or choose another directory (cache.tiers[].dir)");
  }
  if ((st.st_mode & 07777) != 0700 && chmod(dir.c_str(), 0700) != 0) {
    return Status::FromErrno(errno, "chmod 0700 '" + dir + "'");
  }
  return Status::Ok();
}

Result<CacheDirLock> CacheDirLock::Acquire(const std::string& dir) {
  const std::string path = dir + "/clairfs.lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::FromErrno(errno, "cannot open the lock file '" + path + "'");
  CacheDirLock lock(fd);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    return Unsafe("the lock file '" + path +
                  "' is not a regular file of the daemon's user; "
                  "remove it");
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return Status::FromErrno(errno, "flock '" + path + "'");
    // The holder writes its pid just after taking the lock: a start racing it may find the
    // file still empty, so it looks again for a moment (bounded; the pid is only for the
    // message).
    long pid = 0;
    for (int attempt = 0; attempt < 20 && pid <= 0; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      char buf[32] = {};
      const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
      pid = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
    }
    return Status::Error(Code::kLocked,
                         "SSD cache directory '" + dir + "' is in use by another clairfs" +
                             (pid > 0 ? " (pid " + std::to_string(pid) + ")" : "") +
                             "; stop it first, or give this daemon another directory "
                             "(cache.tiers[].dir)",
                         EWOULDBLOCK);
  }
  lock.RecordPid();
  return lock;
}

long LockHolderPid(const std::string& dir) {
  const std::string path = dir + "/clairfs.lock";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return 0;
  char buf[32] = {};
  struct stat st;
  const ssize_t n =
      fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
  close(fd);
  return n > 0 ? std::strtol(buf, nullptr, 10) : 0;
}

CacheDirLock& CacheDirLock::operator=(CacheDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

CacheDirLock::~CacheDirLock() {
  if (fd_ >= 0) close(fd_);
}

void CacheDirLock::RecordPid() const {
  if (fd_ < 0) return;
  // Fixed width, written over the old pid in one pwrite: the file is never seen empty or
  // half-written after the first record (a daemon records again after it forks).
  char pid[24];
  const int n = std::snprintf(pid, sizeof(pid), "%-20ld\n", static_cast<long>(getpid()));
  (void)!pwrite(fd_, pid, static_cast<size_t>(n), 0);  // informational only
}

}  // namespace clairfs
