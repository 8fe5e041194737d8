// ClairFs: the thin FUSE low-level adapter of the dataset. Each request becomes one call on the
// FUSE-free core (fs/core/dataset_core.h: namespace, identity, access, binding), whose answer it
// replies; every failure goes to the kernel through ToErrno (fs/status_errno.h), and the only
// errnos written here are the protocol's own (named constants in clairfs_fs.cc). It implements
// the core's KernelCache with the kernel's notifications, and wires the watch, the stats ahead
// and the revalidation (fs/clairfs_watch.cc). No exception leaves a callback.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <atomic>
#include <memory>
#include <string>

#include "cache/backing/backing.h"
#include "cache/backing/stat_ahead.h"
#include "cache/base/stats.h"
#include "cache/prefetch/prefetcher.h"
#include "fs/access.h"
#include "fs/backing_watch.h"
#include "fs/control.h"
#include "fs/core/dataset_core.h"
#include "fs/core/fs_options.h"
#include "fs/core/kernel_cache.h"
#include "fs/revalidate.h"

namespace clairfs {

class ClairFs final : public KernelCache {
 public:
  // All references must outlive the session. root_aliases are the absolute paths that name the
  // dataset root (dataset and mountpoint), for symlink checks. control_target: the absolute
  // path `.clairfs` leads to (the control mount, daemon/control_mount.h).
  ClairFs(PosixBacking& backing, Prefetcher& prefetcher, ControlPlane& control,
          AccessPolicy& access, Stats& stats, FsOptions options,
          std::vector<std::string> root_aliases, std::string control_target);
  // The operation table; the session's userdata must be this object.
  static const fuse_lowlevel_ops& Ops();
  // The session serving this object, for notifications to the kernel; set right after
  // fuse_session_new, before the session loop runs.
  void SetSession(fuse_session* se) { session_.store(se, std::memory_order_release); }
  // Starts what keeps the kernel's caches fresh, after any daemonizing fork and before the
  // prefetcher starts and the session loop runs: unless fuse.immutable, the revalidation
  // sweep (fs/revalidate.h, any open mode); with open_mode none, the watch of the backing store
  // (fs/backing_watch.h, fuse.watch_backing) and, with fuse.stat_ahead, the stats ahead of the
  // reads (cache/backing/stat_ahead.h), which the watch vouches for and which, unless immutable,
  // are compared with what the kernel was given. A failure is logged and leaves the rest going.
  // StopWatch: after the session loop and backing.Stop().
  void StartWatch();
  void StopWatch();

  // Request handlers (called through Ops()).
  void Init(fuse_conn_info* conn);
  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void Forget(fuse_ino_t ino, uint64_t n) { core_.Forget(ino, n); }
  void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void ReadLink(fuse_req_t req, fuse_ino_t ino);
  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  void Release(fuse_req_t req, fuse_file_info* fi);
  void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  void ReleaseDir(fuse_req_t req, fuse_file_info* fi);
  void StatFs(fuse_req_t req);
  void Access(fuse_req_t req, fuse_ino_t ino, int mask);
  void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
  void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size);

 private:
  struct DirHandle;
  // KernelCache (fs/core/kernel_cache.h), with fuse_lowlevel_notify_inval_inode. No-ops before
  // the session is set. InvalidateAttrs is sent from request handlers too (Open, READ): with
  // offset -1 the kernel only marks the inode's attributes stale (fuse_reverse_inval_inode
  // takes no inode or page lock), and neither a read-only open (Linux fuse_open locks the inode
  // only for an O_TRUNC open with writeback cache or DAX; O_TRUNC is refused, writeback cache
  // is off) nor a READ holds the inode lock while it waits for the reply, so it cannot
  // deadlock. Without dirty pages (this mount has none) libfuse documents that the
  // notification never blocks.
  void InvalidateAttrs(uint64_t node) override;
  bool DropPages(uint64_t node, uint64_t from) override;
  // From the watch's and the revalidation's threads (fs/clairfs_watch.cc): make the kernel
  // drop node id's attributes and cached ACLs, with its pages (contents) or not; or its entry
  // for name in directory node parent. No-ops before the session is set.
  void NotifyInode(uint64_t id, bool contents);
  void NotifyEntry(uint64_t parent, const std::string& name);
  // A READ without a handle (fuse.open_mode: none): DatasetCore::ReadNode, then the reply.
  void ReadNode(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off);

  PosixBacking& backing_;
  Prefetcher& prefetcher_;
  ControlPlane& control_;
  Stats& stats_;
  const FsOptions options_;
  AccessPolicy& access_;
  std::atomic<fuse_session*> session_{nullptr};
  // The rules and the nodes (before the watchers below, which use its InodeTable).
  DatasetCore core_;
  // Unless fuse.immutable: set before the session loop, stopped after it (after ahead_, whose
  // batches it checks).
  std::unique_ptr<Revalidator> revalidator_;
  std::unique_ptr<BackingWatch> watch_;  // set before the session loop runs, reset after it
  // Set with watch_ (fuse.stat_ahead > 0), before the session loop; stopped with it.
  std::unique_ptr<StatAhead> ahead_;
};

}  // namespace clairfs
