// PlacementCoordinator: agrees with the other nodes on which node's tiers hold which object.
// It owns the partitioned plan exchange (plan_parts.h: kPart, kAssign) in both of a node's
// roles; the rest of the cluster code sees only Place(), the owner of an object this node
// reads but does not hold (PeerOwner), whether a placement is due (ReplanDue), Coordinate()
// and its report. A change of how the cluster agrees on placement lands here.
//
// As a reader: when this node registers a manifest, Place() splits its plan by coordinator
// (coordinator_ring.h: every live rank coordinates about 1/N of the objects, computed from
// the key alone) and sends every reachable rank its part, an empty one included. The first
// placement waits until every coordinator answered, or plan_timeout after the registration;
// later answers (a late node, new epochs, a changed holder) make a new placement due. A
// re-registration after a placement places at once with the holders known, and again when the
// answers come. When the live set changes, the ring does, and only the parts that changed are
// sent again, and of those only the change (a part naming the one before, the entries it
// drops and the ones it adds): a rank that leaves or joins costs the others about 1/N of a
// registration.
//
// As a coordinator: Coordinate() (the planner thread) decides the holders of the objects this
// node coordinates (holders.h) once every live rank's part is here, or plan_timeout after the
// first part arrived, and again whenever a part arrives or a rank stops being live; it sends
// each reader its assignment when that changed.
//
// Per node, the plan costs about 16 bytes per object it reads sent and as many per object
// read received (its parts out, the parts of the objects it coordinates in), and the
// assignments, 1-5 bytes per entry: nothing is sent to every rank but an empty part and an
// assignment's totals.
//
// Thread-safe; OnPart and OnAssign from the receiving thread only, Coordinate from the
// planner only. Lock order: mu_ before PeerLiveness's. Transport calls may be made under mu_;
// the wake callback is called with mu_ released.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/base/string_map.h"
#include "cache/plan/place.h"
#include "cache/plan/plan.h"
#include "cluster/cluster_stats.h"
#include "cluster/coordinator_ring.h"
#include "cluster/holders.h"
#include "cluster/peer_liveness.h"
#include "cluster/peer_options.h"
#include "cluster/plan_parts.h"
#include "cluster/transport.h"

namespace clairfs::cluster {

class PlacementCoordinator {
 public:
  // wake: tells the planner thread to look again (Coordinate, ReplanDue) without waiting for
  // its tick. transport, liveness and stats must outlive the coordinator.
  PlacementCoordinator(Transport& transport, PeerLiveness& liveness, const PeerOptions& options,
                       ClusterStats* stats, std::function<void()> wake);

  // ClusterHooks::place: see the header comment. Returns false while the first placement of a
  // registration waits for the coordinators.
  bool Place(Plan& plan, const PlacementLimits& limits, bool replan);
  // A kPart / kAssign from r (its header checked). One that does not decode is counted in
  // Stats::peer_protocol_errors and logged once per reason; a refused part drops r's earlier
  // one, so r counts as unregistered until it sends one that decodes. A part brings r back
  // (PeerLiveness::MarkBack).
  void OnPart(int r, std::string_view bytes);
  void OnAssign(int r, std::string_view bytes);
  // A rank stopped being live (or came back): the ring, the parts and the decisions are redone.
  void Invalidate();
  // For the planner: decides and sends assignments when due (see the header comment). A
  // coordinator that has not answered this node's part within twice plan_timeout is marked
  // down (PeerLiveness::MarkDown), so its objects move to the others instead of staying
  // without a holder: MPI reports no error for a rank that died before it answered.
  void Coordinate();
  // For the planner: whether to place now (the first placement, once every coordinator
  // answered or the deadline passed; a new one after a change). Clears the change.
  bool ReplanDue();
  // The rank that holds key, when this node reads key and another node holds it.
  std::optional<int> PeerOwner(const std::string& key) const;
  // The cluster section of .clairfs/plan, as JSON text.
  std::string InfoJson() const;

 private:
  using Clock = std::chrono::steady_clock;
  // mu_ held: the ring over this node and the live ranks.
  CoordinatorRing LiveRingLocked() const;
  // mu_ held: the live ranks (not this one) whose part has not arrived: not registered.
  std::vector<int> UnregisteredLocked() const;
  // mu_ held: the live coordinators this node sent a part and has no answer from.
  std::vector<int> UnansweredLocked() const;
  // mu_ held: sends p (its seq set here) to r, or keeps it when r is this node. With
  // as_delta, and a part sent to r before, only the change from that one travels when smaller
  // (Part::base); what is kept as sent is then in the order r rebuilds it.
  void SendPartLocked(int r, Part p, bool as_delta = false);
  // mu_ held: r's part arrived (decoded). false: it changes a part this node does not hold.
  bool TakePartLocked(int r, Part p);
  // mu_ held: coordinator r's answer to this node (decoded). false: it does not fit the part.
  bool TakeAssignmentLocked(int r, const Assignment& a);
  void Refuse(int r, const char* what, const std::string& why);

  Transport& transport_;
  PeerLiveness& liveness_;
  const PeerOptions options_;
  ClusterStats* const stats_;
  const std::function<void()> wake_;
  const int rank_, size_;

  mutable std::mutex mu_;  // guards every member below; before PeerLiveness's
  // Reader role.
  uint64_t generation_ = 0;  // of this node's registrations
  uint64_t next_seq_ = 0;
  bool registered_ = false;  // this node has a plan
  Clock::time_point registered_at_;
  CoordinatorRing ring_;                                  // the ring the parts were split on
  std::vector<std::optional<Part>> sent_;                 // by rank: the last part sent there
  std::vector<bool> answered_;                            // by rank: sent_[r] was answered
  std::vector<Clock::time_point> sent_at_;                // by rank: when sent_[r] was sent
  std::vector<std::optional<CoordinatorTotals>> totals_;  // by rank: its last answer's
  std::unordered_map<uint64_t, HolderInfo> holders_;      // by key hash: what coordinators said
  bool placed_ = false;                                   // the active plan has a cluster placement
  bool dirty_ = false;  // answers or liveness changed since the last placement
  LocalPlacement local_;
  std::vector<int> placed_ranks_;
  bool said_waiting_ = false;      // the wait for this registration's missing ranks was logged
  std::vector<int> said_missing_;  // the ranks the last placement was logged to lack
  StringMap<int> peer_owner_;      // objects read here that another node holds
  uint64_t plan_bytes_sent_ = 0, plan_bytes_received_ = 0;  // kPart and kAssign, all ranks
  uint64_t parts_sent_ = 0;
  // Coordinator role.
  std::vector<std::shared_ptr<const Part>> parts_;  // by rank: its latest part
  std::optional<Clock::time_point> first_part_at_;
  bool decided_ = false;                   // a decision was made
  bool coord_dirty_ = false;               // parts or liveness changed since the last decision
  std::vector<uint64_t> assignment_sent_;  // by rank: hash of the last assignment sent (0: none)
  CoordinatorTotals coordinated_;          // the last decision's
  uint64_t coordinated_reads_ = 0;         // part entries it was made from
  double decide_seconds_ = 0;              // how long it took
  std::vector<std::string> refused_;       // by rank: the last reason its message was refused
};

}  // namespace clairfs::cluster
