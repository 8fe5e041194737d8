// One cluster cache for a multi-node job (docs/slurm.md "One cache for a multi-node job"): the
// node-side work of clairfs-slurm's cluster-* commands.
//
// A job on K nodes gets one clairfs daemon per node, all K started as one job step
// (`srun --mpi=pmi2 --overlap -N K --ntasks-per-node=1`), so that Slurm's PMI forms their MPI
// world: Debian's MPICH cannot join processes started apart. The daemons run as the job's user
// (an unprivileged FUSE mount that only the user's processes see: the daemons hold only what
// the user could read, and serve it to the job's own nodes alone).
//
// Per node, under <mount_root>/jobs/<job>/ (root's, mode 0755, so the user adds nothing there):
// - key: the job's cluster key (the user's, 0600), HMAC-SHA256 of the administrator's
//   cluster_secret over the job id and uid: the same on every node without being sent
//   anywhere, and no other job's;
// - <dataset name>: the mountpoint (the user's, 0700);
// - run: the daemon's XDG_RUNTIME_DIR, where it puts its control mount (the user's, 0700);
// - daemons.log, daemons.status: what the daemons' step printed (the user's, 0600), and how it
//   ended, on the node that launched it;
// - launched, registered: markers of the step that launched the daemons (once per job) and of
//   the job's first step on the node (which registers its manifest);
// - ssd, with cluster_ssd=DIR: the daemon's disk tier, DIR/<uid>/<dataset name> (the user's,
//   0700) bound there (clairfs refuses a link) and named in ssd.target (root's); it is kept
//   after the job so that the user's next job on the dataset, a requeue included, finds it warm;
//   DIR/<uid>/<dataset name>.owner names the job using it. Two daemons never share one
//   (clairfs refuses a directory in use): while another live job of the node has it, this job
//   gets DIR/<uid>/<dataset name>.job<job>, removed with the job.
#pragma once

#include <cstdint>
#include <string>

#include "slurm/settings.h"
#include "slurm/spawn.h"

namespace clairfs::slurm {

// Where a job's cluster lives on this node.
struct JobCluster {
  std::string dir;         // <mount_root>/jobs/<job>
  std::string key;         // <dir>/key
  std::string mountpoint;  // <dir>/<dataset name>
  std::string log;         // <dir>/daemons.log
  std::string status;      // <dir>/daemons.status
  // <dir>/supervisor.lock: flock'ed by the supervisor of the daemons' step for as long as it
  // lives, so that the epilog removes the directory only after its last write (the status).
  std::string supervisor_lock;
  std::string run;  // <dir>/run: the daemons' XDG_RUNTIME_DIR (their control mount)
  std::string ssd;  // <dir>/ssd: a symbolic link to the disk tier's directory
};

JobCluster JobClusterOf(const Settings& s, uint32_t job, const Dataset& d);

// What a call of Prepare is for.
enum class PrepareFor {
  kStep,     // a step of the job: prepare, and say whether it is the first on the node
  kLaunch,   // the step that starts the daemons (once per job: the `launched` marker)
  kDaemons,  // the daemons' own step: prepare only
};

// As root: makes the job's directory, key and mountpoint on this node (each checked when it
// already exists: type, owner, mode), for `user`. *first: this is the first kStep or kLaunch
// call of the job on the node (its manifest is to be registered). *launch (kLaunch): this call
// is the job's first kLaunch on the node, which is to start the daemons. Returns "" or an error.
std::string PrepareJobCluster(const Settings& s, uint32_t job, const Credentials& user,
                              const Dataset& d, PrepareFor what, bool* first, bool* launch);

// As root, once per job (after PrepareJobCluster(kLaunch) said first): starts the daemons' step
// as the job's user in a supervisor process of its own, and returns at once. The supervisor
// writes daemons.status when the step ends, or kills it when the job has left the node.
std::string LaunchJobCluster(const Settings& s, uint32_t job, const Credentials& user,
                             const Dataset& d, uint32_t nodes);

// As the job's user: waits until this node's mount of the job's cluster answers, or the
// daemons' step ended (a cluster that could not start: its output is in the message), or the
// deadline. Returns "" or the message for the job.
std::string WaitJobCluster(const Settings& s, uint32_t job, const Dataset& d);

// As root, in the epilog: unmounts and removes the job's cluster directory, and those of jobs
// no longer alive on the node (JobAlive), each once its supervisor ended (its lock free), or
// after 10 s of waiting for it in all. Returns "" or what could not be cleaned (for the log).
std::string ReleaseJobClusters(const Settings& s, uint32_t job);

}  // namespace clairfs::slurm
