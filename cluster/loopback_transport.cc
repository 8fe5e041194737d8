#include "cluster/loopback_transport.h"

namespace clairfs::cluster {

class LoopbackNetwork::Endpoint : public Transport {
 public:
  Endpoint(LoopbackNetwork& net, int rank, int size) : net_(net), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Send(int dst, int tag, std::vector<char> bytes) override {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
    }
    net_.Deliver(rank_, dst, tag, std::move(bytes));
  }
  std::optional<Message> Receive(std::chrono::milliseconds wait) override {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return closed_ || !inbox_.empty(); });
    if (closed_ || inbox_.empty()) return std::nullopt;
    Message m = std::move(inbox_.front());
    inbox_.pop_front();
    return m;
  }
  void Shutdown() override {
    std::lock_guard lock(mu_);
    closed_ = true;
    inbox_.clear();
    cv_.notify_all();
  }
  void Push(Message m) {
    std::lock_guard lock(mu_);
    if (closed_) return;
    inbox_.push_back(std::move(m));
    cv_.notify_one();
  }

 private:
  LoopbackNetwork& net_;
  const int rank_, size_;
  std::mutex mu_;  // leaf
  std::condition_variable cv_;
  std::deque<Message> inbox_;
  bool closed_ = false;
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
