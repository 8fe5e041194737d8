#include "fs/core/access_rules.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "cache/base/log.h"

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

// An attribute the mount does not serve: the errno getxattr(2) gives for a missing one.
Status NoAttribute(const char* name) { return Status::FromErrno(ENODATA, name); }

}  // namespace

AccessRules::AccessRules(const PosixBacking& backing, const FsOptions& options, FsStats& stats,
                         Credentials self, bool can_switch)
    : backing_(backing),
      check_(options.access_check),
      control_gid_(options.control_gid),
      stats_(stats),
      self_(std::move(self)),
      root_(can_switch) {
  root_acl_[0] = backing.root_at_open().acl_access;
  root_acl_[1] = backing.root_at_open().acl_default;
}

Result<std::string> AccessRules::RootAcl(const char* name) {
  const int which = std::string_view(name) == "system.posix_acl_access"    ? 0
                    : std::string_view(name) == "system.posix_acl_default" ? 1
                                                                           : -1;
  auto value = backing_.Xattr("", name);
  if (which < 0) return value;
  std::lock_guard lock(root_acl_mu_);
  if (!StoreUnreachable(value.status())) {
    root_acl_[which] = value;
  } else if (root_acl_[which].status().code() != Code::kUnavailable) {
    return root_acl_[which];
  }
  return value;
}

Result<std::string> AccessRules::Xattr(const std::string& path, const char* name) {
  if (name != nullptr) {
    if (!Forwarded(name)) return NoAttribute(name);
    return path.empty() ? RootAcl(name) : backing_.Xattr(path, name);
  }
  auto list = backing_.Xattr(path, nullptr);
  if (!list.ok()) return list;
  std::string shown;
  for (size_t at = 0; at < list.value().size();) {
    const size_t end = std::min(list.value().find('\0', at), list.value().size());
    const std::string_view one(list.value().data() + at, end - at);
    if (Forwarded(one)) shown.append(one).push_back('\0');
    at = end + 1;
  }
  return shown;
}

Status AccessRules::AllowOpen(const Caller& caller, const std::string& path, int flags) {
  if (check_ != AccessCheck::kOpen || !root_ || caller.uid == self_.uid) return Status::Ok();
  Credentials as;
  const Status groups = caller.CredentialsOf(&as);
  if (!groups.ok()) {
    // Checked with the primary group only: still never more than the kernel allowed.
    if (stats_.errors.access_check.fetch_add(1, std::memory_order_relaxed) == 0) {
      LogWarn("open access check without supplementary groups: {}", groups.message());
    }
  }
  const int mask = (flags & kFmodeExec) ? X_OK : R_OK;
  // The walk runs on an I/O thread (a deadline like every backing call), which takes the
  // caller's identity around it.
  const Status s = backing_.CheckAccess(
      path, mask,
      [as, self = self_](const std::function<Status()>& check) { return RunAs(as, self, check); });
  if (s.ok()) {
    unreachable_logged_.store(false, std::memory_order_relaxed);
    return s;
  }
  if (StoreUnreachable(s)) {
    if (!unreachable_logged_.exchange(true, std::memory_order_relaxed)) {
      LogWarn(
          "open access re-check: the backing store does not answer ({}); the kernel's "
          "check decides until it does",
          s.message());
    }
    return Status::Ok();
  }
  if (s.code() == Code::kPermissionDenied) {
    stats_.open_denied.fetch_add(1, std::memory_order_relaxed);
  }
  return s;
}

bool AccessRules::IsController(const Caller& caller) const {
  if (caller.uid == self_.uid) return true;
  if (!control_gid_) return false;
  Credentials as;
  (void)caller.CredentialsOf(&as);  // without its groups, the primary group decides
  return as.gid == *control_gid_ ||
         std::find(as.groups.begin(), as.groups.end(), *control_gid_) != as.groups.end();
}

Status AccessRules::AllowControlWrite(const Caller& caller) {
  if (IsController(caller)) return Status::Ok();
  stats_.control_denied.fetch_add(1, std::memory_order_relaxed);
  LogDebug("manifest write by uid {} refused: not the mount's owner or group", caller.uid);
  return Status::Error(Code::kPermissionDenied,
                       "uid " + std::to_string(caller.uid) + " is not the mount's owner or group");
}

Result<std::shared_ptr<const Backing>> AccessRules::WriterView(const Caller& caller) {
  if (caller.uid == self_.uid) return std::shared_ptr<const Backing>();
  if (!root_) {
    stats_.control_denied.fetch_add(1, std::memory_order_relaxed);
    if (!writer_view_logged_.exchange(true, std::memory_order_relaxed)) {
      LogWarn(
          "manifest write by uid {} refused: without CAP_SETUID/CAP_SETGID its paths "
          "cannot be checked with its rights",
          caller.uid);
    }
    return Status::Error(Code::kPermissionDenied,
                         "cannot check paths as uid " + std::to_string(caller.uid));
  }
  Credentials as;
  if (const Status groups = caller.CredentialsOf(&as); !groups.ok()) {
    // Checked with the primary group only: never more than the writer may see.
    stats_.errors.access_check.fetch_add(1, std::memory_order_relaxed);
    LogDebug("manifest writer without supplementary groups: {}", groups.message());
  }
  return backing_.AsCaller(
      [as = std::move(as), self = self_](const std::function<Status()>& check) {
        return RunAs(as, self, check);
      });
}

void AccessRules::ManifestAttr(struct stat* st) const {
  st->st_mode = S_IFREG | (control_gid_ ? 0664 : 0644);
  if (control_gid_) st->st_gid = *control_gid_;
}

}  // namespace clairfs
