// The summary of a placed plan: its counts (streams, entries, files, objects, bytes), what each
// tier, the staging window, direct reads and peers hold, and the bytes the plan will read from
// the backing store. What the `plan` file and the stats show (control/views.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/plan/place.h"
#include "cache/plan/plan.h"

namespace clairfs {

struct PlanSummary {
  struct Part {
    std::string name;
    uint64_t objects = 0;
    uint64_t bytes = 0;
    uint64_t capacity = 0;
    // Copies of faster tiers' objects kept here as well (PlaceKeptCopies), not in objects/bytes.
    uint64_t kept_objects = 0;
    uint64_t kept_bytes = 0;
  };
  uint64_t epochs = 0;  // of the stream with the most
  uint64_t streams = 0, entries = 0, range_entries = 0, positions = 0;
  uint64_t files = 0, chunked_files = 0, objects = 0, chunks = 0, bytes = 0;
  uint64_t chunk_size = 0, record_chunk_size = 0;
  std::vector<Part> tiers;
  Part staging{"staging"}, direct{"direct"}, peer{"peer"};  // peer: staged from other nodes
  // Bytes the plan will read from the backing store: each tier object once, every staged or
  // direct position each time it is read, nothing for objects other nodes hold.
  uint64_t predicted_backing_bytes = 0;
};
// The summary of plan as placed (PlaceObjects) under limits, which name the tiers and give
// their capacities. Objects no stream reads are left out.
PlanSummary Summarize(const Plan& plan, const PlacementLimits& limits);

}  // namespace clairfs
