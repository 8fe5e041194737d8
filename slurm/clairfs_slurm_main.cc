// clairfs-slurm: the node-side work of the Slurm integration, run by the SPANK plugin
// (slurm/clairfs_spank.cc) with an argv, never through a shell. Also usable from
// Prolog/Epilog scripts and by hand (docs/slurm.md).
//
//   clairfs-slurm acquire JOB DATASET [SETTING...]   as root: mount DATASET for JOB (or join
//       its mount); prints the mountpoint, then `new` or, when JOB was already recorded on it
//       (another step of the job), `known`. Exit 0, or 1 with the reason on stderr.
//   clairfs-slurm check JOB DATASET                  as the job's user: DATASET is a directory
//       the user may open, so that root looks up (acquire) only what the user could reach, and
//       a user learns nothing of paths the user could not see. Exit 0, or 1 with the reason.
//   clairfs-slurm register JOB MOUNTPOINT FILE       as the job's user: register FILE as the
//       job's manifest. Exit 0, or 1 with the reason (clairfs's report) on stderr.
//   clairfs-slurm release JOB [SETTING...]           as root: JOB leaves every mount; a mount
//       no live job uses is unmounted; the cluster directories of JOB and of jobs gone from the
//       node are removed. JOB 0: only drop jobs that are gone. Exit 0, or 1 when something
//       could not be cleaned up (said on stderr).
//   clairfs-slurm cluster-prepare JOB USER DATASET step|launch|daemons NODES [SETTING...]
//       as root: prepares this node for the job's cluster cache (slurm/job_cluster.h);
//       USER is UID:GID[:GROUP,GROUP...]. `launch` also starts the daemons' step on NODES nodes
//       when no step of the job did on this node. Prints the mountpoint, then `new` (the job's
//       first step here: register its manifest) or `known`.
//   clairfs-slurm cluster-wait JOB DATASET [SETTING...]  as the job's user: waits until the
//       job's cluster cache answers on this node. Exit 0, or 1 with the reason on stderr.
//
// SETTINGs are plugstack.conf's `key=value` arguments (slurm/settings.h).
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "slurm/job_cluster.h"
#include "slurm/manifest_copy.h"
#include "slurm/mount_ops.h"
#include "slurm/node_state.h"
#include "slurm/settings.h"

namespace clairfs::slurm {
namespace {

constexpr int kUsage = 64;

bool ParseJobId(const char* s, uint32_t* job) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v > UINT32_MAX) return false;
  *job = static_cast<uint32_t>(v);
  return true;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return 1;
}

std::string Mount(const Settings& s, uint32_t job, const Dataset& d, Deadline deadline,
                  bool* known) {
  if (auto e = MakeDirs(s.state_dir); !e.empty()) return e;
  if (auto e = MakeDirs(s.mount_root); !e.empty()) return e;
  DatasetLock lock;
  if (auto e = lock.Acquire(s.state_dir, d.name, deadline); !e.empty()) return e;
  const std::vector<uint32_t> jobs = PruneJobs(s.state_dir, d.name, job);
  *known = std::find(jobs.begin(), jobs.end(), job) != jobs.end();
  if (!(IsClairfsMount(d.mountpoint) && MountAnswers(d.mountpoint))) {
    // None, or a killed daemon's (a new clairfs detaches that one by itself).
    if (auto e = StartDaemon(s, d, deadline); !e.empty()) {
      if (JobsOf(s.state_dir, d.name).empty()) ForgetDataset(s.state_dir, d.name);
      return e;
    }
  }
  return AddJob(s.state_dir, d.name, job);
}

int Check(const std::string& dataset) {
  if (dataset.empty() || dataset[0] != '/')
    return Fail("--clairfs needs an absolute path, got '" + dataset + "'");
  DIR* dir = opendir(dataset.c_str());
  if (dir == nullptr) return Fail("dataset '" + dataset + "': " + std::strerror(errno));
  closedir(dir);
  return 0;
}

int Acquire(uint32_t job, const std::string& dataset, const Settings& s) {
  const Deadline deadline = std::chrono::steady_clock::now() + s.timeout;
  if (job == 0) return Fail("acquire needs a job id");
  Dataset d;
  if (auto e = ResolveDataset(s, dataset, &d); !e.empty()) return Fail(e);
  bool known = false;
  if (auto e = Mount(s, job, d, deadline, &known); !e.empty()) return Fail(e);
  std::printf("%s\n%s\n", d.mountpoint.c_str(), known ? "known" : "new");
  return 0;
}

// UID:GID[:GROUP,GROUP...]
bool ParseUser(const std::string& arg, Credentials* user) {
  unsigned long uid = 0, gid = 0;
  int used = 0;
  if (std::sscanf(arg.c_str(), "%lu:%lu%n", &uid, &gid, &used) != 2) return false;
  user->uid = static_cast<uid_t>(uid);
  user->gid = static_cast<gid_t>(gid);
  std::string rest = arg.substr(static_cast<size_t>(used));
  if (rest.empty()) return true;
  if (rest[0] != ':') return false;
  rest = rest.substr(1);
  size_t start = 0;
  while (start < rest.size()) {
    size_t end = rest.find(',', start);
    if (end == std::string::npos) end = rest.size();
    char* stop = nullptr;
    const std::string word = rest.substr(start, end - start);
    const unsigned long g = std::strtoul(word.c_str(), &stop, 10);
    if (word.empty() || *stop != '\0') return false;
    user->groups.push_back(static_cast<gid_t>(g));
    start = end + 1;
  }
  return true;
}

