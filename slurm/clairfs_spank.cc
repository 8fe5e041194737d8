// The clairfs SPANK plugin: `sbatch --clairfs=/data/imagenet [--clairfs-manifest=FILE]`.
//
// Contract (docs/slurm.md has the administrator's side):
// - in slurmstepd (remote context), after the options are known (init_post_opt, as root):
//   clairfs-slurm check, as the job's user, makes sure the user can open the dataset directory
//   (so root never looks up a path for a user who could not); then, as root,
//   clairfs-slurm acquire mounts the dataset under the admin's mount root, or joins the mount
//   another job of the node already made; the job's environment gets CLAIRFS_MOUNT (the
//   mountpoint) and CLAIRFS_DATASET (the path asked for). With --clairfs-manifest the file is
//   then registered as the job's user (clairfs-slurm register, credentials dropped first),
//   by the job's first step on the node only.
// - a failure there is not returned to slurmstepd (a failed step setup can drain the node):
//   it is kept and task_init, which runs in each task with the job's output open, prints it
//   to the task's stderr ("clairfs: ...") and fails the task, so the job fails with exit
//   status 1 and its output says why, and the node stays in service.
// - a job on several nodes with the cluster cache (multinode=cluster in plugstack.conf, or
//   --clairfs-cache=cluster) gets one cache for all its nodes instead (slurm/job_cluster.h):
//   each step prepares its node (clairfs-slurm cluster-prepare, as root); the batch step, or a
//   step on all the job's nodes when there is none, starts the daemons' step once; then each
//   step waits, as the user, until its node's mount answers (clairfs-slurm cluster-wait).
//   The daemons' step carries --clairfs-daemons: it prepares its node and waits for nothing.
// - at the job's end (job_epilog, in slurmd, as root): clairfs-slurm release; a mount no live
//   job uses is unmounted, the job's cluster directory removed. It never fails (a failing
//   epilog drains the node): problems go to slurmd's log.
// Every program runs through Spawn (fork and execve of an argv, a deadline), never a shell.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// spank.h declares the callbacks (slurm_spank_init, ...) outside its own extern "C" block;
// Slurm looks them up by their C names.
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include "slurm/spawn.h"

extern "C" {
extern const char plugin_name[] = "clairfs";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
extern const unsigned int spank_plugin_version = 1;
}

