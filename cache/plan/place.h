// Placement: where each object of a plan goes, given the capacities of the tiers and of the
// staging window. Deterministic and without I/O; it sets PlanObject::place and
// Plan::tier_order only (kept_copies.h then marks the copies a persistent tier keeps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/plan/plan.h"

namespace clairfs {

// Capacities the planner fills, fastest tier first.
struct PlacementLimits {
  std::vector<std::string> tier_names;
  std::vector<uint64_t> tier_capacity;
  uint64_t staging_capacity = 0;
  // The tier that keeps copies of the faster tiers' objects across restarts (the fastest
  // persistent tier below a volatile one: the SSD tier under the RAM tier), in the room the
  // placement leaves it; kNotKept: none.
  uint8_t keep_tier = kNotKept;
};

// HDMLP placement over objects: by frequency (descending, ties by first reference) each goes
// to the fastest tier it still fits in; the rest are staged in read order, or read directly
// when larger than the staging window. Fills plan.tier_order in first-reference order.
void PlaceObjects(Plan& plan, const PlacementLimits& limits);

}  // namespace clairfs
