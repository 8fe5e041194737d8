#include "fs/access.h"

#include <unistd.h>

#include <cerrno>

#include "cache/base/log.h"
#include "fs/status_errno.h"

namespace clairfs {
namespace {

// getxattr(2)/listxattr(2)'s answer when the buffer the caller gave is too small for the value:
// the protocol's, not an error of the rules.
constexpr int kBufferTooSmall = ERANGE;

}  // namespace

Caller CallerOf(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  Caller c;
  c.uid = ctx->uid;
  c.gid = ctx->gid;
  c.pid = ctx->pid;
  c.groups = [req, pid = ctx->pid](std::vector<gid_t>* out) {
    out->resize(32);
    for (;;) {
      const int n = fuse_req_getgroups(req, static_cast<int>(out->size()), out->data());
      if (n < 0) {
        out->clear();
        return Status::FromErrno(-n, "supplementary groups of pid " + std::to_string(pid));
      }
      const bool fits = static_cast<size_t>(n) <= out->size();
      out->resize(static_cast<size_t>(n));
      if (fits) return Status::Ok();
    }
  };
  return c;
}

void ReplyXattr(fuse_req_t req, const std::string& bytes, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, bytes.size());
  } else if (bytes.size() > size) {
    fuse_reply_err(req, kBufferTooSmall);
  } else {
    fuse_reply_buf(req, bytes.data(), bytes.size());
  }
}

AccessPolicy::AccessPolicy(const PosixBacking& backing, const FsOptions& options, FsStats& stats)
    : rules_(backing, options, stats, OwnCredentials(), geteuid() == 0 && CanSwitchIdentity()) {
  if (geteuid() == 0 && !CanSwitchIdentity() && options.access_check == AccessCheck::kOpen) {
    LogWarn(
        "no CAP_SETUID/CAP_SETGID: opens are not re-checked with the caller's "
        "credentials; the kernel's cached check alone decides (fuse.access_check)");
  }
}

void AccessPolicy::Init(fuse_conn_info* conn) {
  if (conn->capable & FUSE_CAP_POSIX_ACL) {
    conn->want |= FUSE_CAP_POSIX_ACL;
  } else {
    LogWarn("the kernel cannot enforce POSIX ACLs on a FUSE mount: only mode bits count");
  }
}

bool AccessPolicy::AllowControlWrite(fuse_req_t req) {
  const Status s = rules_.AllowControlWrite(CallerOf(req));
  if (s.ok()) return true;
  fuse_reply_err(req, ToErrno(s));
  return false;
}

bool AccessPolicy::IsController(fuse_req_t req) const { return rules_.IsController(CallerOf(req)); }

bool AccessPolicy::WriterView(fuse_req_t req, std::shared_ptr<const Backing>* view) {
  auto got = rules_.WriterView(CallerOf(req));
  if (!got.ok()) {
    view->reset();
    fuse_reply_err(req, ToErrno(got.status()));
    return false;
  }
  *view = std::move(got.value());
  return true;
}

}  // namespace clairfs
