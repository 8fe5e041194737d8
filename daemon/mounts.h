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

// Closes every descriptor of this process open on /dev/fuse: a FUSE session's, the clones its
// worker threads read with fuse.clone_fd, the control mount's. The kernel aborts a FUSE
// connection once no descriptor of it is open, failing the requests in flight; a thread stuck
// in uninterruptible I/O keeps the process's descriptor table alive past _exit, so a daemon
// whose stop overran calls this on its way out. A thread in read() on a closed descriptor
// holds it until that read returns (at the latest when _exit kills the thread). Returns how
// many it closed.
int CloseFuseDescriptors();

// Waits up to timeout for child pid to end and reaps it. The wait status, or nullopt when
// it is still running at the deadline (not reaped, not signalled). Retries on EINTR.
std::optional<int> WaitChild(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace clairfs
