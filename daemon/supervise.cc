#include "daemon/supervise.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <initializer_list>
#include <optional>

namespace clairfs {
namespace {

// After forwarding SIGTERM or SIGINT the parent gives the daemon this long to exit: its own
// stop grace (5 s) and MPI_Finalize's deadline (10 s), with room to spare. Then SIGKILL, and
// kKillWait more for the kernel to reap it.
constexpr std::chrono::seconds kChildStop{30};
constexpr std::chrono::seconds kKillWait{5};

volatile sig_atomic_t child_pid = 0;
volatile sig_atomic_t stop_forwarded = 0;

void Forward(int sig) {
  if (child_pid > 0) kill(child_pid, sig);
  if (sig != SIGHUP) stop_forwarded = 1;
}

// Waits for the child to end: without a deadline while it serves, with kChildStop once a
// stop was forwarded. The forwarded signals are blocked except inside ppoll, so one that
// arrives between the check and the wait still interrupts it. False if it never ended.
bool WaitForChild(pid_t pid, const sigset_t& unblocked) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return true;  // no pidfd (kernel < 5.3): the blocking waitpid below
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> deadline;
  bool killed = false;
  for (;;) {
    if (stop_forwarded && !deadline) deadline = Clock::now() + kChildStop;
    timespec ts{};
    if (deadline) {
      const auto left = std::max(Clock::duration::zero(), *deadline - Clock::now());
      const auto secs = std::chrono::duration_cast<std::chrono::seconds>(left);
      ts.tv_sec = secs.count();
      ts.tv_nsec = std::chrono::duration_cast<std::chrono::nanoseconds>(left - secs).count();
    }
    pollfd p{pidfd, POLLIN, 0};
    const int n = ppoll(&p, 1, deadline ? &ts : nullptr, &unblocked);
    if (n > 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || killed) {
      close(pidfd);
      return false;
    }
    std::fprintf(stderr, "clairfs: the daemon (pid %d) did not exit within %lld s; killing it\n",
                 static_cast<int>(pid), static_cast<long long>(kChildStop.count()));
    kill(pid, SIGKILL);
    killed = true;
    deadline = Clock::now() + kKillWait;
  }
  close(pidfd);
  return true;
}

}  // namespace

bool Supervise(int* exit_code) {
  std::signal(SIGUSR1, SIG_IGN);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("clairfs: fork");
    *exit_code = 1;
    return true;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) raise(SIGTERM);  // the parent died before prctl
    return false;
  }
  child_pid = pid;
  sigset_t forwarded, previous;
  sigemptyset(&forwarded);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&forwarded, sig);
  sigprocmask(SIG_BLOCK, &forwarded, &previous);
  struct sigaction sa {};
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  sigset_t unblocked = previous;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigdelset(&unblocked, sig);
  if (!WaitForChild(pid, unblocked)) {
    std::fprintf(stderr, "clairfs: the daemon (pid %d) is still there after SIGKILL\n",
                 static_cast<int>(pid));
    *exit_code = 1;
    return true;
  }
  sigprocmask(SIG_SETMASK, &unblocked, nullptr);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      *exit_code = 1;
      return true;
    }
  }
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "clairfs: the daemon (pid %d) was killed by signal %d\n",
                 static_cast<int>(pid), WTERMSIG(status));
  }
  return true;
}

}  // namespace clairfs
