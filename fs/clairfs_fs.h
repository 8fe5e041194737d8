// ClairFs: the thin FUSE low-level adapter of the dataset. Each request becomes one call on the
// FUSE-free core (fs/core/dataset_core.h: namespace, identity, access, binding), whose answer it
// replies; every failure goes to the kernel through ToErrno (fs/status_errno.h), and the only
// errnos written here are the protocol's own (named constants in clairfs_fs.cc). It implements
// the core's KernelCache with the kernel's notifications, and offers them (NotifyInode,
// NotifyEntry) to what keeps the kernel's caches fresh, which the composition root builds and
// wires (daemon/compose.h). No exception leaves a callback.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <atomic>
#include <memory>
#include <string>

#include "cache/backing/backing.h"
#include "cache/base/stats.h"
#include "cache/prefetch/prefetcher.h"
#include "control/registrar.h"
#include "fs/access.h"
#include "fs/core/dataset_core.h"
#include "fs/core/fs_options.h"
#include "fs/core/fs_stats.h"
#include "fs/core/kernel_cache.h"

namespace clairfs {

class ClairFs final : public KernelCache {
 public:
  // All references must outlive the session. root_aliases are the absolute paths that name the
  // dataset root (dataset and mountpoint), for symlink checks. control_target: the absolute
  // path `.clairfs` leads to (the control mount, daemon/control_mount.h).
  ClairFs(PosixBacking& backing, Prefetcher& prefetcher, Registrar& control, AccessPolicy& access,
          Stats& stats, FsStats& fs_stats, FsOptions options, std::vector<std::string> root_aliases,
          std::string control_target);
  // The operation table; the session's userdata must be this object.
  static const fuse_lowlevel_ops& Ops();
  // The session serving this object, for notifications to the kernel; set right after
  // fuse_session_new, before the session loop runs.
  void SetSession(fuse_session* se) { session_.store(se, std::memory_order_release); }
  // The FUSE-free core: the nodes (inodes()) and the hooks of the freshness parts
  // (SetWatchers), for the composition root to wire before the session loop runs.
  DatasetCore& core() { return core_; }
  // From the freshness parts' threads (fs/fresh/, cache/backing/stat_ahead.h, wired in
  // daemon/compose_threads.cc): make the kernel drop node id's attributes and cached ACLs,
  // with its pages (contents) or not; or its entry for name in directory node parent. No-ops
  // before the session is set.
  void NotifyInode(uint64_t id, bool contents);
  void NotifyEntry(uint64_t parent, const std::string& name);

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
  // A READ without a handle (fuse.open_mode: none): DatasetCore::ReadNode, then the reply.
  void ReadNode(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off);

  const FsOptions options_;
  AccessPolicy& access_;
  std::atomic<fuse_session*> session_{nullptr};
  // The rules and the nodes.
  DatasetCore core_;
};

}  // namespace clairfs
