// TierStack: the local tiers (fastest first) as one store that follows the active placement.
//
// Objects are named by their key (cache/base/object_key.h): a whole file's path or a chunk's key.
//
// Contract:
// - Lookup: Get answers from the fastest tier holding the object at the asked version; a tier
//   failure is a miss. A miss costs no I/O (Tier::Get's contract).
// - Placement: a tier only ever receives what the active placement assigns to it. Store
//   checks the assignment and puts the object while holding the tier's store gate, and
//   SetPlacement evicts under the same gate, so a store made against an older plan either
//   lands before the eviction (which then removes it) or is refused. After SetPlacement(p)
//   returns, tier t holds only objects p assigns to t or to a faster tier (kept so that the
//   faster tier's fill copies them up instead of reading the backing store), and of the
//   latter, besides the copies p has t keep, none the faster tier held at that moment.
// - Exclusive tiers: a Store that copies an object up from a slower tier erases the slower
//   copy (promotion), unless the placement has that tier keep a copy (PlanObject::kept_in,
//   cache/plan/kept_copies.h). A kept copy is stored like any object: into its keep tier only,
//   while the active placement says so.
// - Suspend (placement pending): nothing is evicted and every Store is refused.
//
// Thread safety: every method is thread-safe. Lock order: a tier's store gate is taken with no
// other prefetcher lock held (never two gates at once); the Tier's own locks are taken inside
// it. Store waits for the gate until its deadline; SetPlacement waits as long as one Put.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/base/object.h"
#include "cache/base/status.h"
#include "cache/plan/plan.h"
#include "cache/tiers/tier.h"

namespace clairfs {

class TierStack {
 public:
  // The tiers must outlive the stack. Until the first SetPlacement every Store is refused.
  explicit TierStack(std::vector<Tier*> tiers);
  TierStack(const TierStack&) = delete;
  TierStack& operator=(const TierStack&) = delete;

  size_t size() const { return tiers_.size(); }
  const Tier& tier(size_t t) const { return *tiers_[t]; }

  // The bytes of key at version from the fastest tier other than `except` that holds them;
  // *found (if given): that tier. kNotFound if none.
  Result<BlobPtr> Get(std::string_view key, const FileVersion& version,
                      std::optional<size_t> except = std::nullopt, size_t* found = nullptr) const;
  bool Contains(size_t t, std::string_view key, const FileVersion& version) const;
  // Calls visit(t, key, version) for every object tier t holds, tier by tier (Tier::RetainOnly
  // keeping every object: nothing is evicted, no I/O). visit runs under the tier's own locks:
  // it must not call into the tiers. Takes no gate.
  void ForEach(
      const std::function<void(size_t, std::string_view, const FileVersion&)>& visit) const;

  // Stores blob for key in tier t if the active placement assigns key, at blob's version,
  // to t, or has t keep a copy of it; then erases the copy in tier `from` if that is a slower
  // tier that is not to keep one. kUnavailable if the placement does not assign it (or is
  // pending), kTimedOut if the gate was busy until deadline, else the tier's status (kNoSpace
  // when full). *kept_in (if given; set on success): the tier the placement has keep a copy
  // of key (kNotKept if none, or if that is t).
  Status Store(size_t t, const std::string& key, const BlobPtr& blob, std::optional<size_t> from,
               std::chrono::steady_clock::time_point deadline, uint8_t* kept_in = nullptr);

  // Makes placement (not null; immutable while active) the active one and evicts what it
  // does not assign to each tier or a faster one.
  void SetPlacement(std::shared_ptr<const Plan> placement);
  // A placement is pending: stores are refused, nothing is evicted.
  void Suspend();

  std::vector<uint64_t> UsedBytes() const;
  std::vector<uint64_t> Corruptions() const;
  std::vector<TierHealth> Healths() const;

 private:
  // Serializes the stores into one tier with a placement change of that tier.
  struct Gate {
    // Leaf lock, held only to flip `busy` or read `placement`; the gate itself (busy) is held
    // across Tier::Put and Tier::RetainOnly.
    std::mutex mu;
    std::condition_variable cv;
    bool busy = false;
    std::shared_ptr<const Plan> placement;  // null: none or pending
  };
  // Holds gate `g` (busy) until destroyed; ok() false if the deadline passed first.
  class Hold;

  const std::vector<Tier*> tiers_;
  std::unique_ptr<Gate[]> gates_;
};

}  // namespace clairfs
