// Backing: the original dataset files. Everything clairfs serves comes, at first, from here.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/backing/io_executor.h"
#include "cache/backing/store_handle.h"
#include "cache/base/log_limit.h"
#include "cache/base/object.h"
#include "cache/base/object_key.h"
#include "cache/base/stats.h"
#include "cache/base/status.h"

namespace clairfs {

// Paths are canonical and relative to the dataset root: no leading '/', no "." or ".."
// components, "" names the root. Implementations never follow a symlink in any component,
// so no call can leave the tree. All methods are thread-safe.
class Backing {
 public:
  virtual ~Backing() = default;
  // stat of the object at path itself (a symlink is reported as a symlink).
  virtual Status Lstat(const std::string& path, struct stat* st) const = 0;
  // Lstat of each of *paths: (*st)[i] and (*status)[i] for (*paths)[i]. Implementations may
  // batch the calls (one wait for many stats); by default one Lstat each. *paths may be handed
  // to the call rather than copied: it is given back as it was, except when the call is
  // abandoned at its deadline (then every status is that failure and *paths may be empty).
  virtual void LstatMany(std::vector<std::string>* paths, std::vector<struct stat>* st,
                         std::vector<Status>* status) const;
  // Target of the symlink at path.
  virtual Result<std::string> ReadLink(const std::string& path) const = 0;
  // The bytes of range (ByteRange::Whole(): the whole file) of the regular file at path, with
  // the file's version and their hash. kInvalidArgument if it is not a regular file or the
  // range does not lie inside it; kIoError if it changed while read.
  virtual Result<BlobPtr> Read(const std::string& path, ByteRange range) const = 0;
};

// The dataset on a local or network file system, reached through a directory descriptor opened
// before the mount, so it works when clairfs is mounted over the dataset path itself.
//
// Every system call on the dataset runs on an IoExecutor (cache/backing/io_executor.h) and is
// waited for with IoOptions::timeout: a call that does not return in time fails with kTimedOut and
// is abandoned, so a stalled store or one stuck file costs a caller at most the timeout, and a path
// with a stuck call fails at once. Non-regular files are never opened for reading in a way that can
// block (a FIFO swapped in for a file): files are opened with O_NONBLOCK and refused with
// kInvalidArgument unless fstat says they are regular. The I/O threads start at the first call:
// make none before a fork (daemonizing), which they would not survive. Whether s says that the
// backing store did not answer (a deadline passed: kTimedOut; a dead FUSE or network file system:
// kDisconnected, kUnreachable), rather than answering about the file.
bool StoreUnreachable(const Status& s);

// The dataset root as Open found it: its attributes and POSIX ACLs, read on the calling thread
// before any I/O thread exists (the mount's first requests, the kernel's INIT included, then
// need no answer from the store). An ACL the root does not have is an ENODATA status.
struct RootAtOpen {
  struct stat st {};
  Result<std::string> acl_access = Status::Error(Code::kUnavailable, "");
  Result<std::string> acl_default = Status::Error(Code::kUnavailable, "");
};

class PosixBacking final : public Backing {
 public:
  // What to do when a call fails with kDisconnected (ENOTCONN, ECONNABORTED: a FUSE or network
  // file system that died). kReopen: open root_dir again by its path, at most once a
  // second, so a store remounted at the same path is read again. Never when clairfs is mounted
  // over root_dir itself: the path then leads to clairfs's own mount.
  enum class OnDisconnect { kKeep, kReopen };
  // Opens root_dir; fails if it is not a readable directory. stats (optional) must outlive the
  // backing: errors.backing_timeout counts calls that failed for their deadline.
  static Result<std::unique_ptr<PosixBacking>> Open(
      const std::string& root_dir, IoOptions io = {}, Stats* stats = nullptr,
      OnDisconnect on_disconnect = OnDisconnect::kKeep);
  ~PosixBacking() override;
  PosixBacking(const PosixBacking&) = delete;
  PosixBacking& operator=(const PosixBacking&) = delete;

