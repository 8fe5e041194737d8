#include "fs/access.h"

#include <fcntl.h>
#include <linux/limits.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "fs/status_errno.h"

namespace clairfs {
namespace {

// The kernel marks the open of a file being executed with FMODE_EXEC (0x20) in the flags FUSE
// passes on; such an open needs execute permission, not read permission.
constexpr int kFmodeExec = 0x20;

// Attributes served: the POSIX ACLs (the kernel reads them to enforce them) and user.*, which
// the kernel gates by read permission as on the dataset. trusted.* is readable only with
// CAP_SYS_ADMIN and security.* takes effect on the mount (file capabilities, labels): served
// with the daemon's privileges they would widen what other users see or get.
bool Forwarded(std::string_view name) {
  return name == "system.posix_acl_access" || name == "system.posix_acl_default" ||
         name.starts_with("user.");
}

// The value of attribute name (or, for nullptr, the list of names) of the object at path,
// read on the store's I/O threads with their deadline (PosixBacking::Xattr).
Result<std::string> ReadAttr(const PosixBacking& backing, const std::string& path,
                             const char* name) {
  return backing.Xattr(path, name);
}

// Answers a getxattr/listxattr of size bytes (0: the size is asked) with bytes.
void ReplyXattr(fuse_req_t req, const std::string& bytes, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, bytes.size());
  } else if (bytes.size() > size) {
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, bytes.data(), bytes.size());
  }
}


}  // namespace

Status CallerOf(fuse_req_t req, Credentials* out) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  out->uid = ctx->uid;
  out->gid = ctx->gid;
  out->groups.resize(32);
  for (;;) {
    const int n = fuse_req_getgroups(req, static_cast<int>(out->groups.size()), out->groups.data());
    if (n < 0) {
      out->groups.clear();
      return Status::FromErrno(-n, "supplementary groups of pid " + std::to_string(ctx->pid));
    }
    const bool fits = static_cast<size_t>(n) <= out->groups.size();
    out->groups.resize(static_cast<size_t>(n));
    if (fits) return Status::Ok();
  }
}

AccessPolicy::AccessPolicy(const PosixBacking& backing, const FsOptions& options, Stats& stats)
    : backing_(backing),
      check_(options.access_check),
      control_gid_(options.control_gid),
      stats_(stats),
      self_(OwnCredentials()),
      root_(geteuid() == 0 && CanSwitchIdentity()) {
  root_acl_[0] = backing.root_at_open().acl_access;
  root_acl_[1] = backing.root_at_open().acl_default;
  if (geteuid() == 0 && !root_ && check_ == AccessCheck::kOpen) {
    spdlog::warn(
        "no CAP_SETUID/CAP_SETGID: opens are not re-checked with the caller's "
        "credentials; the kernel's cached check alone decides (fuse.access_check)");
  }
}

void AccessPolicy::Init(fuse_conn_info* conn) {
  if (conn->capable & FUSE_CAP_POSIX_ACL) {
    conn->want |= FUSE_CAP_POSIX_ACL;
  } else {
    spdlog::warn("the kernel cannot enforce POSIX ACLs on a FUSE mount: only mode bits count");
  }
}

Result<std::string> AccessPolicy::RootAcl(const char* name) {
  const int which = std::string_view(name) == "system.posix_acl_access"    ? 0
                    : std::string_view(name) == "system.posix_acl_default" ? 1
                                                                            : -1;
  auto value = ReadAttr(backing_, "", name);
  if (which < 0) return value;
  std::lock_guard lock(root_acl_mu_);
  if (!StoreUnreachable(value.status())) {
    root_acl_[which] = value;
  } else if (root_acl_[which].status().code() != Code::kUnavailable) {
    return root_acl_[which];
  }
  return value;
}

void AccessPolicy::GetXattr(fuse_req_t req, const std::string& path, const char* name,
                            size_t size) {
  if (!Forwarded(name)) return (void)fuse_reply_err(req, ENODATA);
  auto value = path.empty() ? RootAcl(name) : ReadAttr(backing_, path, name);
  if (!value.ok()) return (void)fuse_reply_err(req, ToErrno(value.status()));
  ReplyXattr(req, value.value(), size);
}

