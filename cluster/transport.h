// Transport: tagged byte messages between the ranks of one job. MpiTransport carries them over
// MPI; LoopbackNetwork connects transports inside one process (tests).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace clairfs::cluster {

struct Message {
  int source = -1;
  int tag = 0;
  std::vector<char> bytes;
};

// Thread-safe. Messages from one rank to another with the same tag arrive in the order sent.
// Delivery is best effort: a message to a rank that died or stopped receiving is dropped
// silently, so callers detect failures with their own deadlines.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Queues bytes for dst (!= rank()) and returns without waiting for the receiver.
  virtual void Send(int dst, int tag, std::vector<char> bytes) = 0;
  // The next message for this rank, waiting at most `wait`; nullopt if none came or after
  // Shutdown(). Meant for one receiving thread.
  virtual std::optional<Message> Receive(std::chrono::milliseconds wait) = 0;
  // Stops sending and receiving; unsent messages are dropped. Idempotent.
  virtual void Shutdown() = 0;
  // Where to count failed calls of the underlying library (e.g. Stats::mpi_errors), besides
  // logging them; null: nowhere. Thread-safe.
  virtual void CountErrorsIn(std::atomic<uint64_t>* counter) { (void)counter; }
};

}  // namespace clairfs::cluster