  Status Lstat(const std::string& path, struct stat* st) const override;
  // All on one I/O thread, as one call whose deadline each stat renews: a manifest of a
  // million paths costs a few waits, not a million.
  void LstatMany(std::vector<std::string>* paths, std::vector<struct stat>* st,
                 std::vector<Status>* status) const override;
  Result<std::string> ReadLink(const std::string& path) const override;
  // Reads in steps, each of which must complete within the timeout. The version is taken by
  // fstat before and after the read; if it differs, or the file grew, or it was modified at or
  // after the moment the read began (timestamps may be too coarse to show a later write), the
  // read is tried once more, then fails with kIoError "changed while being read". So a blob
  // always holds exactly the bytes of the version it names.
  Result<BlobPtr> Read(const std::string& path, ByteRange range) const override;

  // Up to n bytes at off of h's file (fewer at its end), read on an I/O thread; path names the
  // file (the executor's key, errors). Each step of a long read renews the deadline.
  struct Bytes {
    std::unique_ptr<char[]> data;
    size_t size = 0;
  };
  // A file or directory of the dataset opened for a handle of the mount, with the attributes
  // of exactly what was opened (fstat), in one call on an I/O thread; no symlink is followed.
  // A file must be regular (else kInvalidArgument) and is opened O_NONBLOCK, so that a FIFO
  // swapped in for it never blocks; a directory is opened as a stream.
  // A first read, when one is asked (OpenFile's `first`), is made in the same call: its bytes
  // are exactly those ReadAtVersion(handle, path, first->n, first->off, VersionOf(st)) would
  // give, or absent when that read would fail or find the file changed (the caller then reads
  // as it would have, and gets that read's answer). One wait on the I/O threads instead of two.
  struct FirstRead {
    uint64_t off = 0;
    size_t n = 0;
  };
  struct Opened {
    StoreHandlePtr handle;
    struct stat st {};
    std::optional<Bytes> first;  // the first read's bytes, when asked and of that version
  };
  Result<Opened> OpenFile(const std::string& path, const FirstRead* first = nullptr) const;
  Result<Opened> OpenDir(const std::string& path) const;
  Result<Bytes> ReadAt(const StoreHandlePtr& h, const std::string& path, size_t n,
                       uint64_t off) const;
  // The same, from a descriptor of the file at `version`, all in one call on an I/O thread:
  // exactly the bytes [off, off+n) clipped to version.size, all of that version, or kStale
  // (the kernel gets ESTALE; "changed since it was opened") when they may not be. Proof of a
  // change: fewer bytes than the version holds there (truncated: never padded), an fstat after the
  // read that differs from version, or a version modified too recently to rule out a write in
  // progress (its stamps were set before it copied), which is read again once the clock has
  // passed it (a wait of at most ~10 ms, only for files modified that recently).
  Result<Bytes> ReadAtVersion(const StoreHandlePtr& h, const std::string& path, size_t n,
                              uint64_t off, const FileVersion& version) const;
  // fstat of h's descriptor, on an I/O thread.
  Status Fstat(const StoreHandlePtr& h, const std::string& path, struct stat* st) const;
  // The entries of h's directory from position off (a cookie of a `next` returned before; 0:
  // its start), as many as fill about `bytes` of FUSE directory entries (at least one), on an
  // I/O thread; none at its end.
  struct DirEntry {
    std::string name;
    ino_t ino = 0;
    unsigned char type = DT_UNKNOWN;
    off_t next = 0;  // the position after this entry
  };
  Result<std::vector<DirEntry>> ReadDir(const StoreHandlePtr& h, const std::string& path, off_t off,
                                        size_t bytes) const;
  // Extended attribute name (nullptr: the list of names) of the object at path, read on an
  // I/O thread (FdXattr's rules); a symlink has none (ENODATA, an empty list).
  Result<std::string> Xattr(const std::string& path, const char* name) const;
  Status StatFs(struct statvfs* st) const;
  // Adds an inotify watch for mask on the directory at path to the inotify instance *inotify
  // (kept open by the call, which may outlive its caller), through a descriptor opened beneath
  // the root: never a path that leads elsewhere or through a mount over the dataset. The watch
  // descriptor; a path that is not a directory fails (ENOTDIR).
  Result<int> WatchDir(std::shared_ptr<const int> inotify, const std::string& path,
                       uint32_t mask) const;

