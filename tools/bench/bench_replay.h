// Replay mode of clairfs-bench: a data loader's pipeline in front of a training loop.
//
// W worker threads read the epoch's samples in batches of B consecutive plan entries (each
// batch by one worker, its files one after another, like a DataLoader worker building a
// batch). At most prefetch_factor x W batches are claimed and not yet taken by the consumer;
// a worker that would go past that waits. The consumer takes batches strictly in plan order
// (DataLoader's in-order delivery: a late batch holds back the ones behind it), and hands
// the next claim to the workers the moment it takes one, before computing on it.
//
// Compute is simulated by sleeping, not spinning: on a 2-core machine a spinning consumer
// would take a core from the readers and the clairfs daemon, which an accelerator does not.
// It is modelled as a device timeline: batch k's compute starts when the previous compute
// ends or when batch k arrives, whichever is later, lasts B x compute_ms + bytes x
// compute_ns_per_byte, and the consumer sleeps until that end (timer slack 1 ns). A late
// wake-up therefore does not add up over samples: the next compute starts from the planned
// end, not from the wake-up.
//
// Stall = time the consumer spent waiting for a batch that was not there yet, including the
// wait for the first batch of the epoch. Wall time = first claim to the end of the last
// compute. Epochs do not overlap: workers start empty at each epoch, as a DataLoader iterator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_read.h"

namespace clairfs::bench {

struct ReplayOptions {
  int workers = 1;                 // reader threads, >= 1
  int prefetch_factor = 2;         // batches in flight per worker, >= 1
  int batch_size = 1;              // samples per batch, >= 1
  double compute_ms = 0;           // simulated compute per sample, >= 0
  double compute_ns_per_byte = 0;  // simulated compute per byte read, >= 0
  bool verify = false;             // XXH3-64 every file
};

// Replays one epoch over paths (relative to root_fd). Files that fail to read count in
// errors and contribute no bytes; the consumer still takes their batch.
EpochResult RunReplayEpoch(int epoch, int root_fd, const std::vector<std::string>& paths,
                           const ReplayOptions& opt);

// The lower bound of a replay: the consumer alone, every batch available at once, sizes[i]
// the byte count of paths[i] (used only for compute_ns_per_byte). Reads nothing.
EpochResult RunComputeOnlyEpoch(int epoch, const std::vector<uint64_t>& sizes,
                                const ReplayOptions& opt);

}  // namespace clairfs::bench
