// The mount table and unmounting, without a shell: libmount reads /proc/self/mountinfo,
// umount2() or a spawned fusermount3 (argv, no shell) detaches.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include "cache/base/status.h"

namespace clairfs {

struct MountEntry {
  std::string fstype;  // e.g. "fuse.clairfs"
  std::string source;  // e.g. "clairfs:/data/set"
  dev_t devno = 0;     // the mounted file system's device number (st_dev of its files)
};

// The topmost mount whose mountpoint is exactly path (absolute, lexically normal; compared
// as a string, so the path is never resolved: a stale FUSE mount is not touched).
// nullopt when none, or when the table cannot be read.
std::optional<MountEntry> FindMount(const std::string& path);

// Lazily detaches the mount at path: umount2(MNT_DETACH) as root, otherwise fusermount3 -uz
// spawned with an argv and given `timeout` to finish (then killed). Never resolves the path
// through the mount. Ok when the call succeeded.
Status DetachMount(const std::string& path,
                   std::chrono::milliseconds timeout = std::chrono::seconds(5));

// Waits up to timeout for child pid to end and reaps it. The wait status, or nullopt when
// it is still running at the deadline (not reaped, not signalled). Retries on EINTR.
std::optional<int> WaitChild(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace clairfs
