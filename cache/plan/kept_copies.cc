#include "cache/plan/kept_copies.h"

namespace clairfs {

void PlaceKeptCopies(Plan& plan, const PlacementLimits& limits) {
  for (PlanObject& o : plan.objects) o.kept_in = kNotKept;
  const size_t keep = limits.keep_tier;
  if (keep >= limits.tier_capacity.size() || keep >= plan.tier_order.size()) return;
  uint64_t used = 0;
  for (uint32_t id : plan.tier_order[keep]) used += plan.objects[id].bytes;
  const uint64_t capacity = limits.tier_capacity[keep];
  uint64_t room = capacity > used ? capacity - used : 0;
  for (size_t t = 0; t < keep && room > 0; ++t) {
    for (uint32_t id : plan.tier_order[t]) {
      PlanObject& o = plan.objects[id];
      if (o.bytes > room) continue;  // first fit: a smaller, later object may still fit
      room -= o.bytes;
      o.kept_in = static_cast<uint8_t>(keep);
    }
  }
}

}  // namespace clairfs
