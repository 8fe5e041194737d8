#include "slurm/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace clairfs::slurm {
namespace {

using Clock = std::chrono::steady_clock;

// What failed in the child before exec, sent to the parent through the status pipe.
enum Step : int { kStdio = 1, kSession, kCgroup, kGroups, kGid, kUid, kExec };

struct ChildFailure {
  int step;
  int err;
  int index;  // for kCgroup: which file
};

[[noreturn]] void Fail(int status_fd, Step step, int index = 0) {
  const ChildFailure f{step, errno, index};
  [[maybe_unused]] ssize_t n = write(status_fd, &f, sizeof f);
  _exit(127);
}

// Between fork and exec: async-signal-safe calls only, on what the parent prepared.
[[noreturn]] void Child(const SpawnSpec& spec, char* const* argv, char* const* envp, int out,
                        int err, int status) {
  const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) Fail(status, kStdio);
  if (spec.new_session && setsid() < 0) Fail(status, kSession);
  // The program starts with default signal handling, whatever the caller (slurmstepd) blocked
  // or ignored: a daemon that inherited a blocked SIGTERM could not be stopped.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (size_t i = 0; i < spec.cgroup_procs.size(); ++i) {
    const int fd = open(spec.cgroup_procs[i].c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) Fail(status, kCgroup, static_cast<int>(i));
    close(fd);
  }
  if (spec.as) {
    const Credentials& c = *spec.as;
    if (setgroups(c.groups.size(), c.groups.data()) != 0) Fail(status, kGroups);
    if (setgid(c.gid) != 0) Fail(status, kGid);
    if (setuid(c.uid) != 0) Fail(status, kUid);
  }
  // Descriptors the caller opened without O_CLOEXEC (slurmstepd's) stay out of the program.
  syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  execve(argv[0], argv, envp);
  Fail(status, kExec);
}

std::string Describe(const ChildFailure& f, const SpawnSpec& spec) {
  std::string what;
  switch (f.step) {
    case kStdio:
      what = "setting up its standard descriptors";
      break;
    case kSession:
      what = "setsid";
      break;
    case kCgroup:
      what = "moving it into the cgroup (writing " +
             (f.index >= 0 && static_cast<size_t>(f.index) < spec.cgroup_procs.size()
                  ? spec.cgroup_procs[f.index]
                  : std::string("?")) +
             ")";
      break;
    case kGroups:
      what = "setgroups";
      break;
    case kGid:
      what = "setgid";
      break;
    case kUid:
      what = "setuid";
      break;
    default:
      what = "exec";
      break;
  }
  return "cannot run " + spec.argv[0] + ": " + what + ": " + std::strerror(f.err);
}

std::vector<char*> Pointers(const std::vector<std::string>& strings) {
  std::vector<char*> p;
  p.reserve(strings.size() + 1);
  for (const auto& s : strings) p.push_back(const_cast<char*>(s.c_str()));
  p.push_back(nullptr);
  return p;
}

// Waits for pid until the deadline (polling: no blocking wait can hang past it). A child
// someone else reaped (ECHILD) counts as exited, with status 127.
bool Reap(pid_t pid, Clock::time_point deadline, int* status) {
  for (;;) {
    const pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno == ECHILD) {
      *status = 127 << 8;
      return true;
    }
    if (r < 0 && errno != EINTR) return false;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

SpawnResult Spawn(const SpawnSpec& spec) {
  SpawnResult result;
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    result.error = "internal error: a program to run needs an absolute path";
    return result;
  }
  std::vector<char*> argv = Pointers(spec.argv);
  std::vector<char*> envp = Pointers(spec.env);
  int out[2], err[2], status[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    close(out[0]), close(out[1]);
    return result;
  }
  if (pipe2(status, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    return result;
  }
  const pid_t pid = fork();
  if (pid == 0) Child(spec, argv.data(), envp.data(), out[1], err[1], status[1]);
  close(out[1]), close(err[1]), close(status[1]);
  if (pid < 0) {
    result.error = std::string("fork: ") + std::strerror(errno);
    close(out[0]), close(err[0]), close(status[0]);
    return result;
  }
  const Clock::time_point deadline = Clock::now() + spec.timeout;
  std::string failure_bytes;
  pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {status[0], POLLIN, 0}};
  std::string* sinks[3] = {&result.out, &result.err, &failure_bytes};
  int open_fds = 3;
  bool timed_out = false;
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    const int n = poll(fds, 3, static_cast<int>(left));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 3 && n > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        const size_t room = spec.max_output - std::min(spec.max_output, sinks[i]->size());
        sinks[i]->append(buf, std::min(room, static_cast<size_t>(got)));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int wstatus = 0;
  if (timed_out || !Reap(pid, deadline, &wstatus)) {
    kill(spec.new_session ? -pid : pid, SIGKILL);
    Reap(pid, Clock::now() + std::chrono::seconds(5), &wstatus);
    result.error = spec.argv[0] + " did not finish within " +
                   std::to_string(spec.timeout.count() / 1000) + " s (killed)";
    return result;
  }
  if (failure_bytes.size() >= sizeof(ChildFailure)) {
    ChildFailure f;
    std::memcpy(&f, failure_bytes.data(), sizeof f);
    result.error = Describe(f, spec);
    return result;
  }
  result.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return result;
}

}  // namespace clairfs::slurm
