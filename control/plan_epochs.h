// The plan's reads per epoch and where each comes from, for the `plan` control file's
// `per_epoch` (docs/control-interface.md): what a prediction of epoch times needs
// (python/clairfs/predict.py) and the placement summary does not say.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/plan/plan.h"

namespace clairfs {

struct EpochSource {
  uint64_t reads = 0;  // object reads (positions)
  uint64_t bytes = 0;
};

struct PlanEpoch {
  EpochSource total;
  std::vector<EpochSource> tiers;  // reads a tier serves (objects it already holds)
  // Per tier, the distinct objects among those reads: a chunk that several records of the
  // epoch read counts once (the bytes a tier moves when it serves each object once).
  std::vector<EpochSource> tiers_distinct;
  EpochSource backing;  // reads of the backing store: fills, staged and direct reads
  EpochSource fills;    // of those, the first read of a tier's object (its fill)
  EpochSource peers;    // staged from the node that holds the object
};

// Per epoch index e (the streams' epochs e together), every position of the plan by where its
// object is read from, taking the epochs in order and the streams in order within each: an
// object a tier holds is read from the backing store once, at its first read so counted (the
// tier fill), and from the tier afterwards; a staged or direct object from the backing store
// at every read; a peer's object from the peer at every read. The backing bytes summed over
// the epochs are the plan's predicted_backing_bytes. Walks every position once, with a word per
// object: O(positions + objects).
std::vector<PlanEpoch> PlanEpochs(const Plan& plan, size_t tiers);

}  // namespace clairfs
