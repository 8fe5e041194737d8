// ReportTable: the latest report (node_report.h) of every other rank, with when it arrived, and
// the rows of .clairfs/stats' "cluster" section built from it: each rank's state (alive, stale,
// down, gone, ...) from PeerLiveness and the report's age.
//
// Thread-safe. Lock order: mu_ is a leaf (Rows reads PeerLiveness after releasing it).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <vector>

#include "cluster/node_report.h"
#include "cluster/peer_liveness.h"

namespace clairfs::cluster {

class ReportTable {
 public:
  using Clock = std::chrono::steady_clock;

  // A table for ranks [0, size) of which `rank` is this node.
  ReportTable(int rank, int size);

  // Keeps report as rank r's latest, arrived at `at`. False (nothing kept) when r is this node
  // or out of range, or the report names another rank than its sender.
  bool Record(int r, NodeReport report, Clock::time_point at);

  // Every rank's row, in rank order: this node's is `own` (kSelf, age 0); another rank is
  // refused, gone or down as liveness says, else silent without a report, stale when its report
  // is older than stale_after at now, else alive.
  std::vector<ClusterRow> Rows(const NodeReport& own, const PeerLiveness& liveness,
                               Clock::time_point now, std::chrono::milliseconds stale_after) const;

 private:
  struct Entry {
    NodeReport report;
    Clock::time_point at;
  };
  const int rank_, size_;
  mutable std::mutex mu_;                     // leaf: guards latest_
  std::vector<std::optional<Entry>> latest_;  // by rank
};

}  // namespace clairfs::cluster
