// PeerOptions: the settings of this node's part in the cluster (ClusterNode and its parts).
#pragma once

#include <chrono>

namespace clairfs::cluster {

struct PeerOptions {
  std::chrono::milliseconds plan_timeout{30'000};  // longest wait for the other nodes' plans
  std::chrono::milliseconds peer_timeout{2'000};   // longest wait for one peer's reply
  std::chrono::milliseconds down_for{60'000};      // a peer that missed a reply is skipped so long
  int serve_threads = 2;                           // threads answering peers' requests
  std::chrono::milliseconds announce_every{20};    // announcements are batched this long
};

}  // namespace clairfs::cluster