  // Runs a check under another identity: calls its argument (which does the check) with that
  // identity in force on the current thread, and restores the thread's own before returning.
  using AsIdentity = std::function<Status(const std::function<Status()>&)>;
  // Whether the identity that `as` takes may reach path from the dataset root (search
  // permission on every directory on the way, no symlink followed) and access the object with
  // mask (R_OK, X_OK...). Runs on an I/O thread with the deadline of every call: the identity
  // switch is per thread, so it is made there, around the walk. kPermissionDenied if refused.
  Status CheckAccess(const std::string& path, int mask, AsIdentity as) const;

  // A view of the dataset for the path checks of a manifest written by another user
  // (docs/permissions.md, "Registration with the writer's rights"): its Lstat, LstatMany and
  // ReadLink run as this object's, each on an I/O thread that takes the identity of `as`
  // around the call (a LstatMany batch: once around the batch). So every directory from the
  // root down needs that identity's search permission, and a regular file its read permission
  // too. What the identity may not see (kPermissionDenied: EACCES, EPERM) fails as a missing
  // file does (kNotFound, ENOENT, the same message), so that a writer learns nothing of names
  // it could not stat. Read is refused (kPermissionDenied, EACCES): nothing is fetched through
  // a view. The view refers to this object, which must outlive it.
  std::shared_ptr<const Backing> AsCaller(AsIdentity as) const;

  // The root's attributes and ACLs as read by Open (see RootAtOpen). Never changes.
  const RootAtOpen& root_at_open() const { return root_at_open_; }

  // Fails every pending and later call with kUnavailable at once; never waits for a stuck call.
  void Stop();
  // I/O threads not exited: after Stop(), those still inside a call on the store.
  int LiveThreads() const { return io_.threads(); }
  // Calls that waited on the I/O threads (IoExecutor::waited_calls).
  uint64_t WaitedCalls() const { return io_.waited_calls(); }

 private:
  struct RootDir;
  PosixBacking(std::shared_ptr<const RootDir> root, RootAtOpen at_open, IoOptions io, Stats* stats,
               std::string root_path, OnDisconnect on_disconnect);
  std::shared_ptr<const RootDir> Root() const;
  // Passes r through; logs a fault of the store itself (a failed system call with kIoError or
  // kStale: EIO, ESTALE..., rate-limited); a kDisconnected store first gets its root reopened
  // (OnDisconnect).
  template <typename T>
  Result<T> Note(Result<T> r) const;
  // Lstat, LstatMany and ReadLink, under identity *as when as is not null (AsCaller).
  friend class CallerBacking;
  Status LstatAs(const std::string& path, struct stat* st, const AsIdentity* as) const;
  void LstatManyAs(std::vector<std::string>* paths, std::vector<struct stat>* st,
                   std::vector<Status>* status, const AsIdentity* as) const;
  Result<std::string> ReadLinkAs(const std::string& path, const AsIdentity* as) const;
  void Reopen(const Status& cause) const;

  const std::string root_path_;
  const RootAtOpen root_at_open_;
  const OnDisconnect on_disconnect_;
  // Lock order: a leaf. Guards root_ (swapped by Reopen) and reopen_state_.
  mutable std::mutex root_mu_;
  // Shared with calls still running on I/O threads: the descriptor outlives an abandoned call.
  mutable std::shared_ptr<const RootDir> root_;
  mutable int64_t last_reopen_ns_ = 0;  // steady clock; under root_mu_
  mutable bool reopen_logged_ = false;  // "still disconnected" logged in this episode
  mutable LogLimit fault_log_;          // device faults (EIO...) logged, rate-limited
  const bool drop_pages_;               // IoOptions::pages: Read drops what it read
  mutable IoExecutor io_;
};

}  // namespace clairfs
