// PlacementCoordinator: agrees with the other nodes on which node's tiers hold which object.
// It owns the exchange of plan digests (kPlan) and the cluster placement (placement.h) built
// from them; the rest of the cluster code sees only Place(), the owner of an object this node
// reads but does not hold (PeerOwner), whether a placement is due (ReplanDue) and its report.
// A change of how the cluster agrees on placement (more nodes, another exchange) lands here.
//
// Plans. When this node registers a manifest, Place() sends its plan digest to every
// reachable rank, with the node's catalog (its object keys and versions: protocol.h) only
// where that rank was not sent the same catalog before, as after an epoch appended over the
// same files. Once every live rank's digest is here, or plan_timeout after this node
// registered, every node computes the same cluster placement and its prefetcher fills what
// this node owns. A digest that arrives later (a late node, new epochs), a node that leaves or
// one marked down (Invalidate) makes a new placement due. Until the first placement the
// prefetcher holds, so nodes do not all read the same files from the backing store.
//
// Thread-safe; OnPlan from the receiving thread only. Lock order: mu_ before PeerLiveness's.
// Transport calls may be made under mu_; the wake callback is called with mu_ released.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/base/stats.h"
#include "cache/base/string_map.h"
#include "cache/plan/plan.h"
#include "cluster/peer_liveness.h"
#include "cluster/peer_options.h"
#include "cluster/placement.h"
#include "cluster/protocol.h"
#include "cluster/transport.h"

namespace clairfs::cluster {

class PlacementCoordinator {
 public:
  // wake: tells the planner thread to look again (ReplanDue) without waiting for its tick.
  // transport, liveness and stats must outlive the coordinator.
  PlacementCoordinator(Transport& transport, PeerLiveness& liveness, const PeerOptions& options,
                       Stats* stats, std::function<void()> wake);

  // ClusterHooks::place: see the header comment. Returns false while the placement waits for
  // other nodes' plans.
  bool Place(Plan& plan, const PlacementLimits& limits, bool replan);
  // A kPlan from r (its header checked). A digest that does not decode (malformed, a damaged
  // catalog, or naming a catalog this node does not hold) is counted in
  // Stats::peer_protocol_errors and logged once per reason; r's earlier digest is dropped, so
  // r counts as unregistered (placed without it once plan_timeout passed) until it sends a
  // digest that decodes. A newer digest brings r back (PeerLiveness::MarkBack).
  void OnPlan(int r, std::string_view bytes);
  // A rank stopped being live: the placement is redone.
  void Invalidate();
  // For the planner: whether to place now (the first placement, once every live rank
  // registered or the deadline passed; a new one after a change). Clears the change.
  bool ReplanDue();
  // The rank that owns key, when this node reads key and another node owns it.
  std::optional<int> PeerOwner(const std::string& key) const;
  // The cluster section of .clairfs/plan, as JSON text.
  std::string InfoJson() const;

 private:
  // mu_ held: the live ranks (not this one) that have not registered a plan.
  std::vector<int> UnregisteredLocked() const;
  // mu_ held: sends mine to every reachable rank, with its catalog where that rank was not
  // sent this catalog yet (a rank skipped as gone or refused gets it next time).
  void SendDigestLocked(const Digest& mine);
  void RefuseDigest(int r, const std::string& why);

  Transport& transport_;
  PeerLiveness& liveness_;
  const PeerOptions options_;
  Stats* const stats_;
  const std::function<void()> wake_;
  const int rank_, size_;

  mutable std::mutex mu_;  // guards the members below up to the receiver's; before PeerLiveness's
  std::vector<std::optional<Digest>> digests_;         // by rank; this node's own included
  std::vector<std::optional<uint64_t>> catalog_sent_;  // by rank: hash of the last catalog sent
  uint64_t plan_bytes_sent_ = 0;                       // kPlan bytes sent, all ranks
  uint64_t catalog_sends_ = 0;                         // kPlan messages that carried the catalog
  uint64_t generation_ = 0;
  bool registered_ = false;  // this node has a plan
  std::chrono::steady_clock::time_point registered_at_;
  bool placed_ = false;  // the active plan has a cluster placement
  bool dirty_ = false;   // digests or liveness changed since the last placement
  ClusterPlacement totals_;
  LocalPlacement local_;
  std::vector<int> placed_ranks_;
  bool said_waiting_ = false;      // the wait for this registration's missing ranks was logged
  std::vector<int> said_missing_;  // the ranks the last placement was logged to lack
  StringMap<int> peer_owner_;      // objects read here that another node owns

  // Receiver thread only: the last catalog accepted from each rank, and the reason its last
  // digest was refused (empty: it decoded).
  std::vector<std::optional<Catalog>> catalogs_;
  std::vector<std::string> digest_error_;
};

}  // namespace clairfs::cluster
