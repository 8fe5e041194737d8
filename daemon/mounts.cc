#include "daemon/mounts.h"

#include <dirent.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

extern char** environ;

namespace clairfs {

std::optional<MountEntry> FindMount(const std::string& path) {
  std::unique_ptr<libmnt_table, void (*)(libmnt_table*)> table(
      mnt_new_table_from_file("/proc/self/mountinfo"), mnt_unref_table);
  if (!table) return std::nullopt;
  // Without a path cache libmount compares targets as strings and never stats them.
  libmnt_fs* fs = mnt_table_find_target(table.get(), path.c_str(), MNT_ITER_BACKWARD);
  if (!fs) return std::nullopt;
  MountEntry entry;
  if (const char* t = mnt_fs_get_fstype(fs)) entry.fstype = t;
  if (const char* s = mnt_fs_get_source(fs)) entry.source = s;
  entry.devno = mnt_fs_get_devno(fs);
  return entry;
}

std::optional<int> WaitChild(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // pidfd_open(2); glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{pidfd, POLLIN, 0};
      const int n = poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (n > 0) break;
      if (n == 0 || (n < 0 && errno != EINTR)) {
        close(pidfd);
        return std::nullopt;
      }
    }
    close(pidfd);
  }
  // With pidfd: the child has ended. Without (old kernel): a blocking wait.
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return std::nullopt;
  }
  return status;
}

Status DetachMount(const std::string& path, std::chrono::milliseconds timeout) {
  if (geteuid() == 0) {
    if (umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
      return Status::FromErrno(errno, "umount2 '" + path + "'");
    }
    return Status::Ok();
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> args = {"fusermount3", "-uz", "--", path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int err = posix_spawnp(&pid, "fusermount3", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return Status::FromErrno(err, "cannot run fusermount3");
  std::optional<int> status = WaitChild(pid, timeout);
  if (!status) {
    kill(pid, SIGKILL);
    status = WaitChild(pid, std::chrono::seconds(2));
    return Status::Error(Code::kTimedOut, "fusermount3 -uz '" + path + "' did not finish in " +
                                              std::to_string(timeout.count()) + " ms");
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return Status::Error(Code::kIoError, "fusermount3 -uz '" + path + "' failed");
  }
  return Status::Ok();
}

int CloseFuseDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return 0;
  std::vector<int> fuse;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    char target[16];
    const ssize_t n = readlinkat(dirfd(dir), e->d_name, target, sizeof(target));
    if (n == 9 && std::memcmp(target, "/dev/fuse", 9) == 0) fuse.push_back(static_cast<int>(fd));
  }
  closedir(dir);
  for (int fd : fuse) close(fd);
  return static_cast<int>(fuse.size());
}

}  // namespace clairfs
