#include "cache/backing/identity.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "cache/base/log.h"

namespace clairfs {
namespace {

// Raw system calls: each changes the calling thread's credentials only.
bool SetFsUid(uid_t uid) {
  syscall(SYS_setfsuid, uid);
  return static_cast<uid_t>(syscall(SYS_setfsuid, static_cast<uid_t>(-1))) == uid;
}
bool SetFsGid(gid_t gid) {
  syscall(SYS_setfsgid, gid);
  return static_cast<gid_t>(syscall(SYS_setfsgid, static_cast<gid_t>(-1))) == gid;
}
bool SetGroups(const std::vector<gid_t>& groups) {
  return syscall(SYS_setgroups, groups.size(), groups.data()) == 0;
}

}  // namespace

Credentials OwnCredentials() {
  Credentials self;
  self.uid = geteuid();
  self.gid = getegid();
  const int n = getgroups(0, nullptr);
  self.groups.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (n > 0 && getgroups(n, self.groups.data()) != n) self.groups.clear();
  return self;
}

bool CanSwitchIdentity() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  const auto has = [&](int cap) { return (data[cap / 32].effective >> (cap % 32)) & 1u; };
  return has(CAP_SETUID) && has(CAP_SETGID);
}

Status RunAs(const Credentials& as, const Credentials& self, const std::function<Status()>& check) {
  struct Restore {
    const Credentials& self;
    ~Restore() {
      if (!SetFsUid(self.uid) || !SetFsGid(self.gid) || !SetGroups(self.groups)) {
        LogCritical("cannot restore the daemon's credentials after a check as a caller");
        std::abort();
      }
    }
  } restore{self};
  if (!SetGroups(as.groups) || !SetFsGid(as.gid) || !SetFsUid(as.uid)) {
    return Status::FromErrno(EACCES, "cannot take the identity of uid " + std::to_string(as.uid));
  }
  return check();
}

}  // namespace clairfs
