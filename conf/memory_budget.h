// The daemon's memory budget: what its memory holds at most for a configuration, and the check
// of that against the memory it may use: the machine's RAM, or less, the limit of its cgroup
// (conf/memory_limit.h; a Slurm job with --mem, a Kubernetes pod). docs/reliability.md,
// "Memory limits", explains the figures.
//
// Contract of FitMemory:
// - need = RAM tiers + staging window + the daemon's own memory (MemoryNeed::own: a fixed part
//   for code, libraries, thread stacks, FUSE buffers, the allocator's slack, file-data mappings
//   kept for reuse (cache/base/blob_memory.h) and a plan of a few hundred thousand entries; objects
//   in flight outside the tiers and the window; the bound on contents held for reads in no-open
//   mode; RocksDB's memtables and block cache per SSD tier) must fit in limit - Headroom(limit),
//   the headroom being left to the page cache and the kernel memory charged to the cgroup.
// - A capacity given explicitly (a RAM tier's capacity, cache.staging.capacity) is never
//   changed: when the need does not fit, the start is refused with a message naming the key,
//   the limit, where it comes from, and what would fit.
// - A capacity left to the default (omitted, or "auto") is sized so that the daemon's whole
//   need stays within half of limit - headroom (the other half is left to the job's own
//   processes, which share the cgroup): the staging window gets a quarter of that room (at
//   least a chunk, at most 256 MiB), RAM tiers share the rest (at most 1 GiB each; possibly
//   0: no room). Sizing below the default is reported in warnings. When even the smallest
//   window does not fit the whole usable limit, the start is refused.
// - The limit is read once, at start: a cgroup limit lowered later is not followed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/base/status.h"
#include "conf/config.h"

namespace clairfs {

struct MemoryNeed {
  uint64_t ram_tiers = 0;   // the RAM tiers' capacities
  uint64_t staging = 0;     // cache.staging.capacity
  uint64_t fixed = 0;       // code, libraries, stacks, FUSE buffers, allocator slack, a plan
  uint64_t in_flight = 0;   // objects being fetched outside the window: fill + demand threads
  uint64_t node_reads = 0;  // contents held for reads in no-open mode (fs/core/node_reads.h)
  uint64_t ssd = 0;         // RocksDB per SSD tier
  uint64_t own() const { return fixed + in_flight + node_reads + ssd; }
  uint64_t total() const { return ram_tiers + staging + own(); }
};

// The need of c as configured (a RAM tier of capacity 0 counts 0).
MemoryNeed EstimateMemory(const Config& c);

// Left to the page cache and to kernel memory charged to the cgroup: 1/16 of limit, at least
// 16 MiB.
uint64_t MemoryHeadroom(uint64_t limit);

// What FitMemory decided, for the log.
struct MemoryFit {
  std::vector<std::string> warnings;  // capacities sized below their defaults
  std::string summary;                // the budget against the limit, one line
};

// Checks (and for defaulted capacities, sizes) c against limit bytes; what names the limit for
// messages, e.g. "the memory limit of the daemon's cgroup (256.0 MiB, /sys/.../memory.max)".
// Call after parsing, before the tiers exist.
Status FitMemory(Config* c, uint64_t limit, const std::string& what, MemoryFit* fit);

// "256.0 MiB", "1.5 GiB".
std::string HumanBytes(uint64_t bytes);

}  // namespace clairfs
