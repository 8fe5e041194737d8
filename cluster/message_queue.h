// MessageQueue: messages waiting for their consumer, first in first out. The inbox of both
// transports (MpiTransport, LoopbackNetwork) and the queue of requests the serving threads
// answer (PeerServer).
//
// Thread-safe; any number of producers and consumers. Once closed, a queue drops what it held
// and every later Push, and every waiting or later Pop returns nullopt at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "cluster/transport.h"

namespace clairfs::cluster {

class MessageQueue {
 public:
  // Appends m; false (m dropped) when the queue is closed.
  bool Push(Message m) {
    {
      std::lock_guard lock(mu_);
      if (closed_) return false;
      queue_.push_back(std::move(m));
    }
    cv_.notify_one();
    return true;
  }
  // The oldest message, waiting at most `wait` for one; nullopt if none came or the queue is
  // closed.
  std::optional<Message> Pop(std::chrono::milliseconds wait) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return closed_ || !queue_.empty(); });
    return TakeLocked();
  }
  // The oldest message, waiting for one as long as it takes; nullopt once the queue is closed.
  std::optional<Message> Pop() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
    return TakeLocked();
  }
  // Drops the queued messages, refuses new ones and wakes every waiter. Idempotent.
  void Close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
      queue_.clear();
    }
    cv_.notify_all();
  }
  bool closed() const {
    std::lock_guard lock(mu_);
    return closed_;
  }

 private:
  std::optional<Message> TakeLocked() {
    if (closed_ || queue_.empty()) return std::nullopt;
    Message m = std::move(queue_.front());
    queue_.pop_front();
    return m;
  }

  mutable std::mutex mu_;  // leaf: guards queue_ and closed_
  std::condition_variable cv_;
  std::deque<Message> queue_;
  bool closed_ = false;
};

}  // namespace clairfs::cluster
