// Who holds what, decided object by object by its coordinator (coordinator_ring.h) from the
// parts of the nodes that read it (plan_parts.h). Pure functions, no MPI.
//
// Reader side: MakeParts splits this node's plan by coordinator; ApplyHolders places the plan
// once the coordinators answered. Coordinator side: DecideHolders.
//
// A node names in its parts, besides what it reads, what its tiers hold that it does not read
// (PlanObject::held with freq 0: a restarted node's disk from its previous plan), so that a
// restart reads again only what no remaining node holds, whoever reads it now. Such an object
// is placed like a held object that is read: with its holder when that has budget left, and
// then served to its readers from there; an object that only nodes that do not read it name
// has no holder (its holders drop it) and counts in no total.
//
// The rule, per object, the objects some reader or holder holds already first (a restarted
// cluster's disks), then in order of cluster-wide frequency (ties: earliest first read, then key
// hash): the holder is a node that holds it already, a reader of it first (so a restart reads again
// only what no node kept), else the reader that reads it most (so an object only one node reads
// stays on that node, as in a sharded dataset); among readers reading it equally often, the one
// with the most budget left at this coordinator (so objects all nodes read alike spread evenly over
// them, by capacity), then the ranks in turn from the coordinator's. A reader whose budget at
// this coordinator is spent is skipped for the next one; an object no reader has budget for
// has no holder and is read from the backing store by each of its readers.
//
// A node's budget at a coordinator is set by the node itself, in its part (MakeParts): the
// bytes it holds there already (a restarted node's disk: it keeps them), plus its capacity
// left beside what it holds, split over the coordinators by the bytes it reads at each
// weighted by how often it reads them (bytes x freq), times kBudgetSlack; never more than the
// bytes it reads there; all of them when it can hold everything it reads. A restarted node is
// so given new objects only for the room it has, and the objects of a node that left go to
// the nodes with room, a new node first. The budgets add up to the node's capacity with some
// slack for the spread, and follow where its frequent reads are: a node of the locality-aware
// sampler reads its own objects in nearly every epoch and a few others once, in uneven counts
// per coordinator, and gets room at each for the objects it will be given there. A reader takes an
// object while any of its budget is left, so the last object may overshoot it: on a large cluster
// the budget at one coordinator is a few objects or less (capacity / N), and a rule that needed the
// whole object to fit would give small budgets nothing. What a holder is given beyond its real
// capacity (the slack, the overshoots) it does not hold (ApplyHolders), and those objects' readers
// read them from the backing store.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "cache/plan/place.h"
#include "cache/plan/plan.h"
#include "cluster/coordinator_ring.h"
#include "cluster/plan_parts.h"

namespace clairfs::cluster {

inline constexpr double kBudgetSlack = 1.25;

// Reader side. The parts of plan for every rank of ring (by rank, size ranks; a rank not on
// the ring gets an empty part too): its objects read at least once or held (PlanObject::held;
// an object held and not read has freq 0 and first 0xFFFFFFFF), by coordinator, in plan order,
// and its budget at each (see above) from capacity, the bytes of its tiers. seq is left 0 for
// the sender to set.
std::vector<Part> MakeParts(const Plan& plan, const CoordinatorRing& ring, uint64_t capacity,
                            uint64_t generation, int ranks);

// Coordinator side: one reader's latest part.
struct ReaderPart {
  int rank = -1;
  const Part* part = nullptr;
};
struct Decision {
  std::vector<Assignment> assignments;  // aligned with the parts given, seq set
  CoordinatorTotals totals;
};
// coordinator: this coordinator's rank, of ranks. At most one part per rank. The same arguments
// give the same decision on any node.
Decision DecideHolders(const std::vector<ReaderPart>& parts, int coordinator, int ranks);

// What one coordinator said about an object this node reads.
struct HolderInfo {
  int holder = kNoHolder;
  uint32_t cluster_first = 0;  // when holder is this node: earliest first read cluster-wide
};

// What ApplyHolders decided for this node.
struct LocalPlacement {
  uint64_t owned_files = 0, owned_bytes = 0;              // objects this node's tiers will hold
  uint64_t kept_unread_files = 0, kept_unread_bytes = 0;  // of those, held for peers, not read
  uint64_t spare_files = 0, spare_bytes = 0;  // of those, copies another node or none is to hold
  uint64_t from_peers_files = 0, from_peers_bytes = 0;  // read here, held by another node
  std::unordered_map<int, uint64_t> from_peer_files;    // rank -> objects expected from it
  uint64_t unowned_files = 0, unowned_bytes = 0;        // read here, held by no node
};

// Places this node's plan from holders (by key hash; an object missing there, or whose
// holder is not live, has no holder): what it holds goes to its tiers by its own frequency,
// then cluster-wide first read, fastest tier first, and is fetched in cluster-wide first-read
// order; what does not fit is staged. An object it holds and does not read (freq 0, held) that
// the coordinator left with it goes to its tiers the same way (after the objects it reads, as
// its frequency is 0; kept before objects given anew when the tiers are short: see below), so
// that the tiers keep it and serve it to its readers. An object the tiers hold (PlanObject::held)
// that the placement gives another node or none stays in the room the tiers have left after
// what this node was given (read here first, the most read first): a copy that costs no read,
// served here, and found by a later placement (a restart) where a placement made while ranks
// came and went (a job's end) would have evicted it; what does not fit is evicted. Every other
// object it reads is staged in read order (kPeer when another node holds it) or read directly when
// larger than the staging window. Fills plan.tier_order.
template <typename Live>
LocalPlacement ApplyHolders(Plan& plan, const PlacementLimits& limits,
                            const std::unordered_map<uint64_t, HolderInfo>& holders, int rank,
                            Live live);

// Puts the objects of ordered (ids of plan, in priority order) in the fastest tier each still
// fits in, appending each to plan.tier_order (which must have a list per tier) and counting it
// in out's owned_*; an object that fits nowhere keeps its place.
void FillTiers(Plan& plan, const PlacementLimits& limits, const std::vector<uint32_t>& ordered,
               LocalPlacement* out);

// The non-template part of ApplyHolders: holder[i] and first[i] per plan object.
LocalPlacement ApplyHolderList(Plan& plan, const PlacementLimits& limits,
                               const std::vector<int>& holder, const std::vector<uint32_t>& first,
                               int rank);

template <typename Live>
LocalPlacement ApplyHolders(Plan& plan, const PlacementLimits& limits,
                            const std::unordered_map<uint64_t, HolderInfo>& holders, int rank,
                            Live live) {
  std::vector<int> holder(plan.objects.size(), kNoHolder);
  std::vector<uint32_t> first(plan.objects.size(), 0);
  for (size_t i = 0; i < plan.objects.size(); ++i) {
    if (plan.objects[i].freq == 0 && !plan.objects[i].held) continue;
    auto it = holders.find(KeyHash(plan.objects[i].key));
    if (it == holders.end()) continue;
    if (it->second.holder != rank && !(it->second.holder >= 0 && live(it->second.holder))) continue;
    holder[i] = it->second.holder;
    first[i] = it->second.cluster_first;
  }
  return ApplyHolderList(plan, limits, holder, first, rank);
}

}  // namespace clairfs::cluster
