// The control files' own mount (fs/control_fs.h): where it lives, how a killed daemon's one is
// cleared away, and its FUSE session with the threads serving it (docs/control-interface.md,
// "Visibility"; docs/architecture.md).
//
// Where: a directory named by the xxh3-64 (16 hex digits) of the main mount's absolute path,
// in a runtime directory of the daemon's user: /run/clairfs as root (0755, so every user of an
// allow_other mount can reach the files), else $XDG_RUNTIME_DIR/clairfs or /tmp/clairfs-<uid>
// (0700). A directory on the way that is not a real directory owned by the daemon's user, or
// that others may write, is refused. One mountpoint always gives the same path, so the next
// start on a mountpoint finds a killed daemon's stale control mount there.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/base/status.h"
#include "fs/control_fs.h"

namespace clairfs {

// The mount's type in the mount table: "fuse." + kControlSubtype.
inline constexpr const char* kControlSubtype = "clairfs-control";

// The control mount's path for the main mount at mountpoint (absolute, resolved). Creates and
// checks the runtime directories above it (not the path itself).
Result<std::string> ControlMountPath(const std::string& mountpoint);

// Makes path ready to mount on: a stale control mount there (its daemon was killed: requests
// fail with ENOTCONN) is detached, a live one is refused (another clairfs serves this
// mountpoint), and the directory is created (or checked, as its parents are).
Status PrepareControlMountpoint(const std::string& path);

// One mounted control session. Lock-free: Start, Stop and DetachForExit are called by the
// daemon's main thread, DetachForExit also by the lifecycle thread on a stop's overrun.
class ControlMount {
 public:
  // Creates a session serving fs (which must outlive it) and mounts it at path (prepared; the
  // directory is removed again when the mount fails),
  // shown in the mount table as "clairfs-control:<mountpoint>". Mount options: the ones of
  // the main mount that concern access (default_permissions, allow_other as root); none of
  // the user's -o options (a `ro` among them would refuse every manifest write); and
  // auto_unmount: a fusermount3 process watches the session and unmounts it when the daemon
  // dies, even by SIGKILL, so that no stale control mount outlives it in the runtime
  // directory (PrepareControlMountpoint still clears one whose watcher died as well).
  static Result<std::unique_ptr<ControlMount>> Mount(ControlFs& fs, const std::string& path,
                                                     const std::string& mountpoint, bool debug);
  // Starts `threads` workers (after fuse_daemonize: fork keeps no threads).
  void Start(int threads);
  // Ends the workers (each finishes the request it serves), unmounts, destroys the session
  // and removes the directory. Idempotent.
  void Stop();
  // On the way to _exit after a stuck stop: detaches the mount if it is still ours and closes
  // the session's descriptor, so that callers blocked on it get an error.
  void DetachForExit();
  ~ControlMount() { Stop(); }
  ControlMount(const ControlMount&) = delete;
  ControlMount& operator=(const ControlMount&) = delete;

  const std::string& path() const { return path_; }

 private:
  ControlMount(fuse_session* se, std::string path, int stop_fd);
  // Serves requests until stop_fd_ is readable or the connection ends (unmounted).
  void Serve();

  fuse_session* se_;  // main thread only (null once stopped)
  const int fd_;      // the session's descriptor, for DetachForExit
  const std::string path_;
  const int stop_fd_;  // an eventfd, written once by Stop: readable for every worker from then
  dev_t devno_ = 0;    // the mount's device number, to tell it apart from what sits there later
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> unmounted_{false};  // Stop has begun to unmount (and close fd_)
  std::atomic<bool> gone_logged_{false};
};

}  // namespace clairfs
