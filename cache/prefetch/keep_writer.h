// KeepWriter: writes kept copies (cache/plan/kept_copies.h) into their keep tier on a thread of its
// own, so that no reader and no tier fill ever waits on an SSD write.
//
// Contract:
// - Enqueue never blocks (beyond a leaf lock) and never fails the caller: past max_queued
//   queued copies, or after Stop began, a copy is dropped and counted (Stats::kept.dropped).
// - The queue holds keys, not bytes: when a copy's turn comes its bytes are read from the
//   faster tier that holds them at the queued version (a miss: the object left that tier, the
//   copy is skipped), and stored through TierStack::Store, which refuses it unless the active
//   placement still has the keep tier keep it. So a kept copy is never of another object or
//   version, and never outside the placement.
// - A keep tier that is off (TierHealth, a full or failing device) or that fails a write costs
//   the copy only, counted and logged (rate-limited); the queue goes on, and the tier decides
//   itself when it is back in service.
// - Stop(deadline) lets the thread write what is queued until the queue is empty or deadline
//   passes (so an unmount keeps what the RAM tier got last), then joins it; what is left is
//   counted as dropped and logged.
//
// Thread-safe. mu_ is a leaf: held only to queue and dequeue, never while calling a tier.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "cache/base/log_limit.h"
#include "cache/base/object.h"
#include "cache/base/stats.h"
#include "cache/prefetch/tier_stack.h"

namespace clairfs {

class KeepWriter {
 public:
  // tiers and stats must outlive the writer. timeout bounds each wait for a tier's store gate.
  KeepWriter(TierStack& tiers, Stats* stats, std::chrono::milliseconds timeout,
             size_t max_queued = size_t{1} << 20);
  ~KeepWriter();
  KeepWriter(const KeepWriter&) = delete;
  KeepWriter& operator=(const KeepWriter&) = delete;

  // Starts the writing thread (once; a no-op after Stop).
  void Start();
  // Queues a copy of key at version into tier keep.
  void Enqueue(std::string key, const FileVersion& version, uint8_t keep);
  // Writes what is queued until the queue is empty or deadline, then joins. Idempotent.
  void Stop(std::chrono::steady_clock::time_point deadline);
  // Copies queued and not yet written, skipped or dropped.
  uint64_t pending() const;

 private:
  struct Copy {
    std::string key;
    FileVersion version;
    uint8_t keep = 0;
  };
  enum class Outcome { kWritten, kSkipped, kFailed };
  void Loop();
  Outcome Write(const Copy& c, std::chrono::steady_clock::time_point deadline);

  TierStack& tiers_;
  Stats* const stats_;
  const std::chrono::milliseconds timeout_;
  const size_t max_queued_;
  LogLimit log_limit_;

  mutable std::mutex mu_;       // leaf; guards everything below
  std::condition_variable cv_;  // a copy was queued, or stop
  std::deque<Copy> queue_;
  bool writing_ = false;  // the thread holds a dequeued copy
  bool started_ = false;
  bool stop_ = false;
  std::chrono::steady_clock::time_point drain_deadline_;
  std::thread thread_;
};

}  // namespace clairfs
