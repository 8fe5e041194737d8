// Caller: who made a request of the mount, as the core's rules need it (no FUSE types). The
// adapter fills it from the request; tests fill it by hand.
#pragma once

#include <sys/types.h>

#include <functional>
#include <vector>

#include "cache/backing/identity.h"
#include "cache/base/status.h"

namespace clairfs {

struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  // Reads the caller's supplementary groups into *out. Called only when a rule needs them (the
  // adapter reads them from /proc, which costs a system call or more): null means none. A
  // failure leaves out empty and says why; the primary group then decides alone.
  std::function<Status(std::vector<gid_t>* out)> groups;

  // The caller's credentials: uid, gid and (when `groups` is set) supplementary groups.
  Status CredentialsOf(Credentials* out) const {
    out->uid = uid;
    out->gid = gid;
    out->groups.clear();
    if (!groups) return Status::Ok();
    Status s = groups(&out->groups);
    if (!s.ok()) out->groups.clear();
    return s;
  }
};

}  // namespace clairfs
