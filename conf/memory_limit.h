// CgroupMemoryLimit: the tightest memory limit the kernel enforces on this process through its
// cgroups (what a Slurm job with --mem, a Kubernetes pod or a systemd unit gives), so that the
// capacity check (conf/memory_budget.h) compares the daemon's memory with what it may really
// use, not with the machine's RAM.
//
// Contract:
// - Reads <root>/proc/self/cgroup and <root>/proc/self/mountinfo; every cgroup directory is
//   found through mountinfo (never a hard-coded mount point), under <root>. root is "" for the
//   real system; tests give a temporary directory holding a fake /proc and /sys.
// - cgroup v2 (a "0::/path" line): the cgroup2 mount whose root contains path; at the cgroup's
//   directory and every ancestor up to the mount's root, memory.max and memory.high (past
//   memory.high the kernel throttles the group into reclaim, which a cache must not live in).
// - cgroup v1 (an "N:...memory...:/path" line): the mount of type cgroup whose options name
//   the memory controller; memory.limit_in_bytes at the cgroup's directory and every ancestor
//   (a hierarchical limit of an ancestor binds its children).
// - Both are read when both exist (a hybrid system); the smallest value wins.
// - "max", and values of 2^62 bytes or more (the kernel's "unlimited" in v1), mean no limit.
// - A file that does not exist is no limit at that level (the v2 root has no memory.max; a v2
//   hierarchy without the memory controller has none at all). A file that exists but cannot be
//   read, or does not hold a number, is no limit either, and is named in notes so that the
//   caller can log it; nothing here fails.
// - A cgroup path outside every mount's root (another cgroup namespace) is skipped with a note.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace clairfs {

struct CgroupMemory {
  uint64_t limit = 0;              // bytes; 0: no limit found
  std::string source;              // the file that set limit (as read, under root), empty when none
  std::vector<std::string> notes;  // files that exist but could not be used, and why
  bool limited() const { return limit != 0; }
};

// The limit of this process's cgroups; root as in the contract above.
CgroupMemory CgroupMemoryLimit(const std::string& root = "");

// One value of memory.max / memory.high / memory.limit_in_bytes into *bytes (0: no limit, for
// "max" or >= 2^62); false for text that is not a limit.
bool ParseCgroupLimit(const std::string& text, uint64_t* bytes);

}  // namespace clairfs