void AccessPolicy::ListXattr(fuse_req_t req, const std::string& path, size_t size) const {
  auto list = ReadAttr(backing_, path, nullptr);
  if (!list.ok()) return (void)fuse_reply_err(req, ToErrno(list.status()));
  std::string shown;
  for (size_t at = 0; at < list.value().size();) {
    const size_t end = std::min(list.value().find('\0', at), list.value().size());
    const std::string_view name(list.value().data() + at, end - at);
    if (Forwarded(name)) shown.append(name).push_back('\0');
    at = end + 1;
  }
  ReplyXattr(req, shown, size);
}

bool AccessPolicy::AllowOpen(fuse_req_t req, const std::string& path, int flags) {
  if (check_ != AccessCheck::kOpen || !root_ || fuse_req_ctx(req)->uid == self_.uid) return true;
  Credentials caller;
  const Status groups = CallerOf(req, &caller);
  if (!groups.ok()) {
    // Checked with the primary group only: still never more than the kernel allowed.
    if (stats_.errors.access_check.fetch_add(1, std::memory_order_relaxed) == 0) {
      spdlog::warn("open access check without supplementary groups: {}", groups.message());
    }
  }
  const int mask = (flags & kFmodeExec) ? X_OK : R_OK;
  // The walk runs on an I/O thread (a deadline like every backing call), which takes the
  // caller's identity around it.
  const Status s = backing_.CheckAccess(
      path, mask, [caller, self = self_](const std::function<Status()>& check) {
        return RunAs(caller, self, check);
      });
  if (s.ok()) {
    unreachable_logged_.store(false, std::memory_order_relaxed);
    return true;
  }
  if (StoreUnreachable(s)) {
    if (!unreachable_logged_.exchange(true, std::memory_order_relaxed)) {
      spdlog::warn("open access re-check: the backing store does not answer ({}); the kernel's "
                   "check decides until it does",
                   s.message());
    }
    return true;
  }
  const int err = ToErrno(s);
  if (err == EACCES) stats_.open_denied.fetch_add(1, std::memory_order_relaxed);
  fuse_reply_err(req, err);
  return false;
}

bool AccessPolicy::IsController(fuse_req_t req) const {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  if (ctx->uid == self_.uid) return true;
  if (!control_gid_) return false;
  Credentials caller;
  (void)CallerOf(req, &caller);  // without its groups, the primary group decides
  const auto& groups = caller.groups;
  return caller.gid == *control_gid_ ||
         std::find(groups.begin(), groups.end(), *control_gid_) != groups.end();
}

bool AccessPolicy::AllowControlWrite(fuse_req_t req) {
  if (IsController(req)) return true;
  const fuse_ctx* ctx = fuse_req_ctx(req);
  stats_.control_denied.fetch_add(1, std::memory_order_relaxed);
  spdlog::debug("manifest write by uid {} refused: not the mount's owner or group", ctx->uid);
  fuse_reply_err(req, EACCES);
  return false;
}

bool AccessPolicy::WriterView(fuse_req_t req, std::shared_ptr<const Backing>* view) {
  view->reset();
  if (fuse_req_ctx(req)->uid == self_.uid) return true;
  if (!root_) {
    stats_.control_denied.fetch_add(1, std::memory_order_relaxed);
    if (!writer_view_logged_.exchange(true, std::memory_order_relaxed)) {
      spdlog::warn("manifest write by uid {} refused: without CAP_SETUID/CAP_SETGID its paths "
                   "cannot be checked with its rights",
                   fuse_req_ctx(req)->uid);
    }
    fuse_reply_err(req, EACCES);
    return false;
  }
  Credentials caller;
  if (const Status groups = CallerOf(req, &caller); !groups.ok()) {
    // Checked with the primary group only: never more than the writer may see.
    stats_.errors.access_check.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("manifest writer without supplementary groups: {}", groups.message());
  }
  *view = backing_.AsCaller([caller = std::move(caller), self = self_](
                                const std::function<Status()>& check) {
    return RunAs(caller, self, check);
  });
  return true;
}

void AccessPolicy::ManifestAttr(struct stat* st) const {
  st->st_mode = S_IFREG | (control_gid_ ? 0664 : 0644);
  if (control_gid_) st->st_gid = *control_gid_;
}

}  // namespace clairfs
