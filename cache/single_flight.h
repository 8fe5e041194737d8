// SingleFlight: at most one fetch per key at a time; later askers wait on the first one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "cache/object.h"
#include "cache/status.h"

namespace clairfs {

struct Flight {
  std::mutex mu;  // leaf lock
  std::condition_variable cv;
  bool done = false;
  Result<BlobPtr> result{Status::Error(Code::kUnavailable, "fetch in progress")};
  int source = -1;  // the tier that supplied the bytes, or -1 for the backing store
};
using FlightPtr = std::shared_ptr<Flight>;

class SingleFlight {
 public:
  // The flight for key and whether the caller became its leader; a leader must Finish it.
  std::pair<FlightPtr, bool> Join(const std::string& key);
  // Publishes the leader's result to every waiter and forgets key.
  void Finish(const std::string& key, const FlightPtr& flight, Result<BlobPtr> result,
              int source = -1);
  // The flight's result, or kTimedOut once deadline passes; *source (if given) gets the tier
  // that supplied it (-1: the backing store).
  static Result<BlobPtr> Wait(Flight& flight, std::chrono::steady_clock::time_point deadline,
                              int* source = nullptr);
  size_t in_flight() const;

 private:
  mutable std::mutex mu_;  // taken after Prefetcher::mu_, before Flight::mu
  std::unordered_map<std::string, FlightPtr> flights_;
};

}  // namespace clairfs