int ClusterPrepare(uint32_t job, const std::string& user_arg, const std::string& dataset,
                   const std::string& what_arg, const std::string& nodes_arg, const Settings& s) {
  Credentials user;
  if (job == 0 || !ParseUser(user_arg, &user) || user.uid == 0)
    return Fail("cluster-prepare needs a job id and a user UID:GID other than root");
  const PrepareFor what = what_arg == "launch"    ? PrepareFor::kLaunch
                          : what_arg == "daemons" ? PrepareFor::kDaemons
                                                  : PrepareFor::kStep;
  if (what_arg != "launch" && what_arg != "daemons" && what_arg != "step")
    return Fail("cluster-prepare: not step, launch or daemons: '" + what_arg + "'");
  uint32_t nodes = 0;
  if (!ParseJobId(nodes_arg.c_str(), &nodes) || nodes < 2)
    return Fail("cluster-prepare: not a node count above 1: '" + nodes_arg + "'");
  Dataset d;
  if (auto e = ResolveDataset(s, dataset, &d); !e.empty()) return Fail(e);
  bool first = false, launch = false;
  if (auto e = PrepareJobCluster(s, job, user, d, what, &first, &launch); !e.empty())
    return Fail(e);
  if (launch) {
    if (auto e = LaunchJobCluster(s, job, user, d, nodes); !e.empty()) return Fail(e);
  }
  std::printf("%s\n%s\n", JobClusterOf(s, job, d).mountpoint.c_str(), first ? "new" : "known");
  return 0;
}

int ClusterWait(uint32_t job, const std::string& dataset, const Settings& s) {
  Dataset d;
  if (auto e = ResolveDataset(s, dataset, &d); !e.empty()) return Fail(e);
  if (auto e = WaitJobCluster(s, job, d); !e.empty()) return Fail(e);
  return 0;
}

int Release(uint32_t job, const Settings& s) {
  const Deadline deadline = std::chrono::steady_clock::now() + s.timeout;
  int status = 0;
  for (const std::string& name : KnownDatasets(s.state_dir)) {
    DatasetLock lock;
    if (auto e = lock.Acquire(s.state_dir, name, deadline); !e.empty()) {
      status = Fail(e);
      continue;
    }
    const std::string mountpoint = MountpointOf(s, name);
    std::vector<uint32_t> before = JobsOf(s.state_dir, name);
    const bool had_job = job != 0 && std::find(before.begin(), before.end(), job) != before.end();
    if (had_job) RemoveJob(s.state_dir, name, job);
    if (!PruneJobs(s.state_dir, name, 0).empty()) {
      if (had_job && IsClairfsMount(mountpoint)) UnregisterStream(job, mountpoint);
      continue;
    }
    if (IsClairfsMount(mountpoint)) {
      if (auto e = StopDaemon(s, mountpoint, deadline); !e.empty()) status = Fail(e);
    }
    ForgetDataset(s.state_dir, name);
  }
  if (auto e = ReleaseJobClusters(s, job); !e.empty()) status = Fail(e);
  return status;
}

int Main(int argc, char** argv) {
  const std::string usage =
      "usage: clairfs-slurm acquire JOB DATASET [SETTING...] | check JOB DATASET | register JOB "
      "MOUNTPOINT FILE | release JOB [SETTING...] | cluster-prepare JOB UID:GID[:GROUPS] DATASET "
      "step|launch|daemons NODES [SETTING...] | cluster-wait JOB DATASET [SETTING...]";
  if (argc < 3) return Fail(usage), kUsage;
  const std::string command = argv[1];
  uint32_t job = 0;
  if (!ParseJobId(argv[2], &job))
    return Fail("not a job id: '" + std::string(argv[2]) + "'"), kUsage;
  if (command == "check") {
    if (argc != 4) return Fail(usage), kUsage;
    return Check(argv[3]);
  }
  if (command == "register") {
    if (argc != 5) return Fail(usage), kUsage;
    if (auto e = RegisterManifest(job, argv[3], argv[4]); !e.empty()) return Fail(e);
    return 0;
  }
  const int first_setting = command == "acquire"           ? 4
                            : command == "cluster-prepare" ? 7
                            : command == "cluster-wait"    ? 4
                                                           : 3;
  if ((command != "acquire" && command != "release" && command != "cluster-prepare" &&
       command != "cluster-wait") ||
      argc < first_setting)
    return Fail(usage), kUsage;
  Settings s;
  s.clairfs = CLAIRFS_SLURM_DAEMON;
  if (auto e = ParseSettings(std::vector<std::string>(argv + first_setting, argv + argc), &s);
      !e.empty())
    return Fail("clairfs-slurm: bad setting (plugstack.conf): " + e), kUsage;
  if (command == "cluster-wait") return ClusterWait(job, argv[3], s);  // as the job's user
  if (geteuid() != 0) return Fail("clairfs-slurm " + command + " runs as root"), kUsage;
  if (command == "cluster-prepare")
    return ClusterPrepare(job, argv[3], argv[4], argv[5], argv[6], s);
  return command == "acquire" ? Acquire(job, argv[3], s) : Release(job, s);
}

}  // namespace
}  // namespace clairfs::slurm

int main(int argc, char** argv) { return clairfs::slurm::Main(argc, argv); }
