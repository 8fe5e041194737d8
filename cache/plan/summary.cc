#include "cache/plan/summary.h"

#include <algorithm>

#include "cache/manifest/key_index.h"

namespace clairfs {

PlanSummary Summarize(const Plan& plan, const PlacementLimits& limits) {
  PlanSummary s;
  for (const PlanStream& st : plan.streams) s.epochs = std::max<uint64_t>(s.epochs, st.epochs());
  s.streams = plan.streams.size();
  s.entries = plan.entries();
  s.range_entries = plan.range_entries();
  s.positions = plan.positions();
  s.chunk_size = plan.chunk_size;
  s.record_chunk_size = plan.record_chunk_size;
  for (size_t t = 0; t < limits.tier_capacity.size(); ++t) {
    s.tiers.push_back({t < limits.tier_names.size() ? limits.tier_names[t] : "tier", 0, 0,
                       limits.tier_capacity[t]});
  }
  s.staging.capacity = limits.staging_capacity;
  KeyIndex chunked;  // chunked files read, by a chunk's object id
  chunked.Reset(plan.chunked_files());
  const auto path_of = [&](uint32_t id) { return plan.objects[id].path(); };
  for (uint32_t id = 0; id < plan.objects.size(); ++id) {
    const PlanObject& o = plan.objects[id];
    if (o.freq == 0) continue;
    ++s.objects;
    const bool chunk = o.path().size() != o.key.size();
    s.chunks += chunk;
    if (!chunk || chunked.Insert(id, path_of) == id) {  // a whole file, or a new chunked one
      ++s.files;
      s.chunked_files += chunk;
    }
    s.bytes += o.bytes;
    const Placement& at = o.place;
    PlanSummary::Part* part = at.InTier() && at.tier < s.tiers.size() ? &s.tiers[at.tier]
                              : at == kDirect                         ? &s.direct
                              : at == kPeer                           ? &s.peer
                                                                      : &s.staging;
    ++part->objects;
    part->bytes += o.bytes;
    if (at.InTier() && o.kept_in < s.tiers.size()) {
      ++s.tiers[o.kept_in].kept_objects;
      s.tiers[o.kept_in].kept_bytes += o.bytes;
    }
    s.predicted_backing_bytes += at.InTier() ? o.bytes : at == kPeer ? 0 : o.bytes * o.freq;
  }
  return s;
}

}  // namespace clairfs
