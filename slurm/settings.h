// The administrator's settings of the Slurm integration (plugstack.conf arguments, passed on
// to clairfs-slurm unchanged) and how a job's --clairfs argument becomes a dataset to mount.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace clairfs::slurm {

// What a job on several nodes gets: one clairfs per node caching alone (kNode), or one cluster
// cache formed by the job's nodes (kCluster, docs/slurm.md "One cache for a multi-node job").
enum class MultiNode { kNode, kCluster };

struct Settings {
  std::string mount_root = "/run/clairfs-slurm/mnt";  // datasets are mounted at <mount_root>/<name>
  std::string state_dir = "/run/clairfs-slurm/state";  // locks and the jobs using each mount
  std::string clairfs;                                 // the daemon (default: set by the build)
  std::string config;                                  // -c FILE for clairfs; empty: its default
  std::vector<std::string> options;                    // extra -o values, in order
  std::vector<std::string> allow;                      // dataset prefixes, canonical; empty: none
  std::string cgroup = "/";  // where the daemon goes, under every cgroup hierarchy; "none": stays
  std::string helper;        // clairfs-slurm (the plugin's; default: set by the build)
  std::chrono::seconds timeout{120};  // the whole acquire (lock, mount, registration)
  // Multi-node jobs (slurm/job_cluster.h). multinode= is the default a job may override
  // with --clairfs-cache; a cluster needs cluster_secret, a root-only file with the same bytes
  // on every node (each job's key is derived from it).
  MultiNode multinode = MultiNode::kNode;
  std::string cluster_secret;            // absolute path; empty: no job may form a cluster
  std::string cluster_config;            // -c FILE for a job cluster's daemons; empty: none
  std::string srun = "/usr/bin/srun";    // starts the daemons' step
  std::vector<std::string> cluster_env;  // NAME=value for the daemons' step (cluster_env=)
  // A node-local directory for the job clusters' disk tiers (slurm/job_cluster.h), kept
  // per user and dataset across jobs so that a requeued job finds them; empty: none. The tier
  // is cluster_config's tier number cluster_ssd_tier (a kind: ssd entry), its dir replaced.
  std::string cluster_ssd;
  int cluster_ssd_tier = 1;
};

// Parses "cluster" or "node"; false for anything else.
bool ParseMultiNode(const std::string& value, MultiNode* out);

// Parses `key=value` arguments (plugstack.conf's, in order). `allow=` takes a colon-separated
// list and may repeat; `option=` (alias `options=`) may repeat. Returns an error message naming
// the argument, or "" on success. Prefixes are made canonical (realpath) here; one that does
// not exist on this node is left out (it allows nothing; a job's refusal lists the others).
std::string ParseSettings(const std::vector<std::string>& args, Settings* out);

// The dataset a job asked for, after the admin's rules.
struct Dataset {
  std::string source;      // canonical path of the dataset directory
  std::string name;        // <basename>-<16 hex digits of a hash of source>: unique per source
  std::string mountpoint;  // <mount_root>/<name>
};

// Resolves a job's --clairfs argument: absolute, an existing directory, and (after symlinks
// are resolved) inside one of the allowed prefixes. Returns an error message for the job's
// output, or "" on success.
std::string ResolveDataset(const Settings& s, const std::string& arg, Dataset* out);

// The mountpoint a dataset name gets (the reverse of the name is not needed: every state file
// is keyed by name).
std::string MountpointOf(const Settings& s, const std::string& name);

}  // namespace clairfs::slurm
