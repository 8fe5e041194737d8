// Starting and stopping one dataset's clairfs daemon on the node (as root, called with the
// dataset's lock held: slurm/node_state.h).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "slurm/settings.h"

namespace clairfs::slurm {

using Deadline = std::chrono::steady_clock::time_point;

// Whether a clairfs mount (fstype fuse.clairfs) is at path, by /proc/self/mountinfo.
bool IsClairfsMount(const std::string& path);

// Whether the mount at path answers (a killed daemon's mount fails with ENOTCONN).
bool MountAnswers(const std::string& path);

// The cgroup.procs file of `cgroup` (Settings::cgroup) in every cgroup hierarchy mounted (v1
// and v2), creating the cgroup where it is missing. Empty for "none". Returns "" or an error.
std::string CgroupProcFiles(const std::string& cgroup, std::vector<std::string>* out);

// Mounts d with clairfs as a daemon of its own: `clairfs [-c config] -o allow_other [-o
// option]... SOURCE MOUNTPOINT`, in a new session, moved into Settings::cgroup before exec;
// clairfs daemonizes once the mount is up, so its exit status 0 means mounted. Returns "" or
// the error for the job (clairfs's own message and exit status).
std::string StartDaemon(const Settings& s, const Dataset& d, Deadline deadline);

// Unmounts path (lazily when busy), then waits until its daemon exited (it stops within a few
// seconds of the unmount; SIGKILL at the deadline) and removes the mountpoint directory.
// Returns "" or what went wrong (for slurmd's log).
std::string StopDaemon(const Settings& s, const std::string& path, Deadline deadline);

// The processes running clairfs for the mountpoint path (by their command line).
std::vector<int> DaemonPids(const Settings& s, const std::string& path);

}  // namespace clairfs::slurm
