// Kept copies: the persistent tier (SSD) also holds the objects the plan puts in a faster,
// volatile tier (RAM), so that a remount or the next job on the node finds them there instead
// of reading the backing store again (docs/architecture.md, "Warm restarts").
//
// Contract:
// - Only room the placement leaves is used: the keep tier's capacity minus the bytes placed in
//   it. A kept copy never displaces an object the placement gives the keep tier, so the
//   backing-store traffic of the running job is exactly what it was without kept copies.
// - Copies are chosen among the faster tiers' objects in first-reference order (tier by tier,
//   fastest first): when the room is short, what a restarted job reads first is kept.
// - Staged, peer and direct objects are never kept: only what a tier held survives a restart.
#pragma once

#include "cache/plan/place.h"
#include "cache/plan/plan.h"

namespace clairfs {

// Sets kept_in on the objects of plan (placed: tier_order filled) that limits.keep_tier keeps
// a copy of, and resets it on every other object. No-op beyond the reset when keep_tier is
// kNotKept or out of range.
void PlaceKeptCopies(Plan& plan, const PlacementLimits& limits);

}  // namespace clairfs
