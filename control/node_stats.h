// NodeStats: every counter of a daemon, each group defined in the layer that counts it, held
// together by the composition root (daemon/compose.h) and read by .clairfs/stats and metrics
// (control/stats_view.h). Each part gets a reference to its own group only.
#pragma once

#include "batch/batch_stats.h"
#include "cache/base/stats.h"
#include "cluster/cluster_stats.h"
#include "fs/core/fs_stats.h"
#include "fs/fresh/fresh_stats.h"

namespace clairfs {

struct NodeStats {
  Stats cache;           // the cache: tiers, staging, fetches, the backing store, stat-ahead
  FsStats fs;            // the dataset mount's core: reads, access refusals
  WatchStats watch;      // the backing watch
  FreshStats fresh;      // the revalidation
  ClusterStats cluster;  // the peer tier
  BatchStats batch;      // the batch path (batch/batch_server.h)
};

}  // namespace clairfs
