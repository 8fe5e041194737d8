// ClusterHooks: how the prefetcher works with other nodes (cluster/). Every member is optional;
// without them the prefetcher serves one node (HDMLP placement, no peers).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "cache/base/object.h"
#include "cache/base/status.h"
#include "cache/plan/place.h"
#include "cache/plan/plan.h"
#include "cache/prefetch/prefetch_options.h"

namespace clairfs {

// PeerSource: the other nodes' tiers, read-only (cluster::PeerReader). Peers fill their own
// tiers: this node never writes to them.
class PeerSource {
 public:
  virtual ~PeerSource() = default;
  // Whether a live peer announced key at version. Answers from memory, without blocking on
  // the network; its locks are leaves (it is called under Prefetcher::mu_).
  virtual bool Contains(std::string_view key, const FileVersion& version) = 0;
  // The object of key at version from a peer that announced it, checked (size, version,
  // hash) before it is returned: kNotFound when no live peer holds it or what came back
  // failed its checks, kUnavailable when the peer did not answer in time or the source is
  // stopping. Blocks for at most the peer deadline.
  virtual Result<BlobPtr> Get(std::string_view key, const FileVersion& version) = 0;
  // The object of key at version from the live node the cluster's placement gives it to,
  // which reads it from the backing store for this reader if it has not yet (once, for every
  // reader and its own fill), checked as Get's: kNotFound when no live node is to hold it or
  // that node does not have it at this version, kUnavailable when it did not answer within its
  // (longer) deadline; the caller then reads the backing store itself. Called when no peer has
  // announced the object. Default: no such node.
  virtual Result<BlobPtr> GetFromHolder(std::string_view key, const FileVersion& version) {
    (void)key;
    (void)version;
    return Status::Error(Code::kNotFound, "no holder");
  }
  // The caller found an object Get or GetFromHolder returned not of the size or version asked
  // for (their contract broken): the source counts it with the peers' protocol errors.
  virtual void CountMismatch() {}
};

struct ClusterHooks {
  // Places the plan instead of PlaceObjects (cache/plan/place.h): sets every object's
  // PlanObject::place and fills plan.tier_order, keeping plan.objects as they are. It returns false
  // while the placement is not known yet: the prefetch threads then hold until Replan(), and
  // readers are still served on demand. `replan`: called from Replan(), not for a new plan.
  // Called with Prefetcher::install_mu_ held and no other prefetcher lock.
  std::function<bool(Plan& plan, const PlacementLimits& limits, bool replan)> place;
  // A local tier holds key at version (the fill stored it or found it there). Called with no
  // prefetcher lock held.
  std::function<void(const std::string& key, const FileVersion& version)> held;
  // key was just read from the backing store (by the prefetch or for a reader). Called with
  // no prefetcher lock held.
  std::function<void(const std::string& key, const BlobPtr& blob)> fetched;
  // Consulted after the local tiers and before the backing store. Not owned.
  PeerSource* peer = nullptr;
  // Source choice: a peer that holds an object is read unless the backing store's measured
  // throughput is more than this many times the peers'; 0 never prefers the backing store.
  double backing_advantage = kDefaultBackingAdvantage;
};

}  // namespace clairfs
