// Options of this node's part in the cluster (cluster/cluster_node.h and its parts).
// Plain structs with only standard headers (docs/configuration.md, "Defaults"): the member
// initialisers are the one place each default is written; conf/ parses the YAML keys named
// beside each member into them, and conf/clairfs.yaml must equal them (tests/unit/config_test).
#pragma once

#include <algorithm>
#include <chrono>

namespace clairfs::cluster {

struct PeerOptions {
  std::chrono::milliseconds plan_timeout{
      30'000};  // cluster.plan_timeout: longest wait for the other nodes' plans
  std::chrono::milliseconds peer_timeout{
      2'000};  // cluster.peer_timeout: longest wait for one peer's reply
  std::chrono::milliseconds down_for{60'000};  // cluster.down_for: a peer that missed a reply is
                                               // skipped so long
  int serve_threads = 2;  // cluster.serve_threads: threads answering peers' requests
  std::chrono::milliseconds announce_every{
      20};  // not a config key: announcements are batched this long
  std::chrono::milliseconds report_every{
      2'000};  // not a config key: the shortest report period (ReportPeriod)

  bool operator==(const PeerOptions&) const = default;
};

// How often a node of a cluster of `ranks` sends its report (node_report.h) to every other:
// report_every, stretched to 10 ms per rank in larger clusters, so that a node sends and
// receives at most 100 reports a second whatever the cluster's size (2 s up to 200 ranks,
// 10.24 s at 1,024).
inline std::chrono::milliseconds ReportPeriod(const PeerOptions& o, int ranks) {
  return std::max(o.report_every, std::chrono::milliseconds(10) * ranks);
}

// A live rank whose last report is older than this is shown stale: three periods, so that
// one report lost or late on a loaded node does not flag it.
inline std::chrono::milliseconds ReportStaleAfter(const PeerOptions& o, int ranks) {
  return 3 * ReportPeriod(o, ranks);
}

}  // namespace clairfs::cluster
