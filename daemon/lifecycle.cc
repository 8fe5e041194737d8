#define FUSE_USE_VERSION 314
#include "daemon/lifecycle.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include "cache/base/log.h"

namespace clairfs {
namespace {

// Bytes on the pipe besides signal numbers (SIGHUP 1, SIGINT 2, SIGTERM 15).
constexpr char kArm = 'A';
constexpr char kFinish = 'F';

// The handlers' state: set before they are installed, cleared by BeginStop/Finish.
std::atomic<fuse_session*> session{nullptr};
std::atomic<int> write_fd{-1};
static_assert(std::atomic<fuse_session*>::is_always_lock_free);
static_assert(std::atomic<int>::is_always_lock_free);

// Async-signal-safe: fuse_session_exit only sets a flag (as libfuse's own handler does; the
// signal also interrupts the loop's wait), then one byte to the pipe.
void OnSignal(int sig) {
  const int saved = errno;
  if (sig != SIGHUP) {
    if (fuse_session* se = session.load()) fuse_session_exit(se);
  }
  const char c = static_cast<char>(sig);
  if (const int fd = write_fd.load(); fd >= 0) (void)!write(fd, &c, 1);
  errno = saved;
}

void Post(char c) {
  if (const int fd = write_fd.load(); fd >= 0) (void)!write(fd, &c, 1);
}

}  // namespace

Result<std::unique_ptr<Lifecycle>> Lifecycle::Install(fuse_session* se,
                                                      std::chrono::milliseconds grace,
                                                      Hooks hooks) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, "cannot create the signal pipe");
  }
  session.store(se);
  write_fd.store(fds[1]);
  std::unique_ptr<Lifecycle> life(new Lifecycle(grace, std::move(hooks), fds[0]));
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    if (sigaction(sig, &sa, nullptr) != 0) {
      return Status::FromErrno(errno, std::string("cannot handle ") + strsignal(sig));
    }
  }
  return life;
}

Lifecycle::Lifecycle(std::chrono::milliseconds grace, Hooks hooks, int read_fd)
    : grace_(grace), hooks_(std::move(hooks)), read_fd_(read_fd) {}

Lifecycle::~Lifecycle() {
  Finish();
  close(read_fd_);
  if (const int fd = write_fd.exchange(-1); fd >= 0) close(fd);
}

void Lifecycle::StartThread() {
  thread_ = std::thread([this] { Run(); });
}

void Lifecycle::BeginStop() {
  session.store(nullptr);
  Post(kArm);
}

void Lifecycle::Finish() {
  session.store(nullptr);
  if (thread_.joinable()) {
    Post(kFinish);
    thread_.join();
  }
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
}

void Lifecycle::Run() {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> deadline;
  const auto arm = [&] {
    if (!deadline) deadline = Clock::now() + grace_;
  };
  for (;;) {
    int timeout_ms = -1;
    if (deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
      timeout_ms = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
    pollfd p{read_fd_, POLLIN, 0};
    const int n = poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      LogError("signal pipe: poll failed: {}", std::strerror(errno));
      return;
    }
    if (n == 0) {
      LogCritical("the stop did not end within {} ms, stuck {}; detaching the mount and exiting",
                  grace_.count(), stage_.load());
      LogFlush();
      if (hooks_.on_overrun) hooks_.on_overrun();
      LogFlush();
      _exit(1);
    }
    char buf[64];
    const ssize_t got = read(read_fd_, buf, sizeof(buf));
    for (ssize_t i = 0; i < got; ++i) {
      switch (buf[i]) {
        case SIGHUP:
          if (hooks_.on_hangup) hooks_.on_hangup();
          LogFlush();
          break;
        case SIGINT:
        case SIGTERM: {
          int none = 0;
          const bool first = stop_signal_.compare_exchange_strong(none, buf[i]);
          LogInfo("received {}: stopping, within {} ms", strsignal(buf[i]), grace_.count());
          arm();
          if (first && hooks_.on_stop) hooks_.on_stop();
          break;
        }
        case kArm:
          arm();
          break;
        case kFinish:
          return;
        default:
          break;
      }
    }
  }
}

}  // namespace clairfs