namespace {

using clairfs::slurm::Spawn;
using clairfs::slurm::SpawnResult;
using clairfs::slurm::SpawnSpec;

// The options' values (set by the option callbacks, which slurmstepd runs before
// init_post_opt) and the failure to report in task_init.
std::string dataset_arg;
std::string manifest_arg;
std::string cache_arg;       // --clairfs-cache: "cluster", "node" or empty (the admin's default)
std::string daemons_arg;     // --clairfs-daemons: the dataset of the daemons' step
std::string failure;         // what went wrong, for the job's output
std::string failure_header;  // the line before it: which part failed

int OnDataset(int, const char* optarg, int) {
  if (optarg == nullptr || optarg[0] != '/') {
    slurm_error("clairfs: --clairfs needs an absolute dataset path");
    return -1;
  }
  dataset_arg = optarg;
  return 0;
}

int OnManifest(int, const char* optarg, int) {
  if (optarg == nullptr || optarg[0] == '\0') {
    slurm_error("clairfs: --clairfs-manifest needs a file");
    return -1;
  }
  manifest_arg = optarg;
  return 0;
}

int OnCache(int, const char* optarg, int) {
  const std::string v = optarg == nullptr ? "" : optarg;
  if (v != "cluster" && v != "node") {
    slurm_error("clairfs: --clairfs-cache needs 'cluster' or 'node'");
    return -1;
  }
  cache_arg = v;
  return 0;
}

int OnDaemons(int, const char* optarg, int) {
  if (optarg == nullptr || optarg[0] != '/') return -1;
  daemons_arg = optarg;
  return 0;
}

spank_option kOptions[] = {
    {const_cast<char*>("clairfs"), const_cast<char*>("DATASET"),
     const_cast<char*>("Mount DATASET with clairfs on each node of the job before it starts "
                       "(CLAIRFS_MOUNT names the mount)"),
     1, 0, OnDataset},
    {const_cast<char*>("clairfs-manifest"), const_cast<char*>("FILE"),
     const_cast<char*>("Register FILE (a clairfs manifest) on the --clairfs mount before the job "
                       "starts"),
     1, 0, OnManifest},
    {const_cast<char*>("clairfs-cache"), const_cast<char*>("cluster|node"),
     const_cast<char*>("On several nodes: one cache for all the job's nodes (cluster) or one per "
                       "node (node); the default is the administrator's"),
     1, 0, OnCache},
    {const_cast<char*>("clairfs-daemons"), const_cast<char*>("DATASET"),
     const_cast<char*>("(internal) the step of a job's cluster cache daemons"), 1, 0, OnDaemons},
};

struct PluginArgs {
  std::string helper = CLAIRFS_SLURM_HELPER;
  std::vector<std::string> settings;  // every argument, passed on to clairfs-slurm
  std::chrono::seconds timeout{120};
  bool cluster_default = false;  // multinode=cluster
};

PluginArgs ParseArgs(int ac, char** av) {
  PluginArgs p;
  for (int i = 0; i < ac; ++i) {
    const std::string arg = av[i];
    p.settings.push_back(arg);
    if (arg.starts_with("helper=")) p.helper = arg.substr(7);
    if (arg.starts_with("timeout=")) p.timeout = std::chrono::seconds(std::atol(arg.c_str() + 8));
    if (arg.starts_with("multinode=")) p.cluster_default = arg == "multinode=cluster";
  }
  if (p.timeout.count() <= 0) p.timeout = std::chrono::seconds(120);
  return p;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs clairfs-slurm; "" or the message for the job.
std::string RunHelper(const PluginArgs& p, std::vector<std::string> args,
                      const clairfs::slurm::Credentials* as, std::string* out) {
  SpawnSpec spec;
  spec.argv = {p.helper};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"};
  // Slurm's own configuration, for the srun that starts a job cluster's daemons: the one this
  // slurmstepd or slurmd runs with, if not the default.
  if (const char* conf = std::getenv("SLURM_CONF"); conf != nullptr && conf[0] == '/')
    spec.env.push_back(std::string("SLURM_CONF=") + conf);
  if (as != nullptr) spec.as = *as;
  // clairfs-slurm holds to the same timeout; a little more here so that it reports first.
  spec.timeout = p.timeout + std::chrono::seconds(10);
  const SpawnResult r = Spawn(spec);
  if (!r.error.empty()) return r.error;
  if (out != nullptr) *out = r.out;
  if (r.status != 0) {
    const std::string said = Trim(r.err);
    return said.empty() ? p.helper + " exited with status " + std::to_string(r.status) : said;
  }
  return "";
}

// The job's user, uid, gid and supplementary groups; "" or an error.
std::string JobUser(spank_t sp, clairfs::slurm::Credentials* user) {
  gid_t* groups = nullptr;
  int ngroups = 0;
  if (spank_get_item(sp, S_JOB_UID, &user->uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &user->gid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &groups, &ngroups) != ESPANK_SUCCESS)
    return "cannot get the job's user and groups";
  user->groups.assign(groups, groups + (ngroups > 0 ? ngroups : 0));
  return "";
}

std::string Register(spank_t sp, const PluginArgs& p, uint32_t job,
                     const clairfs::slurm::Credentials& user, const std::string& mountpoint) {
  failure_header = "the manifest " + manifest_arg + " could not be registered on " + mountpoint +
                   " (the dataset " + dataset_arg + "):";
  std::string file = manifest_arg;
  if (file[0] != '/') {  // relative to the submission directory (the job's PWD)
    char cwd[4096];
    if (spank_getenv(sp, "PWD", cwd, sizeof cwd) != ESPANK_SUCCESS || cwd[0] != '/')
      return "--clairfs-manifest=" + manifest_arg +
             " is relative and the job has no PWD: give an absolute path";
    file = std::string(cwd) + "/" + file;
  }
  return RunHelper(p, {"register", std::to_string(job), mountpoint, file}, &user, nullptr);
}

std::string MountForJob(spank_t sp, const PluginArgs& p) {
  uint32_t job = 0;
  failure_header = "the dataset " + dataset_arg + " could not be mounted for this job:";
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return "cannot get the job id";
  clairfs::slurm::Credentials user;
  if (auto e = JobUser(sp, &user); !e.empty()) return e;
  // First as the user: root then looks up only a dataset the user can open.
  if (auto e = RunHelper(p, {"check", std::to_string(job), dataset_arg}, &user, nullptr);
      !e.empty())
    return e;
  std::vector<std::string> args = {"acquire", std::to_string(job), dataset_arg};
  args.insert(args.end(), p.settings.begin(), p.settings.end());
  std::string out;
  if (auto e = RunHelper(p, args, nullptr, &out); !e.empty()) return e;
  const size_t nl = out.find('\n');
  const std::string mountpoint = out.substr(0, nl);
  const bool known = nl != std::string::npos && Trim(out.substr(nl + 1)) == "known";
  if (mountpoint.empty() || mountpoint[0] != '/') return "clairfs-slurm printed no mountpoint";
  if (spank_setenv(sp, "CLAIRFS_MOUNT", mountpoint.c_str(), 1) != ESPANK_SUCCESS ||
      spank_setenv(sp, "CLAIRFS_DATASET", dataset_arg.c_str(), 1) != ESPANK_SUCCESS)
    return "cannot set CLAIRFS_MOUNT in the job's environment";
  slurm_info("clairfs: job %u uses %s at %s", job, dataset_arg.c_str(), mountpoint.c_str());
  // Once per job and node: a later step registering again would restart the job's stream.
  if (manifest_arg.empty() || known) return "";
  return Register(sp, p, job, user, mountpoint);
}

// The number of nodes of the job (not of the step), from its environment; 0 when unknown.
uint32_t JobNodes(spank_t sp) {
  char value[32];
  for (const char* name : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}) {
    if (spank_getenv(sp, name, value, sizeof value) == ESPANK_SUCCESS)
      return static_cast<uint32_t>(std::strtoul(value, nullptr, 10));
  }
  return 0;
}

// UID:GID:GROUP,GROUP... for clairfs-slurm cluster-prepare.
std::string UserArg(const clairfs::slurm::Credentials& user) {
  std::string arg = std::to_string(user.uid) + ":" + std::to_string(user.gid);
  for (size_t i = 0; i < user.groups.size(); ++i) {
    arg.push_back(i == 0 ? ':' : ',');
    arg.append(std::to_string(user.groups[i]));
  }
  return arg;
}

// The daemons' step of a job cluster: prepares this node before its task (the daemon) starts.
std::string PrepareDaemons(spank_t sp, const PluginArgs& p) {
  uint32_t job = 0;
  failure_header = "clairfs: the job's cluster cache could not be prepared on this node:";
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return "cannot get the job id";
  clairfs::slurm::Credentials user;
  if (auto e = JobUser(sp, &user); !e.empty()) return e;
  if (auto e = RunHelper(p, {"check", std::to_string(job), daemons_arg}, &user, nullptr);
      !e.empty())
    return e;
  std::vector<std::string> args = {"cluster-prepare", std::to_string(job), UserArg(user),
                                   daemons_arg,       "daemons",           "2"};
  args.insert(args.end(), p.settings.begin(), p.settings.end());
  return RunHelper(p, args, nullptr, nullptr);
}

// A step of a job with one cache for its nodes: prepare this node, start the daemons' step
// (once per job), wait until this node's mount answers.
std::string ClusterForJob(spank_t sp, const PluginArgs& p, uint32_t nodes) {
  uint32_t job = 0, step = 0, node_id = 0, step_nodes = 0;
  failure_header = "the dataset " + dataset_arg + " could not be cached for this job's " +
                   std::to_string(nodes) + " nodes:";
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_NODEID, &node_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_NNODES, &step_nodes) != ESPANK_SUCCESS)
    return "cannot get the job's and the step's ids";
  clairfs::slurm::Credentials user;
  if (auto e = JobUser(sp, &user); !e.empty()) return e;
  if (auto e = RunHelper(p, {"check", std::to_string(job), dataset_arg}, &user, nullptr);
      !e.empty())
    return e;
  // The batch step starts the daemons; a job without one (srun, salloc) from its first step
  // on all its nodes, on that step's first node.
  const bool launch = step == SLURM_BATCH_SCRIPT || (node_id == 0 && step_nodes == nodes);
  std::vector<std::string> args = {
      "cluster-prepare", std::to_string(job),        UserArg(user),
      dataset_arg,       launch ? "launch" : "step", std::to_string(nodes)};
  args.insert(args.end(), p.settings.begin(), p.settings.end());
  std::string out;
  if (auto e = RunHelper(p, args, nullptr, &out); !e.empty()) return e;
  const size_t nl = out.find('\n');
  const std::string mountpoint = out.substr(0, nl);
  const bool first = nl != std::string::npos && Trim(out.substr(nl + 1)) == "new";
  if (mountpoint.empty() || mountpoint[0] != '/') return "clairfs-slurm printed no mountpoint";
  std::vector<std::string> wait = {"cluster-wait", std::to_string(job), dataset_arg};
  wait.insert(wait.end(), p.settings.begin(), p.settings.end());
  if (auto e = RunHelper(p, wait, &user, nullptr); !e.empty()) return e;
  if (spank_setenv(sp, "CLAIRFS_MOUNT", mountpoint.c_str(), 1) != ESPANK_SUCCESS ||
      spank_setenv(sp, "CLAIRFS_DATASET", dataset_arg.c_str(), 1) != ESPANK_SUCCESS)
    return "cannot set CLAIRFS_MOUNT in the job's environment";
  slurm_info("clairfs: job %u caches %s on its %u nodes at %s", job, dataset_arg.c_str(), nodes,
             mountpoint.c_str());
  if (manifest_arg.empty() || !first) return "";
  return Register(sp, p, job, user, mountpoint);
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int, char**) {
  for (auto& opt : kOptions) {
    if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) return -1;
  }
  return 0;
}

