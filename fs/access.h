// AccessPolicy: who may do what on the mount, beyond the kernel's own mode-bit check
// (docs/permissions.md). It only ever narrows what the kernel already allowed.
//  - POSIX ACLs: Init asks the kernel to enforce them (FUSE_CAP_POSIX_ACL, which implies
//    default_permissions); GetXattr/ListXattr serve the backing objects' ACLs and user.*
//    attributes read-only, so the kernel evaluates the ACLs the dataset has.
//  - Revocation: the kernel checks an open against modes and ACLs it may have cached for
//    attr_timeout. AllowOpen re-checks the caller's access to the backing object with the
//    caller's credentials, so a chmod or setfacl that revokes access takes effect at the next
//    open (fuse.access_check: open).
//  - Control writes: only the mount's owner (the daemon's user) or members of control.group may
//    open .clairfs/manifest for writing; ManifestAttr shows that in the node's mode bits. The
//    same callers (IsController) see the full view of the generated control files.
//  - Registration: WriterView gives the view of the dataset a manifest writer's paths are
//    checked through, with the writer's credentials (cache/backing/identity.h switches them).
// Thread-safe: every method may run on any FUSE worker thread at once.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/backing/backing.h"
#include "cache/backing/identity.h"
#include "cache/base/stats.h"
#include "fs/fs_options.h"

namespace clairfs {

// The credentials of the process that made req. Its supplementary groups are read from /proc
// (fuse_req_getgroups); when they cannot be (the process is gone, or outside this pid
// namespace's view) out holds the primary group only and the Status says why.
Status CallerOf(fuse_req_t req, Credentials* out);

class AccessPolicy {
 public:
  // backing and stats must outlive this object. Records the daemon's own credentials.
  AccessPolicy(const PosixBacking& backing, const FsOptions& options, Stats& stats);

  // Called from the FUSE init: enables kernel-side POSIX ACL enforcement when the kernel can.
  void Init(fuse_conn_info* conn);

  // getxattr/listxattr of the dataset object at path; they reply to req. Only the POSIX ACLs
  // and user.* attributes are served; trusted.* and security.* stay hidden, since the daemon
  // reads them with its own privileges. An object without the attribute (or whose file system
  // has none) answers ENODATA; size 0 asks for the size; a too small size gets ERANGE.
  // The dataset root's ACLs are also remembered (from PosixBacking::Open on) and, while the store does not
  // answer (StoreUnreachable), the last ones read are served: the kernel checks them on every
  // path walk into the mount, and the control files below the root must stay reachable (the
  // root's attributes are kept the same way, see ClairFs::GetAttr).
  void GetXattr(fuse_req_t req, const std::string& path, const char* name, size_t size);
  void ListXattr(fuse_req_t req, const std::string& path, size_t size) const;

  // True if the caller of req may open the dataset file at path with flags. Otherwise replies
  // to req with the errno (EACCES when access was revoked) and returns false. A no-op unless
  // access_check is kOpen, the daemon runs as root and the caller is another user. While the
  // backing store does not answer (StoreUnreachable) the kernel's check alone decides, as with
  // access_check: kernel (logged once per episode).
  [[nodiscard]] bool AllowOpen(fuse_req_t req, const std::string& path, int flags);

  // True if the caller of req may open .clairfs/manifest for writing: IsController. Otherwise
  // replies EACCES (counted in control_denied), returns false.
  [[nodiscard]] bool AllowControlWrite(fuse_req_t req);
  // True if the caller of req is the mount's owner (the daemon's user) or a member (primary or
  // supplementary) of control.group: who may write the manifest and read the full view of the
  // control files (fs/control_views.h). Neither replies to req nor counts anything.
  [[nodiscard]] bool IsController(fuse_req_t req) const;

  // The dataset as a manifest written by the caller of req is checked against (docs/
  // permissions.md, "Registration with the writer's rights"), taken when the manifest is
  // opened for writing: null for the daemon's own user (the daemon's view, no identity
  // switch); for another user, a view whose lookups take that caller's uid, gid and
  // supplementary groups (PosixBacking::AsCaller). False, having replied EACCES, when the
  // caller is another user and the daemon cannot take identities (no CAP_SETUID/CAP_SETGID):
  // its paths could only be checked with the daemon's rights.
  [[nodiscard]] bool WriterView(fuse_req_t req, std::shared_ptr<const Backing>* view);

  // Sets the manifest node's permission bits and group: 0644 with the daemon's group, or 0664
  // with control.group's id when one is configured.
  void ManifestAttr(struct stat* st) const;

 private:
  // The last answer of the store for the root's ACL `name`: its value, or an error (ENODATA).
  Result<std::string> RootAcl(const char* name);

  const PosixBacking& backing_;
  const AccessCheck check_;
  // The root's system.posix_acl_access and _default as last read (first: root_at_open()).
  // root_acl_mu_ is a leaf.
  std::mutex root_acl_mu_;
  Result<std::string> root_acl_[2] = {Status::Error(Code::kUnavailable, ""),
                                      Status::Error(Code::kUnavailable, "")};
  std::atomic<bool> unreachable_logged_{false};  // this unreachable episode was logged
  std::atomic<bool> writer_view_logged_{false};  // a refused WriterView was logged
  const std::optional<gid_t> control_gid_;
  Stats& stats_;
  Credentials self_;  // the daemon's, restored after every check made as a caller
  bool root_;         // the daemon runs as root with CAP_SETUID/CAP_SETGID: can be a caller
};

}  // namespace clairfs
