// SingleFlight: at most one fetch per key at a time; later askers wait on the first one.
//
// Contract: Join makes the first asker of a key its leader; the leader must Finish the flight
// exactly once, whatever happens (a leader that cannot run the fetch finishes it with an error).
// Every waiter passes a deadline to Wait, so a leader that never finishes cannot hang anyone
// past it. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "cache/base/object.h"
#include "cache/base/status.h"

namespace clairfs {

// Where a fetch got its bytes.
struct FetchSource {
  enum class Kind : uint8_t {
    kBacking,  // the backing store
    kTier,     // a local tier (tier)
    kPeer,     // another node
  };
  Kind kind = Kind::kBacking;
  uint8_t tier = 0;  // with Kind::kTier only: which local tier (0: fastest)

  static FetchSource Tier(size_t t) { return {Kind::kTier, static_cast<uint8_t>(t)}; }
  bool operator==(const FetchSource&) const = default;
};

struct Flight {
  // Leaf lock: nothing is taken while holding it.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Result<BlobPtr> result{Status::Error(Code::kUnavailable, "fetch in progress")};
  FetchSource source;
};
using FlightPtr = std::shared_ptr<Flight>;

class SingleFlight {
 public:
  // The flight for key and whether the caller became its leader; a leader must Finish it.
  std::pair<FlightPtr, bool> Join(const std::string& key);
  // Publishes the leader's result to every waiter and forgets key. Finishing a flight twice
  // keeps the first result.
  void Finish(const std::string& key, const FlightPtr& flight, Result<BlobPtr> result,
              FetchSource source = {});
  // The flight's result, or kTimedOut once deadline passes; *source (if given) gets where the
  // bytes came from.
  static Result<BlobPtr> Wait(Flight& flight, std::chrono::steady_clock::time_point deadline,
                              FetchSource* source = nullptr);
  size_t in_flight() const;

 private:
  // Taken after Prefetcher::mu_ and FetchPool::mu_, before a Flight's mu; never held while
  // taking a Flight's mu.
  mutable std::mutex mu_;
  std::unordered_map<std::string, FlightPtr> flights_;
};

}  // namespace clairfs
