// The SSD tier's directory on a shared node. It holds copies of files the daemon (often root)
// may read and other users may not, so it must be the daemon user's alone:
//  - the directory is created with mode 0700 (missing ancestors too), owned by the daemon's
//    effective user; an existing one is refused when it is a symbolic link, not a directory,
//    owned by another user, or writable by group or others; one that is merely readable by
//    others is narrowed to 0700;
//  - every ancestor up to / must be owned by root or the daemon's user and not writable by
//    group or others unless sticky (as /tmp and /var/tmp are); an ancestor that is a symbolic
//    link must be owned by root or the daemon's user, and its target is checked the same way;
//  - one daemon at a time: an exclusive flock() on <dir>/clairfs.lock.
// Every refusal names the path, what is wrong and how to fix it.
#pragma once

#include <string>
#include <vector>

#include "cache/base/status.h"

namespace clairfs {

// dir made absolute and lexically normal (no ".", "..", or trailing slash).
std::string NormalCacheDir(const std::string& dir);

// Checks the ancestors of dir (normal, absolute), creates what is missing with mode 0700, and
// checks dir itself, as above. kInvalidArgument with the reason when dir is not safe to use.
// created (if given) receives the directories this call made, outermost first (dir itself
// last when it was made), also when it fails after making some: only those may be taken back.
Status SecureCacheDir(const std::string& dir, std::vector<std::string>* created = nullptr);

// The pid recorded in <dir>/clairfs.lock by its last holder (see RecordPid); 0 if none. Says
// nothing about whether that process still holds the lock.
long LockHolderPid(const std::string& dir);

// An exclusive flock() on <dir>/clairfs.lock (opened O_CLOEXEC|O_NOFOLLOW, mode 0600), held
// while the object lives. The lock belongs to the open file description, so a child that
// inherits the descriptor across fork() keeps holding it after the parent exits.
class CacheDirLock {
 public:
  // kLocked, naming the holder's pid, if another process (or another CacheDirLock in
  // this one) holds the lock.
  static Result<CacheDirLock> Acquire(const std::string& dir);
  CacheDirLock() = default;
  CacheDirLock(CacheDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  CacheDirLock& operator=(CacheDirLock&& other) noexcept;
  ~CacheDirLock();
  bool held() const { return fd_ >= 0; }
  // Writes the calling process's pid into the lock file (shown to a second daemon); called
  // again by a child after a daemonizing fork.
  void RecordPid() const;

 private:
  explicit CacheDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace clairfs
