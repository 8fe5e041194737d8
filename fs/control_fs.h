// ControlFs: the FUSE low-level file system of the control files (docs/control-interface.md).
// It serves its own connection, mounted at a runtime directory of the daemon
// (daemon/control_mount.h) that `<mount>/.clairfs` (a symbolic link, fs/clairfs_fs.cc) leads
// to. A connection of its own, because the control files need OPEN, FLUSH and RELEASE (per
// writer buffers, EINVAL at close(), snapshots per open) whatever the dataset connection does
// with them. The root directory holds manifest, stats, plan, errors, metrics and (while the
// batch path serves) batch: the manifest is
// written through the Registrar (control/registrar.h), the generated files come from
// ControlViews (control/views.h); write permission on the manifest comes from AccessPolicy, and
// so does the view a reader gets of the generated files (control/counts_view.h).
// No exception leaves a callback. Thread-safe: requests may arrive on any number of threads.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "control/registrar.h"
#include "control/views.h"
#include "fs/access.h"
#include "fs/core/fs_options.h"

namespace clairfs {

class ControlFs {
 public:
  // registrar, views and access must outlive the session. Only entry_timeout of options is
  // used.
  ControlFs(Registrar& registrar, const ControlViews& views, AccessPolicy& access,
            const FsOptions& options);
  // Frees the handles the kernel never released (a writer still open when the daemon stopped
  // the session): call it only once no worker serves the session any more.
  ~ControlFs();
  ControlFs(const ControlFs&) = delete;
  ControlFs& operator=(const ControlFs&) = delete;
  // The operation table; the session's userdata must be this object.
  static const fuse_lowlevel_ops& Ops();

  // The node ids of the connection, fixed for its life. The files in the order their names
  // are listed (kNames in fs/control_fs.cc).
  enum class Node : fuse_ino_t {
    kRoot = FUSE_ROOT_ID,
    kManifest,
    kStats,
    kPlan,
    kErrors,
    kMetrics,
    kBatch,  // only while a batch path is served (SetBatchPath)
  };

  // The batch path's socket (docs/batch-path.md), which `batch` names: set once the socket
  // serves, before or while the session runs; empty (the default): no `batch` file.
  void SetBatchPath(std::string path);

  // Request handlers (called through Ops()).
  void Init(fuse_conn_info* conn);
  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void GetAttr(fuse_req_t req, fuse_ino_t ino);
  void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi);
  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Read(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi);
  void Write(fuse_req_t req, const char* buf, size_t size, off_t off, fuse_file_info* fi);
  void Flush(fuse_req_t req, fuse_file_info* fi);
  void Release(fuse_req_t req, fuse_file_info* fi);
  void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off);
  void Access(fuse_req_t req, fuse_ino_t ino, int mask);

 private:
  struct Handle;
  // True and *node set iff ino is one of this connection's nodes.
  static bool NodeOf(fuse_ino_t ino, Node* node);
  void Attr(Node node, struct stat* st) const;
  std::string BatchPath() const;

  Registrar& registrar_;
  const ControlViews& views_;
  AccessPolicy& access_;
  const double entry_timeout_;
  const uid_t uid_;
  const gid_t gid_;
  struct timespec started_ {};
  // Every open handle, owned here from its open until its release (or this object's end).
  // handles_mu_ is a leaf.
  std::mutex handles_mu_;
  std::unordered_map<const Handle*, std::unique_ptr<Handle>> handles_;
  // batch_mu_ is a leaf.
  mutable std::mutex batch_mu_;
  std::string batch_path_;
};

}  // namespace clairfs
