// ThreadsWithoutStopSignals: keeps the stop signals on the main thread (daemon/serve.cc,
// daemon/compose.cc).
#pragma once

#include <pthread.h>

#include <csignal>

namespace clairfs {

// While one lives, threads the calling thread starts inherit SIGTERM, SIGINT and SIGHUP
// blocked (libfuse does the same for its workers), so that those signals always go to the main
// thread: its signal interrupts the FUSE loop's wait, which another thread's would not. Held
// only around starting threads, so that start-up stays killable by the default actions.
class ThreadsWithoutStopSignals {
 public:
  ThreadsWithoutStopSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, &saved_);
  }
  ~ThreadsWithoutStopSignals() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  ThreadsWithoutStopSignals(const ThreadsWithoutStopSignals&) = delete;
  ThreadsWithoutStopSignals& operator=(const ThreadsWithoutStopSignals&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace clairfs