// As root in slurmstepd, before privileges are dropped: mount (or join) and register.
int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  if (spank_context() != S_CTX_REMOTE || (dataset_arg.empty() && daemons_arg.empty())) return 0;
  uint32_t step = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == SLURM_EXTERN_CONT)
    return 0;  // the extern step runs no task of the job
  try {
    const PluginArgs p = ParseArgs(ac, av);
    const uint32_t nodes = JobNodes(sp);
    const bool cluster = cache_arg.empty() ? p.cluster_default : cache_arg == "cluster";
    const std::string e = !daemons_arg.empty()   ? PrepareDaemons(sp, p)
                          : nodes > 1 && cluster ? ClusterForJob(sp, p, nodes)
                                                 : MountForJob(sp, p);
    if (!e.empty()) {
      failure = e;
      slurm_error("clairfs: %s", e.c_str());
    }
  } catch (const std::exception& ex) {
    failure = std::string("internal error: ") + ex.what();
    slurm_error("clairfs: %s", failure.c_str());
  }
  return 0;  // reported by task_init (see the contract above)
}

// In each task, as the user, with the job's output open: a failed mount fails the task.
int slurm_spank_task_init(spank_t, int, char**) {
  if (failure.empty()) return 0;
  std::fprintf(stderr, "clairfs: %s\n%s\n", failure_header.c_str(), failure.c_str());
  std::fflush(stderr);
  return -1;
}

// At the end of the job, in slurmd's epilog, as root: leave every mount; never fails.
int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  uint32_t job = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return 0;
  try {
    const PluginArgs p = ParseArgs(ac, av);
    std::vector<std::string> args = {"release", std::to_string(job)};
    args.insert(args.end(), p.settings.begin(), p.settings.end());
    if (auto e = RunHelper(p, args, nullptr, nullptr); !e.empty())
      slurm_error("clairfs: releasing job %u: %s", job, e.c_str());
  } catch (const std::exception& ex) {
    slurm_error("clairfs: releasing job %u: %s", job, ex.what());
  }
  return 0;
}

}  // extern "C"
