// Transports for the cluster tests: one that forwards everything to another transport, for
// tests to derive from and change what is sent or received.
#pragma once

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "cluster/transport.h"

namespace clairfs::testing {

using cluster::Message;
using cluster::Transport;

// Forwards every call to inner; subclasses override Send or Receive to change the messages.
class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(Transport& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void Send(int dst, int tag, std::vector<char> bytes) override {
    inner_.Send(dst, tag, std::move(bytes));
  }
  std::optional<Message> Receive(std::chrono::milliseconds wait) override {
    return inner_.Receive(wait);
  }
  void Shutdown() override { inner_.Shutdown(); }

 private:
  Transport& inner_;
};

}  // namespace clairfs::testing
