// Lifecycle: the daemon's signals after the mount, and a stop that always ends.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "cache/base/status.h"

struct fuse_session;

namespace clairfs {

// Owns SIGTERM, SIGINT and SIGHUP once the session is mounted (install after
// fuse_set_signal_handlers, which claims all three): TERM and INT end the FUSE loop, as
// libfuse's handler does, and start the stop clock; HUP calls on_hangup (reopen the log).
// The handlers only write a byte to a pipe; a thread of this class does the work.
//
// The stop clock: from the first stop request (a signal, or BeginStop() when the loop ended
// for another reason, such as fusermount3 -u) the daemon has `grace` to call Finish(). If it
// does not (a FUSE worker, prefetch thread, peer or RocksDB stuck in I/O), the thread logs
// the stage named by SetStage, flushes the log, calls on_overrun (detach the mount), and
// _exit(1)s: a stuck thread never keeps a stopped daemon alive.
class Lifecycle {
 public:
  struct Hooks {
    std::function<void()> on_hangup;   // SIGHUP, on the lifecycle thread
    std::function<void()> on_overrun;  // the stop missed its deadline; then _exit(1)
    // The first SIGTERM or SIGINT, on the lifecycle thread, as the stop clock starts: fail
    // what FUSE workers wait for (calls stuck on the backing store), so the loop can end.
    std::function<void()> on_stop;
  };
  // One per process. Installs the handlers; signals that arrive before StartThread() wait
  // in the pipe. The thread must start after fuse_daemonize (fork keeps no threads).
  static Result<std::unique_ptr<Lifecycle>> Install(fuse_session* se,
                                                    std::chrono::milliseconds grace, Hooks hooks);
  void StartThread();
  ~Lifecycle();  // Finish()
  Lifecycle(const Lifecycle&) = delete;
  Lifecycle& operator=(const Lifecycle&) = delete;

  // Starts the stop clock unless it runs already; from here on signals no longer touch the
  // session (call it once the FUSE loop has returned, before the session is destroyed).
  void BeginStop();
  // What the stop is doing now (a string literal), named if the deadline passes.
  void SetStage(const char* stage) { stage_.store(stage); }
  // The stop completed: stops the clock, joins the thread, and gives SIGTERM, SIGINT and
  // SIGHUP their default dispositions back. Idempotent.
  void Finish();
  // The signal that asked for the stop, or 0.
  int stop_signal() const { return stop_signal_.load(); }

 private:
  Lifecycle(std::chrono::milliseconds grace, Hooks hooks, int read_fd);
  void Run();

  const std::chrono::milliseconds grace_;
  const Hooks hooks_;
  const int read_fd_;  // the pipe's read end; the write end is the handlers' global
  std::atomic<const char*> stage_{"finishing the FUSE requests in progress"};
  std::atomic<int> stop_signal_{0};
  std::thread thread_;
};

}  // namespace clairfs
