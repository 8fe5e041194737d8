// DaemonParts: the composition root. Every part of a running daemon is built here, from the
// validated Config and the paths of a Start (daemon/start.h), in one place and in the order
// they depend on each other: the dataset (PosixBacking), the config fitted to the machine
// (ResolveForDataset) and the log, the tiers, the Prefetcher, the ControlPlane, the
// AccessPolicy, the FUSE adapter (ClairFs) and the control files (ControlFs), and in cluster
// mode the ClusterNode wired into the prefetcher. Nothing is started: daemon/serve.h mounts,
// daemonizes and starts the threads. Parts are destroyed in the reverse order of their
// construction (the members' order below).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/backing/backing.h"
#include "cache/base/stats.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ssd_tier.h"
#include "cluster/cluster_node.h"
#include "conf/config.h"
#include "daemon/command_line.h"
#include "daemon/start.h"
#include "fs/access.h"
#include "fs/clairfs_fs.h"
#include "fs/control.h"
#include "fs/control_fs.h"

namespace clairfs {

class DaemonParts {
 public:
  // Builds every part from start (its config is fitted to the machine here; start.transport,
  // when set, must outlive the parts). SSD tiers are opened now in the foreground, else only
  // prepared (SsdTier::Prepare; ReopenSsdTiers after the fork). On failure prints the reason
  // and sets *exit_code to the status to exit with, and what was built is taken back (an SSD
  // cache directory made by this start is removed).
  static std::unique_ptr<DaemonParts> Build(Start& start, const CommandLine& cl, int* exit_code);

  ~DaemonParts() = default;
  DaemonParts(const DaemonParts&) = delete;
  DaemonParts& operator=(const DaemonParts&) = delete;

  const Config& config() const { return config_; }
  PosixBacking& backing() { return *backing_; }
  Prefetcher& prefetcher() { return *prefetcher_; }
  ClairFs& fs() { return *fs_; }
  ControlFs& control_fs() { return *control_fs_; }
  cluster::ClusterNode* peer() { return peer_.get(); }  // null outside cluster mode

  // After fuse_daemonize: opens the SSD tiers that were only prepared (a no-op in the
  // foreground). Fails with the first tier that cannot be opened.
  Status ReopenSsdTiers();
  // From here on a stop keeps the SSD cache directories (until then a failed start removes
  // the ones it made).
  void Serving() { start_guard_.Serving(); }
  // Closes the SSD tiers (RocksDB), the last step of a stop.
  void CloseSsdTiers();

 private:
  // Until Serving(): a start that fails takes back the SSD cache directories it made
  // (SsdTier::Abandon), so that a failed start leaves no empty cache behind. Declared after the
  // tiers it names, so that it runs while they are still alive.
  class StartGuard {
   public:
    explicit StartGuard(const std::vector<SsdTier*>& tiers) : tiers_(tiers) {}
    ~StartGuard() {
      if (serving_) return;
      for (auto* t : tiers_) t->Abandon();
    }
    StartGuard(const StartGuard&) = delete;
    StartGuard& operator=(const StartGuard&) = delete;
    void Serving() { serving_ = true; }

   private:
    const std::vector<SsdTier*>& tiers_;
    bool serving_ = false;
  };

  DaemonParts() = default;

  Config config_;
  Stats stats_;
  std::unique_ptr<PosixBacking> backing_;
  std::vector<std::unique_ptr<Tier>> tiers_;
  std::vector<Tier*> tier_ptrs_;
  std::vector<SsdTier*> ssd_tiers_;  // closed across the daemonizing fork
  StartGuard start_guard_{ssd_tiers_};
  std::unique_ptr<Prefetcher> prefetcher_;
  std::unique_ptr<ControlPlane> control_;
  std::unique_ptr<AccessPolicy> access_;
  std::unique_ptr<ClairFs> fs_;
  std::unique_ptr<ControlFs> control_fs_;
  std::unique_ptr<cluster::ClusterNode> peer_;
};

}  // namespace clairfs
