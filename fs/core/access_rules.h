// AccessRules: the decisions of who may do what on the mount beyond the kernel's own mode-bit
// check (docs/permissions.md), without FUSE: a caller is a Caller (fs/core/caller.h). They only
// ever narrow what the kernel already allowed. The FUSE side (fs/access.h) builds the Caller of
// a request, asks here and replies.
//  - Revocation: the kernel checks an open against modes and ACLs it may have cached for
//    attr_timeout. AllowOpen re-checks the caller's access to the backing object with the
//    caller's credentials, so a chmod or setfacl that revokes access takes effect at the next
//    open (fuse.access_check: open).
//  - Control writes: only the mount's owner (the daemon's user) or members of control.group may
//    open .clairfs/manifest for writing; ManifestAttr shows that in the node's mode bits. The
//    same callers (IsController) see the full view of the generated control files.
//  - Registration: WriterView gives the view of the dataset a manifest writer's paths are
//    checked through, with the writer's credentials (cache/backing/identity.h switches them).
//  - Attributes: Xattr serves the backing objects' POSIX ACLs and user.* attributes read-only,
//    so the kernel evaluates the ACLs the dataset has; trusted.* and security.* stay hidden.
// Thread-safe: every method may run on any FUSE worker thread at once.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cache/backing/backing.h"
#include "cache/backing/identity.h"
#include "fs/core/caller.h"
#include "fs/core/fs_options.h"
#include "fs/core/fs_stats.h"

namespace clairfs {

class AccessRules {
 public:
  // backing and stats must outlive this object. self: the daemon's own credentials;
  // can_switch: the daemon runs as root with CAP_SETUID/CAP_SETGID, so it can check as a
  // caller (the daemon passes OwnCredentials() and geteuid() == 0 && CanSwitchIdentity()).
  AccessRules(const PosixBacking& backing, const FsOptions& options, FsStats& stats,
              Credentials self, bool can_switch);

  // May caller open the dataset file at path with flags? kPermissionDenied (counted in
  // open_denied) when its access was revoked; a failure of the check itself is its own error.
  // Ok without a check unless access_check is kOpen, the daemon can switch identities and the
  // caller is another user. While the backing store does not answer (StoreUnreachable) the
  // kernel's check alone decides, as with access_check: kernel (logged once per episode).
  Status AllowOpen(const Caller& caller, const std::string& path, int flags);

  // True if caller is the mount's owner (the daemon's user) or a member (primary or
  // supplementary) of control.group: who may write the manifest and read the full view of the
  // control files (control/counts_view.h). Counts nothing.
  bool IsController(const Caller& caller) const;
  // Ok if caller may open .clairfs/manifest for writing (IsController); else
  // kPermissionDenied, counted in control_denied.
  Status AllowControlWrite(const Caller& caller);
  // The dataset as a manifest written by caller is checked against (docs/permissions.md,
  // "Registration with the writer's rights"): null for the daemon's own user (the daemon's
  // view, no identity switch); for another user, a view whose lookups take that caller's uid,
  // gid and supplementary groups (PosixBacking::AsCaller). kPermissionDenied (counted) when
  // the caller is another user and the daemon cannot take identities: its paths could only be
  // checked with the daemon's rights.
  Result<std::shared_ptr<const Backing>> WriterView(const Caller& caller);

  // Sets the manifest node's permission bits and group: 0644 with the daemon's group, or 0664
  // with control.group's id when one is configured.
  void ManifestAttr(struct stat* st) const;

  // Attribute `name` of the dataset object at path, or (name nullptr) the list of the names
  // served, NUL-terminated each. Only the POSIX ACLs and user.* are served: any other name is
  // ENODATA, as is an object without it. The dataset root's ACLs are remembered (from
  // PosixBacking::Open on) and, while the store does not answer (StoreUnreachable), the last
  // ones read are served: the kernel checks them on every path walk into the mount, and the
  // control files below the root must stay reachable (see DatasetCore::GetAttr).
  Result<std::string> Xattr(const std::string& path, const char* name);

  const Credentials& self() const { return self_; }

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
  FsStats& stats_;
  const Credentials self_;  // the daemon's, restored after every check made as a caller
  const bool root_;         // the daemon can check as a caller
};

}  // namespace clairfs
