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
// - at the job's end (job_epilog, in slurmd, as root): clairfs-slurm release; a mount no live
//   job uses is unmounted. It never fails (a failing epilog drains the node): problems go to
//   slurmd's log.
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
#include <slurm/spank.h>
}

#include "tools/slurm/spawn.h"

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

spank_option kOptions[] = {
    {const_cast<char*>("clairfs"), const_cast<char*>("DATASET"),
     const_cast<char*>("Mount DATASET with clairfs on each node of the job before it starts "
                       "(CLAIRFS_MOUNT names the mount)"),
     1, 0, OnDataset},
    {const_cast<char*>("clairfs-manifest"), const_cast<char*>("FILE"),
     const_cast<char*>("Register FILE (a clairfs manifest) on the --clairfs mount before the job "
                       "starts"),
     1, 0, OnManifest},
};

struct PluginArgs {
  std::string helper = CLAIRFS_SLURM_HELPER;
  std::vector<std::string> settings;  // every argument, passed on to clairfs-slurm
  std::chrono::seconds timeout{120};
};

PluginArgs ParseArgs(int ac, char** av) {
  PluginArgs p;
  for (int i = 0; i < ac; ++i) {
    const std::string arg = av[i];
    p.settings.push_back(arg);
    if (arg.starts_with("helper=")) p.helper = arg.substr(7);
    if (arg.starts_with("timeout=")) p.timeout = std::chrono::seconds(std::atol(arg.c_str() + 8));
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
  if (spank_context() != S_CTX_REMOTE || dataset_arg.empty()) return 0;
  try {
    const std::string e = MountForJob(sp, ParseArgs(ac, av));
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
