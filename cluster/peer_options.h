// Options of this node's part in the cluster (cluster/cluster_node.h and its parts).
// Plain structs with only standard headers (docs/configuration.md, "Defaults"): the member
// initialisers are the one place each default is written; conf/ parses the YAML keys named
// beside each member into them, and conf/clairfs.yaml must equal them (tests/unit/config_test).
#pragma once

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

  bool operator==(const PeerOptions&) const = default;
};

}  // namespace clairfs::cluster
