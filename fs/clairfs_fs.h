// ClairFs: the thin FUSE low-level adapter of the dataset. It maps kernel requests onto the
// backing store (namespace) and the prefetcher (file contents), and turns every Status into an
// errno through ToErrno. No exception leaves a callback. `.clairfs` in the root is a symbolic
// link to the control files' own mount (fs/control_fs.h), never listed by readdir; a
// `.clairfs` of the dataset is shadowed.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "cache/backing.h"
#include "cache/log_limit.h"
#include "cache/prefetcher.h"
#include "cache/stat_ahead.h"
#include "cache/stats.h"
#include "fs/access.h"
#include "fs/backing_watch.h"
#include "fs/control.h"
#include "fs/fs_options.h"
#include "fs/inode_table.h"
#include "fs/node_reads.h"
#include "fs/revalidate.h"
#include "fs/page_versions.h"

namespace clairfs {

class ClairFs {
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
  // reads (cache/stat_ahead.h), which the watch vouches for and which, unless immutable, are
  // compared with what the kernel was given. A failure is logged and leaves the rest going.
  // StopWatch: after the session loop and backing.Stop().
  void StartWatch();
  void StopWatch();

  // Request handlers (called through Ops()).
  void Init(fuse_conn_info* conn);
  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void Forget(fuse_ino_t ino, uint64_t n) {
    node_reads_.Drop(ino);
    inodes_.Forget(ino, n);
    if (std::string path; !inodes_.Path(ino, &path)) pages_.Forget(ino);  // pages gone too
  }
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
  // The node of `.clairfs` in the root: a symbolic link to control_target_ (a reserved id,
  // below InodeTable::kFirstDynamicId).
  static constexpr fuse_ino_t kControlLink = 2;
  // How long after the kernel dropped a node's pages of one version the pages of another
  // may be served (fs/page_versions.h): a read() that held old pages at the drop has asked for
  // its next ones long before.
  static constexpr int64_t kPageGraceNs = 100'000'000;
  static constexpr size_t kPageSize = 4096;  // the kernel's pages (x86-64, arm64 default)
  struct DirHandle;
  void ControlLinkAttr(struct stat* st) const;
  // The node's path, without checking what it names now (prefer NodeOf and Verify); replies
  // ESTALE and returns false if the kernel sent an unknown id.
  bool PathOf(fuse_req_t req, fuse_ino_t ino, std::string* path);
  // What the node stands for (see fs/inode_table.h); replies ESTALE and returns false if the
  // kernel sent an unknown id.
  bool NodeOf(fuse_req_t req, fuse_ino_t ino, InodeTable::NodeInfo* node);
  // The stat of what node's path names now. Replies and returns false unless that is the
  // node's own object: ESTALE when the path names another object or nothing.
  bool Verify(fuse_req_t req, fuse_ino_t ino, const InodeTable::NodeInfo& node, struct stat* st);
  // Replies ESTALE (counted) and returns false unless st is node's object.
  bool CheckIdentity(fuse_req_t req, fuse_ino_t ino, const InodeTable::NodeInfo& node,
                     const struct stat& st);
  // The errno for a failure to reach a node's path: ESTALE when the path no longer leads to
  // an object of the node's kind (ENOENT, ENOTDIR, ELOOP), else the failure's own.
  int PathErrno(const Status& s);
  // The backing store did not answer the open of node (cause): binds h, if a local tier
  // holds it, to the version the kernel last saw of the node (its attributes are what the
  // kernel checked permissions on), counted in served_unverified and logged once per episode;
  // else replies with cause's errno and returns false.
  bool BindUnverified(fuse_req_t req, fuse_ino_t ino, const InodeTable::NodeInfo& node,
                      OpenContents* h, InodeTable::Seen* seen, const Status& cause);
  // How Bind bound a file's contents.
  enum class Bound {
    kFresh,       // to the version the backing file has now (its identity checked)
    kUnverified,  // the store does not answer: to a cached copy of the version last seen
    kReplied,     // not bound: an error was replied
  };
  // Binds h to dataset file node as an open does: its descriptor (O_NONBLOCK, identity
  // checked) at its current version, and the prefetcher's blob of that version if it has one
  // (consume: this is a read of the file in the plan). The kernel's cached attributes are
  // invalidated if they show another version. *seen: what the kernel had of the node before.
  Bound Bind(fuse_req_t req, fuse_ino_t ino, const InodeTable::NodeInfo& node, bool consume,
             OpenContents* h, InodeTable::Seen* seen);
  // A READ without a handle (fuse.open_mode: none): served from the contents the node is
  // bound to (fs/node_reads.h), binding it first when this READ starts a read of the file.
  void ReadNode(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off);
  // Makes the kernel drop the attributes it caches for ino (size, times, mode), so that the
  // next stat() or read() asks GetAttr again. Never blocks (see Open).
  void InvalidateAttrs(fuse_ino_t ino);
  // From the watch's and the revalidation's threads (fs/clairfs_watch.cc): make the kernel
  // drop node id's attributes and cached ACLs, with its pages (contents) or not; or its entry
  // for name in directory node parent. No-ops before the session is set.
  void NotifyInode(uint64_t id, bool contents);
  void NotifyEntry(uint64_t parent, const std::string& name);
  // Makes the kernel drop the pages of ino from offset `from` on, and its attributes (no-open
  // mode keeps them across opens), recorded in pages_ (fs/page_versions.h). Waits until the
  // kernel dropped them, so never over the pages of a READ this thread has not answered
  // (they are locked until the reply).
  void DropPages(fuse_ino_t ino, uint64_t from = 0);
  // True iff the object at path may appear in the mount (symlinks must stay inside the tree).
  bool Visible(const std::string& path, const struct stat& st);

  PosixBacking& backing_;
  Prefetcher& prefetcher_;
  ControlPlane& control_;
  Stats& stats_;
  const FsOptions options_;
  const std::vector<std::string> aliases_;
  InodeTable inodes_;
  // fuse.open_mode none: contents of the files being read, at most options_.node_read_bytes
  NodeReads node_reads_{4096, options_.node_read_bytes};
  // Unless fuse.immutable: set before the session loop, stopped after it (after ahead_, whose
  // batches it checks).
  std::unique_ptr<Revalidator> revalidator_;
  // fuse.open_mode none: the version of each node's pages in the kernel, so that a read()
  // never gets pages of two versions.
  PageVersions pages_{kPageGraceNs};
  std::unique_ptr<BackingWatch> watch_;  // set before the session loop runs, reset after it
  // Set with watch_ (fuse.stat_ahead > 0), before the session loop; stopped with it.
  std::unique_ptr<StatAhead> ahead_;
  AccessPolicy& access_;
  const std::string control_target_;
  uid_t uid_;
  gid_t gid_;
  struct timespec started_;
  std::atomic<fuse_session*> session_{nullptr};
  std::atomic<bool> unverified_logged_{false};  // this unreachable-store episode was logged
  LogLimit open_log_;  // opens that failed (a fetch error, a timeout): rate-limited lines
  // The dataset root's last attributes from the store (first: as PosixBacking::Open found
  // them), answered while it does not answer (for kUnreachableAttrTimeout seconds). root_mu_ is
  // a leaf.
  static constexpr double kUnreachableAttrTimeout = 1.0;
  std::mutex root_mu_;
  struct stat root_st_ {};
};

}  // namespace clairfs
