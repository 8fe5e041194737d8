// LoopbackNetwork: N in-process transports, for testing the cluster logic without MPI.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "cluster/transport.h"

namespace clairfs::cluster {

class LoopbackNetwork {
 public:
  explicit LoopbackNetwork(int size);
  ~LoopbackNetwork();
  // The transport of rank r; owned by the network, valid while it lives.
  Transport& at(int r);
  // Simulates a crashed rank: messages to and from r vanish from now on.
  void Kill(int r);

 private:
  class Endpoint;
  friend class Endpoint;
  void Deliver(int src, int dst, int tag, std::vector<char> bytes);

  std::mutex mu_;  // guards dead_; taken before an endpoint's lock
  std::vector<bool> dead_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace clairfs::cluster
