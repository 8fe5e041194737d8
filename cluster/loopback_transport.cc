#include "cluster/loopback_transport.h"

#include "cluster/message_queue.h"

namespace clairfs::cluster {

class LoopbackNetwork::Endpoint : public Transport {
 public:
  Endpoint(LoopbackNetwork& net, int rank, int size) : net_(net), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Send(int dst, int tag, std::vector<char> bytes) override {
    if (inbox_.closed()) return;
    net_.Deliver(rank_, dst, tag, std::move(bytes));
  }
  std::optional<Message> Receive(std::chrono::milliseconds wait) override {
    return inbox_.Pop(wait);
  }
  void Shutdown() override { inbox_.Close(); }
  void Push(Message m) { inbox_.Push(std::move(m)); }

 private:
  LoopbackNetwork& net_;
  const int rank_, size_;
  MessageQueue inbox_;  // closed by Shutdown: the endpoint neither sends nor receives
};

LoopbackNetwork::LoopbackNetwork(int size) : dead_(size, false) {
  for (int r = 0; r < size; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r, size));
}

LoopbackNetwork::~LoopbackNetwork() = default;

Transport& LoopbackNetwork::at(int r) { return *endpoints_.at(r); }

void LoopbackNetwork::Kill(int r) {
  {
    std::lock_guard lock(mu_);
    dead_.at(r) = true;
  }
  endpoints_[r]->Shutdown();
}

void LoopbackNetwork::Deliver(int src, int dst, int tag, std::vector<char> bytes) {
  {
    std::lock_guard lock(mu_);
    if (dst < 0 || dst >= static_cast<int>(dead_.size()) || dead_[src] || dead_[dst]) return;
  }
  endpoints_[dst]->Push(Message{src, tag, std::move(bytes)});
}

}  // namespace clairfs::cluster
