#include "cache/plan/place.h"

#include <algorithm>
#include <utility>

#include "cache/plan/radix_sort.h"

namespace clairfs {

void PlaceObjects(Plan& plan, const PlacementLimits& limits) {
  const size_t ntiers = limits.tier_capacity.size();
  std::vector<uint32_t> order;
  order.reserve(plan.objects.size());
  for (uint32_t i = 0; i < plan.objects.size(); ++i) {
    if (plan.objects[i].freq > 0) order.push_back(i);
  }
  // Sorted on keys of their own (most read first, then by first reference, then by id), not
  // through the objects: a big plan's sort then runs in the caches.
  std::vector<std::pair<uint64_t, uint32_t>> keyed;
  keyed.reserve(order.size());
  for (uint32_t id : order) {
    const PlanObject& o = plan.objects[id];
    keyed.emplace_back((uint64_t{~o.freq} << 32) | o.first, id);
  }
  StableSortByKey(keyed);  // ids ascend in keyed: equal keys stay by id, as pairs sort
  for (size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].second;
  keyed = {};
  std::vector<uint64_t> used(ntiers, 0);
  plan.tier_order.assign(ntiers, {});
  for (uint32_t id : order) {
    PlanObject& o = plan.objects[id];
    o.place = kStaging;
    for (size_t t = 0; t < ntiers; ++t) {
      if (used[t] + o.bytes <= limits.tier_capacity[t]) {
        used[t] += o.bytes;
        o.place = Placement::Tier(t);
        plan.tier_order[t].push_back(id);
        break;
      }
    }
    if (o.place == kStaging && o.bytes > limits.staging_capacity) o.place = kDirect;
  }
  // Each tier's objects by (first reference, id). Already so when every object is read
  // equally often (each file once an epoch): the placement order was by first reference.
  std::vector<std::pair<uint64_t, uint32_t>> by_first;  // (first << 32 | id, id): unique keys
  for (auto& ids : plan.tier_order) {
    by_first.clear();
    by_first.reserve(ids.size());
    for (uint32_t id : ids) by_first.emplace_back(uint64_t{plan.objects[id].first} << 32 | id, id);
    if (std::is_sorted(by_first.begin(), by_first.end())) continue;
    StableSortByKey(by_first);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = by_first[i].second;
  }
}

}  // namespace clairfs
