#include "cache/prefetch/single_flight.h"

namespace clairfs {

std::pair<FlightPtr, bool> SingleFlight::Join(const std::string& key) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = flights_.try_emplace(key);
  if (inserted) it->second = std::make_shared<Flight>();
  return {it->second, inserted};
}

void SingleFlight::Finish(const std::string& key, const FlightPtr& flight, Result<BlobPtr> result,
                          FetchSource source) {
  {
    std::lock_guard lock(mu_);
    auto it = flights_.find(key);
    if (it != flights_.end() && it->second == flight) flights_.erase(it);
  }
  std::lock_guard lock(flight->mu);
  if (flight->done) return;
  flight->result = std::move(result);
  flight->source = source;
  flight->done = true;
  flight->cv.notify_all();
}

Result<BlobPtr> SingleFlight::Wait(Flight& flight, std::chrono::steady_clock::time_point deadline,
                                   FetchSource* source) {
  std::unique_lock lock(flight.mu);
  if (!flight.cv.wait_until(lock, deadline, [&] { return flight.done; })) {
    return Status::Error(Code::kTimedOut, "fetch did not finish before the deadline");
  }
  if (source) *source = flight.source;
  return flight.result;
}

size_t SingleFlight::in_flight() const {
  std::lock_guard lock(mu_);
  return flights_.size();
}

}  // namespace clairfs
