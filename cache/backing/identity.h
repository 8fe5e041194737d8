// File-system identities: the credentials a check on the dataset is made with, and switching
// the calling thread to another user's for the length of one check (docs/permissions.md).
// Used by the open-time access check (fs/access.h) and by the path checks of a manifest
// written by another user (PosixBacking::AsCaller).
#pragma once

#include <sys/types.h>

#include <functional>
#include <vector>

#include "cache/base/status.h"

namespace clairfs {

// A set of file-system credentials: user, primary group, supplementary groups.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// The process's own: effective uid and gid, supplementary groups.
Credentials OwnCredentials();

// Whether the process may take other users' file-system identities (CAP_SETUID and CAP_SETGID
// effective): root in a container with dropped capabilities may not.
bool CanSwitchIdentity();

// Runs check with the calling thread's file-system identity (fsuid, fsgid, supplementary
// groups) switched to as, then switches back to self.
// Why this is safe with many threads: Linux keeps credentials per thread, and the raw
// setfsuid, setfsgid and setgroups system calls change the calling thread's only. (glibc's
// setgroups() wrapper, unlike the system call, applies the change to every thread of the
// process, so it is never used here.) The thread runs nothing but check while switched, so no
// other work is ever done under a caller's identity. A failed switch to as fails the check
// (EACCES: the caller is refused, never let through) without running it. The
// switch back runs on every way out, an exception included; if it fails the process aborts,
// since the thread must not go on as somebody else.
Status RunAs(const Credentials& as, const Credentials& self, const std::function<Status()>& check);

}  // namespace clairfs
