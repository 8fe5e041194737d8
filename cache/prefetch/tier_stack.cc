#include "cache/prefetch/tier_stack.h"

namespace clairfs {

using Clock = std::chrono::steady_clock;

class TierStack::Hold {
 public:
  Hold(Gate& gate, Clock::time_point deadline) : gate_(gate) {
    std::unique_lock lock(gate_.mu);
    held_ = gate_.cv.wait_until(lock, deadline, [&] { return !gate_.busy; });
    if (held_) {
      gate_.busy = true;
      placement_ = gate_.placement;
    }
  }
  ~Hold() {
    if (!held_) return;
    {
      std::lock_guard lock(gate_.mu);
      gate_.busy = false;
    }
    gate_.cv.notify_one();
  }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  bool ok() const { return held_; }
  // The placement active when the gate was taken; it cannot change while held.
  const Plan* placement() const { return placement_.get(); }
  void Set(std::shared_ptr<const Plan> placement) {
    std::lock_guard lock(gate_.mu);
    gate_.placement = placement;
    placement_ = std::move(placement);
  }

 private:
  Gate& gate_;
  bool held_ = false;
  std::shared_ptr<const Plan> placement_;
};

TierStack::TierStack(std::vector<Tier*> tiers)
    : tiers_(std::move(tiers)), gates_(std::make_unique<Gate[]>(tiers_.size())) {}

Result<BlobPtr> TierStack::Get(std::string_view key, const FileVersion& version,
                               std::optional<size_t> except, size_t* found) const {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (except && *except == t) continue;
    auto r = tiers_[t]->Get(key, version);  // absent, stale or failing: a miss
    if (r.ok()) {
      if (found) *found = t;
      return r;
    }
  }
  return Status::Error(Code::kNotFound, "no local tier holds " + DisplayKey(key));
}

bool TierStack::Contains(size_t t, std::string_view key, const FileVersion& version) const {
  return tiers_[t]->Contains(key, version);
}

void TierStack::ForEach(
    const std::function<void(size_t, std::string_view, const FileVersion&)>& visit) const {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    tiers_[t]->RetainOnly([&](std::string_view key, const FileVersion& version) {
      visit(t, key, version);
      return true;
    });
  }
}

Status TierStack::Store(size_t t, const std::string& key, const BlobPtr& blob,
                        std::optional<size_t> from, Clock::time_point deadline, uint8_t* kept_in) {
  uint8_t keep = kNotKept;
  {
    Hold hold(gates_[t], deadline);
    if (!hold.ok()) return Status::Error(Code::kTimedOut, "tier " + tiers_[t]->name() + " busy");
    const Plan* p = hold.placement();
    const uint32_t id = p ? p->Find(key) : kNoPos;
    const PlanObject* o = id == kNoPos ? nullptr : &p->objects[id];
    const bool placed = o && (o->place == Placement::Tier(t) ||
                              (o->kept_in == t && o->place.InTier() && o->place.tier < t));
    if (!placed || o->version != blob->version() || o->bytes != blob->size()) {
      return Status::Error(Code::kUnavailable, "the placement does not give " + DisplayKey(key) +
                                                   " to " + tiers_[t]->name());
    }
    if (Status s = tiers_[t]->Put(key, blob); !s.ok()) return s;
    if (o->kept_in != t) keep = o->kept_in;
  }
  if (kept_in) *kept_in = keep;
  // Tiers stay exclusive, but for the copy a tier is to keep.
  if (from && *from > t && *from != keep) tiers_[*from]->Erase(key);
  return Status::Ok();
}

void TierStack::SetPlacement(std::shared_ptr<const Plan> placement) {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    Hold hold(gates_[t], Clock::time_point::max());  // waits for at most one Put
    hold.Set(placement);
    tiers_[t]->RetainOnly([&](std::string_view key, const FileVersion& v) {
      const uint32_t id = placement->Find(key);
      return id != kNoPos && placement->objects[id].place.InTierAtOrAbove(t) &&
             placement->objects[id].version == v;
    });
    // A copy of what a faster tier holds already stays only where the placement keeps one:
    // the others would take room this placement gives the tier's own objects.
    for (size_t f = 0; f < t && f < placement->tier_order.size(); ++f) {
      for (uint32_t id : placement->tier_order[f]) {
        const PlanObject& o = placement->objects[id];
        if (o.kept_in != t && tiers_[t]->Contains(o.key, o.version) &&
            tiers_[f]->Contains(o.key, o.version)) {
          tiers_[t]->Erase(o.key);
        }
      }
    }
  }
}

void TierStack::Suspend() {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    Hold hold(gates_[t], Clock::time_point::max());
    hold.Set(nullptr);
  }
}

std::vector<uint64_t> TierStack::UsedBytes() const {
  std::vector<uint64_t> used;
  for (const Tier* t : tiers_) used.push_back(t->used_bytes());
  return used;
}

std::vector<uint64_t> TierStack::Corruptions() const {
  std::vector<uint64_t> n;
  for (const Tier* t : tiers_) n.push_back(t->corruptions());
  return n;
}

std::vector<TierHealth> TierStack::Healths() const {
  std::vector<TierHealth> h;
  for (const Tier* t : tiers_) h.push_back(t->Health());
  return h;
}

}  // namespace clairfs
