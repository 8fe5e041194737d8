#include "cache/prefetch/keep_writer.h"

#include "cache/base/log.h"

namespace clairfs {

using Clock = std::chrono::steady_clock;

KeepWriter::KeepWriter(TierStack& tiers, Stats* stats, std::chrono::milliseconds timeout,
                       size_t max_queued)
    : tiers_(tiers), stats_(stats), timeout_(timeout), max_queued_(max_queued) {}

KeepWriter::~KeepWriter() { Stop(Clock::now()); }

void KeepWriter::Start() {
  std::lock_guard lock(mu_);
  if (started_ || stop_) return;
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void KeepWriter::Enqueue(std::string key, const FileVersion& version, uint8_t keep) {
  {
    std::lock_guard lock(mu_);
    if (stop_ || !started_ || queue_.size() >= max_queued_) {
      stats_->kept.dropped.fetch_add(1, std::memory_order_relaxed);
      uint64_t suppressed = 0;
      if (started_ && !stop_ && log_limit_.Allow(&suppressed)) {
        LogWarn(
            "kept copy of {} dropped: {} copies already queued for the persistent tier "
            "(it writes slower than the faster tiers fill); the next mount reads it "
            "from the backing store{}",
            DisplayKey(key), queue_.size(),
            suppressed ? " (" + std::to_string(suppressed) + " such lines suppressed)" : "");
      }
      return;
    }
    queue_.push_back(Copy{std::move(key), version, keep});
  }
  stats_->kept.queued.fetch_add(1, std::memory_order_relaxed);
  cv_.notify_one();
}

void KeepWriter::Stop(Clock::time_point deadline) {
  std::thread thread;
  {
    std::lock_guard lock(mu_);
    if (!stop_) drain_deadline_ = deadline;
    stop_ = true;
    thread.swap(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) thread.join();
  size_t left;
  {
    std::lock_guard lock(mu_);
    left = queue_.size();
    queue_.clear();
  }
  if (left > 0) {
    stats_->kept.dropped.fetch_add(left, std::memory_order_relaxed);
    LogWarn(
        "{} kept copies not written to the persistent tier before the stop deadline; "
        "the next mount reads them from the backing store",
        left);
  }
}

uint64_t KeepWriter::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size() + (writing_ ? 1 : 0);
}

void KeepWriter::Loop() {
  for (;;) {
    Copy c;
    Clock::time_point deadline;
    {
      std::unique_lock lock(mu_);
      writing_ = false;
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty() || (stop_ && Clock::now() >= drain_deadline_)) return;
      c = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      deadline = Clock::now() + timeout_;
      if (stop_ && drain_deadline_ < deadline) deadline = drain_deadline_;
    }
    switch (Write(c, deadline)) {
      case Outcome::kWritten:
        stats_->kept.written.fetch_add(1, std::memory_order_relaxed);
        break;
      case Outcome::kSkipped:
        stats_->kept.skipped.fetch_add(1, std::memory_order_relaxed);
        break;
      case Outcome::kFailed:
        stats_->kept.failed.fetch_add(1, std::memory_order_relaxed);
        break;
    }
  }
}

KeepWriter::Outcome KeepWriter::Write(const Copy& c, Clock::time_point deadline) {
  if (c.keep >= tiers_.size()) return Outcome::kSkipped;
  const Tier& keep = tiers_.tier(c.keep);
  if (keep.Health().state == TierState::kOff) return Outcome::kFailed;  // logged by the tier
  if (tiers_.Contains(c.keep, c.key, c.version)) return Outcome::kSkipped;
  // The bytes from the faster tier holding them; gone (a plan change evicted them): skipped.
  auto blob = tiers_.Get(c.key, c.version, c.keep);
  if (!blob.ok()) return Outcome::kSkipped;
  Status s = tiers_.Store(c.keep, c.key, blob.value(), std::nullopt, deadline);
  if (s.ok()) {
    stats_->kept.bytes.fetch_add(blob.value()->size(), std::memory_order_relaxed);
    return Outcome::kWritten;
  }
  if (s.code() == Code::kUnavailable) return Outcome::kSkipped;  // no longer to be kept
  uint64_t suppressed = 0;
  if (log_limit_.Allow(&suppressed)) {
    LogWarn("kept copy of {} not written to tier {}: {}{}", DisplayKey(c.key), keep.name(),
            s.message(),
            suppressed ? " (" + std::to_string(suppressed) + " such lines suppressed)" : "");
  }
  return Outcome::kFailed;
}

}  // namespace clairfs
