// The placement of protocol version 4, from every node's whole plan digest (protocol.h): which
// node's tiers hold which object (a whole file or a chunk, cache/base/object_key.h). The daemon
// places with holders.h now; this is kept for tools/bench/cluster_scale's side-by-side of the
// two protocols (--protocol broadcast). Pure functions, no MPI: the same digests give the same
// result on every node. "file" below means object.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/base/string_map.h"
#include "cache/plan/plan.h"
#include "cluster/holders.h"
#include "cluster/protocol.h"

namespace clairfs::cluster {

struct ClusterPlacement {
  StringMap<int> owner;                       // path -> rank whose tiers hold it
  uint64_t files = 0, bytes = 0;              // distinct files of all plans
  uint64_t owned_files = 0, owned_bytes = 0;  // of those, with an owner
  // Bytes the whole cluster will read from the backing store: each owned file once, each
  // other file every time a node reads it.
  uint64_t predicted_backing_bytes = 0;
};

// Files by cluster-wide frequency (ties: earliest first read, then key) each go to the node
// that reads them most (ties: the one reading it first, then a rank order that rotates with
// the key's hash, so that the chunks of a file all nodes read alike are spread over the nodes
// instead of all going to one, and their fetches hit different regions of the file) if its
// tiers still have room, else to the node with the most room left; a file that fits nowhere
// has no owner. digests: at most one per rank.
ClusterPlacement PlaceCluster(const std::vector<const Digest*>& digests);

// This node's digest of plan: its read files (sorted by key, first quantized: protocol.h),
// with capacities from limits.
Digest MakeDigest(const Plan& plan, const PlacementLimits& limits, int rank, uint64_t generation);

// Places this node's plan: the files it owns go to its tiers (by its own frequency, then
// first read cluster-wide, fastest tier first; files it owns but does not read are appended
// to the plan), fetched in order of first read across the cluster; every other file it reads
// is staged in read order (from its owner if that node holds it by then) or read directly
// when larger than the staging window. Fills plan.tier_order.
LocalPlacement ApplyPlacement(Plan& plan, const PlacementLimits& limits,
                              const ClusterPlacement& placement,
                              const std::vector<const Digest*>& digests, int rank);

}  // namespace clairfs::cluster
