// AccessPolicy: the FUSE side of the access rules (fs/core/access_rules.h, where the decisions
// and their contract are). It builds the Caller of a request (CallerOf), asks AccessRules and
// replies to the request when the answer is no, with the errno of the rule's Status
// (fs/status_errno.h). It also asks the kernel to enforce POSIX ACLs (Init) and answers
// getxattr/listxattr (the ACLs and user.* attributes of the backing objects, read-only).
// Thread-safe: every method may run on any FUSE worker thread at once.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <memory>
#include <string>

#include "cache/backing/backing.h"
#include "fs/core/access_rules.h"
#include "fs/core/caller.h"
#include "fs/core/fs_options.h"
#include "fs/core/fs_stats.h"

namespace clairfs {

// The caller of req: uid, gid and pid at once; its supplementary groups are read from /proc
// (fuse_req_getgroups) only if a rule asks for them. When they cannot be (the process is gone,
// or outside this pid namespace's view) the rule gets the primary group only and the reason.
// The Caller must not outlive req.
Caller CallerOf(fuse_req_t req);

// Answers a getxattr/listxattr asking for size bytes (0: the size is asked) with bytes.
void ReplyXattr(fuse_req_t req, const std::string& bytes, size_t size);

class AccessPolicy {
 public:
  // backing and stats must outlive this object. Records the daemon's own credentials.
  AccessPolicy(const PosixBacking& backing, const FsOptions& options, FsStats& stats);

  // Called from the FUSE init: enables kernel-side POSIX ACL enforcement when the kernel can.
  void Init(fuse_conn_info* conn);

  // The rules themselves (for the core, fs/core/dataset_core.h).
  AccessRules& rules() { return rules_; }

  // AccessRules::AllowControlWrite for the caller of req; replies the refusal and returns false.
  [[nodiscard]] bool AllowControlWrite(fuse_req_t req);
  // AccessRules::IsController for the caller of req. Neither replies nor counts anything.
  [[nodiscard]] bool IsController(fuse_req_t req) const;
  // AccessRules::WriterView for the caller of req into *view; replies the refusal and returns
  // false.
  [[nodiscard]] bool WriterView(fuse_req_t req, std::shared_ptr<const Backing>* view);
  // AccessRules::ManifestAttr.
  void ManifestAttr(struct stat* st) const { rules_.ManifestAttr(st); }

 private:
  AccessRules rules_;
};

}  // namespace clairfs
