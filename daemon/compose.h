// DaemonParts: the composition root. Every part of a running daemon is built and wired here,
// from the validated Config and the paths of a Start (daemon/start.h), in one place and in the
// order they depend on each other: the dataset (PosixBacking), the config fitted to the machine
// (ResolveForDataset) and the log, the tiers, the Prefetcher, the control plane (Registrar,
// ControlViews), the AccessPolicy, the FUSE adapter (ClairFs) and the control files (ControlFs),
// and in cluster mode the ClusterNode wired into the prefetcher (compose.cc). The threads are
// started once serving (compose_threads.cc): the parts that keep the kernel's caches fresh
// (Revalidator, BackingWatch, StatAhead) wired to the adapter's notifications and the
// prefetcher's plan, the batch path (batch/batch_server.h, its socket beside the control mount),
// the peer tier wired to the prefetcher, and the prefetcher. Mounting,
// daemonizing and the session loop are daemon/serve.h's. Parts are destroyed in the reverse
// order of their construction (the members' order below).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "batch/batch_reader.h"
#include "batch/batch_server.h"
#include "cache/backing/backing.h"
#include "cache/backing/stat_ahead.h"
#include "cache/base/stats.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ssd_tier.h"
#include "cluster/cluster_node.h"
#include "conf/config.h"
#include "control/node_stats.h"
#include "control/registrar.h"
#include "control/views.h"
#include "daemon/command_line.h"
#include "daemon/start.h"
#include "fs/access.h"
#include "fs/clairfs_fs.h"
#include "fs/control_fs.h"
#include "fs/fresh/backing_watch.h"
#include "fs/fresh/revalidate.h"

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

  // Once mounted, after any daemonizing fork, before the session loop: starts what keeps the
  // kernel's caches fresh (unless fuse.immutable, the revalidation sweep, fs/fresh/revalidate.h;
  // with open_mode none, the watch of the backing store, fs/fresh/backing_watch.h,
  // fuse.watch_backing, and with fuse.stat_ahead the stats ahead of the reads,
  // cache/backing/stat_ahead.h, which the watch vouches for and which, unless immutable, are
  // compared with what the kernel was given), then the peer tier and the prefetcher. A part
  // that cannot start is logged and leaves the rest going.
  void StartThreads();
  // After the session loop and backing().Stop(): stops the batch path (its socket removed,
  // `.clairfs/batch` gone), before the parts it reads through stop.
  void StopBatch();
  // After the session loop and backing().Stop(): stops the freshness threads.
  void StopFreshness();
  // Then, once the control mount is down: the prefetcher, then the peer tier. stage names each
  // step for the stop's log (Lifecycle::SetStage).
  void StopThreads(const std::function<void(const char*)>& stage);

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
  void StartFreshness();  // StartThreads's first step
  // StartThreads's second step: the batch path (docs/batch-path.md), unless batch.enabled is
  // false. A socket that cannot be made is logged and leaves the batch path off.
  void StartBatch();

  Config config_;
  NodeStats stats_;  // every counter, each part given its own group
  std::unique_ptr<PosixBacking> backing_;
  std::vector<std::unique_ptr<Tier>> tiers_;
  std::vector<Tier*> tier_ptrs_;
  std::vector<SsdTier*> ssd_tiers_;  // closed across the daemonizing fork
  StartGuard start_guard_{ssd_tiers_};
  std::unique_ptr<Prefetcher> prefetcher_;
  std::unique_ptr<Registrar> registrar_;
  std::unique_ptr<ControlViews> views_;
  std::unique_ptr<AccessPolicy> access_;
  std::unique_ptr<ClairFs> fs_;
  std::unique_ptr<ControlFs> control_fs_;
  std::unique_ptr<cluster::ClusterNode> peer_;
  // Set by StartThreads (StartFreshness), stopped by StopFreshness: the revalidation sweep
  // (unless fuse.immutable), the stats ahead (whose batches the sweep checks, so stopped and
  // destroyed first) and the watch (whose hooks reach the stats ahead).
  std::unique_ptr<Revalidator> revalidator_;
  std::unique_ptr<StatAhead> ahead_;
  std::unique_ptr<BackingWatch> watch_;
  // The batch path: the socket's path (beside the control mount) and whether the mount lets
  // other users in, set by Build; the reader and server, set by StartBatch (declared last:
  // destroyed, so stopped, before every part they read through).
  std::string batch_path_;
  bool allow_other_ = false;
  std::unique_ptr<BatchReader> batch_reader_;
  std::unique_ptr<BatchServer> batch_;
};

}  // namespace clairfs
