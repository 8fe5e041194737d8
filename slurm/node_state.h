// The node's record of which jobs use which clairfs mount: under <state_dir>, per dataset name,
// a lock file `<name>.lock` (flock, held while a job joins or leaves and while the mount is
// made or removed) and a directory `<name>.jobs/` with one empty file per job id. A job that
// ended without its epilog (slurmd killed, node rebooted into the same /run) is dropped when
// no slurmstepd of it is left on the node (JobAlive).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace clairfs::slurm {

// An exclusive flock on <state_dir>/<name>.lock, released by the destructor.
class DatasetLock {
 public:
  DatasetLock() = default;
  DatasetLock(const DatasetLock&) = delete;
  DatasetLock& operator=(const DatasetLock&) = delete;
  ~DatasetLock();
  // Takes the lock, polling until the deadline. Returns "" or an error message.
  std::string Acquire(const std::string& state_dir, const std::string& name,
                      std::chrono::steady_clock::time_point deadline);

 private:
  int fd_ = -1;
};

// Creates dir and its missing parents, mode 0755, owned by the caller (root). Returns "" or
// an error message.
std::string MakeDirs(const std::string& dir);

// Whether a job still has a process on this node: a slurmstepd whose process title is
// `slurmstepd: [<job>.<step>]` (batch, extern, interactive and srun steps alike).
bool JobAlive(uint32_t job);

// The job files of a dataset (call with its lock held).
std::vector<uint32_t> JobsOf(const std::string& state_dir, const std::string& name);
std::string AddJob(const std::string& state_dir, const std::string& name, uint32_t job);
void RemoveJob(const std::string& state_dir, const std::string& name, uint32_t job);
// Drops the jobs with no process left (JobAlive), except `keep` (a job starting now may have
// no step process yet in a test harness); returns the jobs that remain.
std::vector<uint32_t> PruneJobs(const std::string& state_dir, const std::string& name,
                                uint32_t keep);

// The dataset names with a state entry (`<name>.jobs/`), for the epilog's sweep.
std::vector<std::string> KnownDatasets(const std::string& state_dir);
// Removes a dataset's `.jobs/` directory once empty (the lock file stays: removing a file
// others may be waiting to flock would let two holders in).
void ForgetDataset(const std::string& state_dir, const std::string& name);

}  // namespace clairfs::slurm
