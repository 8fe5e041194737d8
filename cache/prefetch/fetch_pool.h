// FetchPool: single-flight fetches, the demand threads that run readers' fetches, and the
// deadlines every wait on a fetch has.
//
// Contract:
// - At most one fetch per key runs at a time (SingleFlight); everyone else waits on it.
// - Readers never fetch on their own thread: Demand queues the fetch for a demand thread (or
//   joins the one running) and waits at most `timeout`, so a stuck source costs a reader
//   kTimedOut, never a hang. Reader waits are counted in stall_ns and errors.timeout.
// - Prefetch threads Lead the flights they joined as leader on their own thread, and Wait on
//   others' flights with the same timeout.
// - Every flight is finished exactly once: by its leader, or by Stop for the queued demand
//   fetches it drops (kUnavailable), before Stop joins any thread. After Stop, Demand fails at
//   once with kUnavailable.
//
// Thread-safe. Lock order: mu_ before SingleFlight's lock before a Flight's lock; mu_ is
// taken after Prefetcher::mu_ (Join under it) and never held while fetching.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cache/base/stats.h"
#include "cache/prefetch/fetcher.h"
#include "cache/prefetch/single_flight.h"

namespace clairfs {

class FetchPool {
 public:
  // fetcher and stats must outlive the pool.
  FetchPool(Fetcher& fetcher, std::chrono::milliseconds timeout, Stats* stats);
  ~FetchPool();
  FetchPool(const FetchPool&) = delete;
  FetchPool& operator=(const FetchPool&) = delete;

  // Starts `threads` demand threads (at least one). Once.
  void Start(int threads);
  // Finishes every queued flight with kUnavailable, then joins the demand threads (each ends
  // once its current fetch returns). Idempotent.
  void Stop();

  // For a reader: key at version, fetched by a demand thread or by the flight already
  // running; kTimedOut after the timeout, kUnavailable once stopped.
  Result<BlobPtr> Demand(const std::string& key, const FileVersion& version, FetchSource* source);

  // For the prefetch threads: the flight of key and whether the caller leads it.
  std::pair<FlightPtr, bool> Join(const std::string& key) { return flights_.Join(key); }
  // Runs a flight the caller leads on the calling thread and finishes it.
  Result<BlobPtr> Lead(const std::string& key, const FileVersion& version, const FlightPtr& flight,
                       std::optional<size_t> except, FetchSource* source);
  // Waits on a flight until the timeout; `reader`: count the wait as a reader's stall.
  Result<BlobPtr> Wait(Flight& flight, FetchSource* source, bool reader);
  // Lead if first, else Wait (as a prefetch thread).
  Result<BlobPtr> Fetch(const std::string& key, const FileVersion& version,
                        std::optional<size_t> except, FetchSource* source);

  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  struct Job {
    std::string key;
    FileVersion version;
    FlightPtr flight;
  };
  void Loop();

  Fetcher& fetcher_;
  const std::chrono::milliseconds timeout_;
  Stats* const stats_;
  SingleFlight flights_;

  // Before SingleFlight's lock; guards stop_, jobs_ and threads_.
  std::mutex mu_;
  std::condition_variable cv_;  // a job was queued, or stop
  bool stop_ = false;
  std::deque<Job> jobs_;
  std::vector<std::thread> threads_;
};

}  // namespace clairfs
