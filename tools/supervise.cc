#include "tools/supervise.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <initializer_list>

namespace clairfs {
namespace {

volatile sig_atomic_t child_pid = 0;

void Forward(int sig) {
  if (child_pid > 0) kill(child_pid, sig);
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
  struct sigaction sa {};
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
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
