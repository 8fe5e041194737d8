#include "cache/prefetch/fetch_pool.h"

#include <algorithm>

namespace clairfs {

using Clock = std::chrono::steady_clock;

FetchPool::FetchPool(Fetcher& fetcher, std::chrono::milliseconds timeout, Stats* stats)
    : fetcher_(fetcher), timeout_(timeout), stats_(stats) {}

FetchPool::~FetchPool() { Stop(); }

void FetchPool::Start(int threads) {
  std::lock_guard lock(mu_);
  if (stop_ || !threads_.empty()) return;
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
}

void FetchPool::Stop() {
  std::deque<Job> orphans;
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    orphans.swap(jobs_);
    threads.swap(threads_);
  }
  cv_.notify_all();
  // Before joining: a prefetch thread may be waiting on one of these flights.
  for (auto& job : orphans) {
    flights_.Finish(job.key, job.flight, Status::Error(Code::kUnavailable, "shutting down"));
  }
  for (auto& th : threads) th.join();
}

Result<BlobPtr> FetchPool::Demand(const std::string& key, const FileVersion& version,
                                  FetchSource* source) {
  auto [flight, leader] = flights_.Join(key);
  if (leader) {
    std::unique_lock lock(mu_);
    if (stop_) {
      lock.unlock();
      flights_.Finish(key, flight, Status::Error(Code::kUnavailable, "shutting down"));
    } else {
      jobs_.push_back({key, version, flight});
      lock.unlock();
      cv_.notify_one();
    }
  }
  return Wait(*flight, source, true);
}

Result<BlobPtr> FetchPool::Lead(const std::string& key, const FileVersion& version,
                                const FlightPtr& flight, std::optional<size_t> except,
                                FetchSource* source) {
  auto r = fetcher_.Read(key, version, except, source);
  flights_.Finish(key, flight, r, *source);
  return r;
}

Result<BlobPtr> FetchPool::Wait(Flight& flight, FetchSource* source, bool reader) {
  const auto start = Clock::now();
  auto r = SingleFlight::Wait(flight, start + timeout_, source);
  if (!reader) return r;
  stats_->stall_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(),
      std::memory_order_relaxed);
  if (!r.ok() && r.status().code() == Code::kTimedOut) {
    stats_->errors.timeout.fetch_add(1, std::memory_order_relaxed);
  }
  return r;
}

Result<BlobPtr> FetchPool::Fetch(const std::string& key, const FileVersion& version,
                                 std::optional<size_t> except, FetchSource* source) {
  auto [flight, leader] = flights_.Join(key);
  return leader ? Lead(key, version, flight, except, source) : Wait(*flight, source, false);
}

void FetchPool::Loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;  // Stop finishes the queued jobs' flights
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    FetchSource source;
    (void)Lead(job.key, job.version, job.flight, std::nullopt, &source);
  }
}

}  // namespace clairfs
