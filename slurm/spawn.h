// Runs a program with an argv (never a shell), with a deadline, capturing what it prints.
// Used by the SPANK plugin (to run clairfs-slurm from slurmstepd and slurmd, which are
// multi-threaded: the child does only async-signal-safe calls between fork and exec) and by
// clairfs-slurm (to start clairfs outside the job's cgroups).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace clairfs::slurm {

// Who the child becomes before exec: all three are set, supplementary groups first.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is the program's absolute path (no PATH search)
  std::vector<std::string> env;   // the child's whole environment, "NAME=value"
  std::optional<Credentials> as;  // none: keep the caller's identity
  bool new_session = false;       // setsid(): out of the caller's session and process group
  // cgroup.procs files the child writes "0" to (moving itself) before exec; a failed write
  // fails the spawn with the file named.
  std::vector<std::string> cgroup_procs;
  std::chrono::milliseconds timeout{60000};
  size_t max_output =
      64 * 1024;  // bytes of stdout and of stderr kept; the rest is read and dropped
};

struct SpawnResult {
  // The child's exit status; 128+N when killed by signal N; -1 when it could not be started
  // or missed its deadline (then killed with its process group, and `error` says so).
  int status = -1;
  std::string out;    // its stdout
  std::string err;    // its stderr
  std::string error;  // why it could not be run, empty otherwise
};

// Runs spec to completion (or its deadline) and returns its status and output. stdin is
// /dev/null. The child's descriptors other than 0-2 are closed at exec (every descriptor the
// caller opened is expected to be O_CLOEXEC; the child also closes 3..1023 before exec).
SpawnResult Spawn(const SpawnSpec& spec);

}  // namespace clairfs::slurm
