// IoExecutor: runs blocking calls on the backing store on a bounded pool of I/O threads, and
// lets each caller wait for its call with a deadline. A stuck file system (a stalled NFS or
// Lustre server, a FUSE daemon that stopped answering) then costs a caller (a FUSE worker, a
// prefetch thread) at most the deadline, and never the thread itself: the stuck call is
// abandoned and finishes, or not, on its I/O thread.
//
// Rules, each for a reason:
// - A call gets `timeout` from its submission, extended by each IoProgress::Touch(), so a long
//   read that makes progress in steps is not cut off; a step that stalls is.
// - A key (the path) whose abandoned call has not returned yet fails fast with kTimedOut: a
//   stuck file must not take one more thread per retry.
// - Threads are started on demand up to max_threads, abandoned ones included. When every one of
//   them is held by an abandoned call, new calls fail fast (the store is dead or stalled; logged
//   once per episode) instead of queueing for a thread that may never come back.
// - A store looks stalled from a call abandoned at its deadline until any call returns; in
//   that state calls wait at most stalled_timeout (logged when it begins and ends).
// - Stop() never waits for a call: waiters get kUnavailable at once, idle threads are joined,
//   busy ones are detached and exit when their call returns. Neither Stop() nor process exit
//   waits for a stuck system call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cache/backing/io_options.h"
#include "cache/base/stats.h"
#include "cache/base/status.h"

namespace clairfs {

// Handed to each call. A call that works in steps (a read in chunks) touches it after each step.
class IoProgress {
 public:
  void Touch();

 private:
  friend class IoExecutor;
  std::atomic<int64_t> last_ns_{0};  // steady clock, nanoseconds since its epoch
};

class IoExecutor {
  struct State;

 public:
  // stats (optional) must outlive the executor: errors.backing_timeout counts kTimedOut returns
  // (only callers count, never an I/O thread).
  explicit IoExecutor(IoOptions options, Stats* stats = nullptr);
  // Stop(); a call still running keeps what it needs alive by itself.
  ~IoExecutor();
  IoExecutor(const IoExecutor&) = delete;
  IoExecutor& operator=(const IoExecutor&) = delete;

  // Runs fn on an I/O thread and returns its result, or, without waiting further:
  //  kTimedOut when the deadline passed (the call is abandoned: its result is destroyed on the
  //    I/O thread when it returns; logged once per key), when an abandoned call on the same key
  //    has not returned yet, or when every I/O thread is held by an abandoned call;
  //  kUnavailable after Stop().
  // fn must own all it uses (copies, shared_ptrs), since it may outlive its caller and this
  // executor; an exception from fn becomes kIoError. key names what fn touches (a path, "" the
  // dataset root), for the fail-fast rule and the log. Thread-safe.
  template <typename T>
  Result<T> Run(const std::string& key, std::function<Result<T>(IoProgress&)> fn) {
    auto out = std::make_shared<std::optional<Result<T>>>();
    Status s = Execute(key, [out, fn = std::move(fn)](IoProgress& progress) {
      try {
        out->emplace(fn(progress));
      } catch (const std::exception& e) {
        out->emplace(Status::Error(Code::kIoError, std::string("I/O call failed: ") + e.what()));
      }
    });
    if (!s.ok()) return s;
    return std::move(**out);
  }

  // Runs fn on an I/O thread some time later and never waits for it: for work nobody waits on
  // that may block on the store (the close() of a descriptor: FLUSH on a FUSE store, a CLOSE
  // RPC on a network one). fn has no deadline and holds its thread while it runs; it must own
  // all it uses. After Stop(), fn (and every posted fn still queued at Stop()) runs on a
  // detached thread of its own, so neither Stop() nor its caller waits for it. Callable through
  // a Poster after this executor is gone. Thread-safe.
  void Post(std::function<void()> fn);

  // Posts to this executor's threads; copyable, valid after the executor is destroyed (then
  // like Post() after Stop()).
  class Poster {
   public:
    void operator()(std::function<void()> fn) const;

   private:
    friend class IoExecutor;
    std::shared_ptr<State> state_;
  };
  Poster poster() const;

  // Fails queued calls and wakes every waiter with kUnavailable, joins the idle threads, runs
  // the posted calls still queued on a thread of their own, and gives the busy threads and
  // that one kStopGrace to end: those that did are joined (a normal stop leaves no thread),
  // the others are detached (a stuck store). Never waits longer. Idempotent; Run()
  // afterwards: kUnavailable.
  void Stop();
  static constexpr std::chrono::milliseconds kStopGrace{200};

  // Threads held by a call whose caller gave up on it.
  int stuck_threads() const;
  // Threads started and not exited (idle, busy or stuck), and those running posted calls
  // after Stop().
  int threads() const;
  // Calls run and waited for (Run; not posted ones) since the start: a caller's round trips to
  // the I/O threads.
  uint64_t waited_calls() const { return waited_calls_.load(std::memory_order_relaxed); }
  // Whether the store looks stalled (see IoOptions::stalled_timeout).
  bool stalled() const;

 private:
  struct Call;
  Status Execute(const std::string& key, std::function<void(IoProgress&)> body);

  const std::shared_ptr<State> state_;  // shared with the I/O threads, which may outlive this
  std::atomic<uint64_t> waited_calls_{0};
};

}  // namespace clairfs
