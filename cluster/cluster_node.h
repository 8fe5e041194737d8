// ClusterNode: this node's part in the cluster (docs/architecture.md, "The peer tier"), over a
// Transport. It owns one class per job and joins them:
//   PlacementCoordinator  the plan exchange and the cluster placement (which node holds what)
//   PeerDirectory         who holds what: the other nodes' announcements, and this node's
//   PeerReader            the read path: a PeerSource the fetcher asks after the local tiers
//   PeerServer            answers the other nodes' requests and keeps what they push
//   PeerLiveness          which ranks are live (down, gone, refused)
// and runs two threads: a receiver that checks every message's header and hands it to its
// class, and a planner that sends this node's announcements (batched, every announce_every)
// and re-places the plan when the coordinator says a placement is due. A peer whose messages
// carry another protocol version (protocol.h) is refused and treated as down.
//
// Thread-safe. Lock order: wake_mu_ is a leaf; the parts' locks are their own (see each
// header), none is held while calling another part except as those headers say.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/plan/place.h"
#include "cache/plan/plan.h"
#include "cache/prefetch/cluster_hooks.h"
#include "cluster/cluster_stats.h"
#include "cluster/peer_bytes.h"
#include "cluster/peer_directory.h"
#include "cluster/peer_liveness.h"
#include "cluster/peer_options.h"
#include "cluster/peer_reader.h"
#include "cluster/peer_server.h"
#include "cluster/placement_coordinator.h"
#include "cluster/transport.h"

namespace clairfs::cluster {

class ClusterNode {
 public:
  using LocalLookup = PeerServer::LocalLookup;
  using Adopt = PeerServer::Adopt;
  using Fetch = PeerServer::Fetch;

  // transport and stats must outlive the node; failed transport calls are counted in
  // Stats::mpi_errors.
  ClusterNode(Transport& transport, PeerOptions options, ClusterStats* stats);
  ~ClusterNode();

  // Starts the threads. replan re-places the active plan (Prefetcher::Replan); it is called
  // from the planner thread with no lock held. lookup, adopt and fetch: PeerServer.
  void Start(LocalLookup lookup, std::function<void()> replan, Adopt adopt = nullptr,
             Fetch fetch = nullptr);
  // Tells the other nodes that this one leaves and joins the threads; waiting readers return
  // kUnavailable at once. Idempotent.
  void Stop();

  // The prefetcher's hooks into this node: place, held, fetched and the peer source.
  ClusterHooks Hooks(double backing_advantage);

  // ClusterHooks::place: PlacementCoordinator::Place.
  bool Place(Plan& plan, const PlacementLimits& limits, bool replan);
  // ClusterHooks::held: a local tier holds key at version; announced with the next batch.
  void Held(const std::string& key, const FileVersion& version);
  // ClusterHooks::fetched: this node read key from the backing store. If another node owns it
  // (so had not announced it yet), the bytes are pushed to that node, which keeps them
  // instead of reading the backing store for the same object again.
  void Fetched(const std::string& key, const BlobPtr& blob);
  // The cluster section of .clairfs/plan, as JSON text.
  std::string InfoJson() const { return coordinator_.InfoJson(); }

  // The read path (ClusterHooks::peer).
  PeerSource& source() { return reader_; }
  const PeerDirectory& directory() const { return directory_; }

 private:
  void ReceiveLoop();
  void PlanLoop();
  void Dispatch(Message m);
  void Wake();
  // Sends bytes to every reachable rank.
  void Broadcast(int tag, const std::vector<char>& bytes);

  Transport& transport_;
  const PeerOptions options_;
  ClusterStats* const stats_;
  std::function<void()> replan_;

  PeerLiveness liveness_;
  PeerDirectory directory_;
  PeerDamage damage_;
  PeerReader reader_;
  PeerServer server_;
  PlacementCoordinator coordinator_;

  std::atomic<bool> stop_{false};
  std::mutex wake_mu_;  // leaf: guards woken_ and started_
  std::condition_variable wake_cv_;
  bool woken_ = false;  // the planner is asked to look before its tick
  bool started_ = false;
  std::vector<std::thread> threads_;  // receiver and planner
};

}  // namespace clairfs::cluster
