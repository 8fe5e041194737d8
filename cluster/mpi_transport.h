// MpiTransport: the Transport over MPI. The only code that calls MPI (the cluster/ layer links
// MPICH for this file alone, docs/architecture.md "Layers").
//
// One progress thread makes every MPI call after initialization: it posts queued sends with
// MPI_Isend, tests them, and matches incoming messages with MPI_Improbe and receives them with
// MPI_Imrecv, tested too, on a private duplicate of MPI_COMM_WORLD whose error handler returns
// errors instead of aborting. A send to a rank that died never completes, nor does a receive
// of a message its sender died in the middle of (seen over TCP): each is abandoned after
// send_timeout (its buffer is kept, since MPI may still use it), and no MPI call of the
// progress thread blocks. Every failed MPI call is counted (errors(), and the counter
// given to CountErrorsIn) and logged with MPI's description, rate-limited.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cache/base/log_limit.h"
#include "cache/base/status.h"
#include "cluster/message_queue.h"
#include "cluster/transport.h"

namespace clairfs::cluster {

// The number of ranks a process launcher (mpiexec) announces in the environment, or 0 when
// the process was not started by one. Makes no MPI call.
int LauncherWorldSize();

// The number of this launch's ranks on this machine (MPI_LOCALNRANKS of MPICH's Hydra, Open
// MPI's OMPI_COMM_WORLD_LOCAL_SIZE), or 0 when the launcher does not say. Makes no MPI call.
int LauncherLocalSize();

class MpiTransport : public Transport {
 public:
  // Initializes MPI with MPI_THREAD_MULTIPLE unless the process already did, gathers every
  // rank's `hello` (of one size on every rank) into hellos(), and starts the progress thread.
  // Fails if the library cannot provide MPI_THREAD_MULTIPLE, or when not every rank's hello
  // came within hello_wait (a rank that did not start).
  static Result<std::unique_ptr<MpiTransport>> Create(
      std::string_view hello, std::chrono::milliseconds hello_wait,
      std::chrono::milliseconds send_timeout = std::chrono::seconds(30));
  // Every rank's hello, by rank.
  const std::vector<std::string>& hellos() const { return hellos_; }
  ~MpiTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Send(int dst, int tag, std::vector<char> bytes) override;
  std::optional<Message> Receive(std::chrono::milliseconds wait) override;
  void Shutdown() override;
  // Shuts down and finalizes MPI if Create initialized it. MPI_Finalize waits for the other
  // ranks, and a dead rank can keep it waiting (over TCP, often even with every rank alive):
  // past `timeout`, counted from the call, the process exits with `exit_code` instead.
  void Finalize(std::chrono::milliseconds timeout, int exit_code);
  uint64_t abandoned_sends() const { return abandoned_.load(); }
  uint64_t errors() const { return errors_.load(); }
  void CountErrorsIn(std::atomic<uint64_t>* counter) override { error_counter_.store(counter); }

 private:
  struct Impl;
  MpiTransport(std::unique_ptr<Impl> impl, int rank, int size);
  void Progress();
  // An MPI call returned rc != MPI_SUCCESS: counted and logged (rate-limited). True if failed.
  bool Failed(int rc, const char* call, int peer);

  std::unique_ptr<Impl> impl_;
  const int rank_, size_;
  std::vector<std::string> hellos_;  // set by Create, then constant
  std::mutex mu_;                    // guards outbox_ and stop_; leaf
  std::condition_variable out_cv_;
  std::deque<Message> outbox_;  // source field holds the destination
  bool stop_ = false;
  MessageQueue inbox_;  // filled by the progress thread; closed by Shutdown
  std::atomic<uint64_t> abandoned_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<std::atomic<uint64_t>*> error_counter_{nullptr};
  LogLimit error_log_;
  std::thread thread_;
};

}  // namespace clairfs::cluster
