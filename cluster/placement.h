// Cluster-wide placement: which node's tiers hold which object (a whole file or a chunk,
// cache/base/object_key.h), from every node's plan digest. Pure functions, no MPI: the same digests
// give the same result on every node. "file" below means object.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/base/string_map.h"
#include "cache/plan/plan.h"
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

// What ApplyPlacement decided for this node.
struct LocalPlacement {
  uint64_t owned_files = 0, owned_bytes = 0;            // files this node's tiers will hold
  uint64_t from_peers_files = 0, from_peers_bytes = 0;  // read here, held by another node
  std::unordered_map<int, uint64_t> from_peer_files;    // rank -> files expected from it
  uint64_t unowned_files = 0, unowned_bytes = 0;        // read here, held by no node
};

// Places this node's plan: the files it owns go to its tiers (by its own frequency, then
// first read cluster-wide, fastest tier first; files it owns but does not read are appended
// to the plan), fetched in order of first read across the cluster; every other file it reads
// is staged in read order (from its owner if that node holds it by then) or read directly
// when larger than the staging window. Fills plan.tier_order.
LocalPlacement ApplyPlacement(Plan& plan, const PlacementLimits& limits,
                              const ClusterPlacement& placement,
                              const std::vector<const Digest*>& digests, int rank);

}  // namespace clairfs::cluster
