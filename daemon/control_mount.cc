#include "daemon/control_mount.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cache/base/log.h"
#include "daemon/mounts.h"

namespace clairfs {
namespace {

// Stale control mounts detached at most at one path before giving up (they do not stack in
// practice: every start detaches the one it finds before mounting).
constexpr int kMaxDetaches = 4;

// dir exists (created with mode when missing) as a real directory owned by the daemon's user
// that neither its group nor others may write.
Status EnsureOwnDir(const std::string& dir, mode_t mode) {
  if (mkdir(dir.c_str(), mode) == 0) {
    if (chmod(dir.c_str(), mode) != 0) return Status::FromErrno(errno, "chmod '" + dir + "'");
  } else if (errno != EEXIST) {
    return Status::FromErrno(errno, "cannot create '" + dir + "'");
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, "'" + dir + "'");
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    return Status::Error(Code::kInvalidArgument,
                         "'" + dir +
                             "' is unsafe for the control mount: it must be a directory "
                             "(not a symlink) owned by uid " +
                             std::to_string(geteuid()) + " that its group and others cannot write");
  }
  return Status::Ok();
}

// True if dir (absolute) is the user's own 0700 directory and no other user can replace it:
// every directory above it is a real directory owned by root or the user that others may not
// write to (unless sticky, as /tmp).
bool UsableRuntimeDir(const std::string& dir) {
  if (dir.empty() || dir[0] != '/') return false;
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 077) != 0) {
    return false;
  }
  for (size_t slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1)) {
    const std::string above = dir.substr(0, slash);
    if (lstat(above.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        (st.st_uid != 0 && st.st_uid != geteuid()) ||
        ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))) {
      return false;
    }
  }
  return true;
}

bool IsControlMount(const std::string& path) {
  auto m = FindMount(path);
  return m && m->fstype == std::string("fuse.") + kControlSubtype;
}

}  // namespace

Result<std::string> ControlMountPath(const std::string& mountpoint) {
  const uint64_t hash = XXH3_64bits(mountpoint.data(), mountpoint.size());
  char name[17];
  std::snprintf(name, sizeof(name), "%016" PRIx64, hash);
  std::string base;
  if (geteuid() == 0) {
    base = "/run/clairfs";
    if (Status s = EnsureOwnDir(base, 0755); !s.ok()) return s;
  } else {
    // $XDG_RUNTIME_DIR when it is the user's own (pam_systemd makes it 0700), else /tmp.
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    if (xdg && UsableRuntimeDir(xdg)) {
      base = std::string(xdg) + "/clairfs";
    } else {
      base = "/tmp/clairfs-" + std::to_string(geteuid());
    }
    if (Status s = EnsureOwnDir(base, 0700); !s.ok()) return s;
  }
  return base + "/" + name;
}

Status PrepareControlMountpoint(const std::string& path) {
  for (int i = 0; i < kMaxDetaches && IsControlMount(path); ++i) {
    // statvfs always reaches the daemon (never answered from a cache): it tells a live
    // session from a killed one's.
    struct statvfs sv;
    if (statvfs(path.c_str(), &sv) == 0) {
      return Status::Error(
          Code::kInvalidArgument,
          "the control mount '" + path + "' is served by a running clairfs (of this mountpoint)");
    }
    if (errno != ENOTCONN) break;
    if (Status s = DetachMount(path); !s.ok()) {
      return Status::Error(Code::kIoError, "cannot detach the stale control mount '" + path +
                                               "' of a killed clairfs: " + s.message());
    }
    std::fprintf(stderr, "clairfs: detached the stale control mount of a killed clairfs at %s\n",
                 path.c_str());
  }
  if (IsControlMount(path)) {
    return Status::Error(Code::kIoError, "'" + path +
                                             "' is still a control mount; run: "
                                             "fusermount3 -u " +
                                             path);
  }
  return EnsureOwnDir(path, geteuid() == 0 ? 0755 : 0700);
}

ControlMount::ControlMount(fuse_session* se, std::string path, int stop_fd)
    : se_(se), fd_(fuse_session_fd(se)), path_(std::move(path)), stop_fd_(stop_fd) {}

Result<std::unique_ptr<ControlMount>> ControlMount::Mount(ControlFs& fs, const std::string& path,
                                                          const std::string& mountpoint,
                                                          bool debug) {
  char* raw = nullptr;
  const std::string fsname = "fsname=clairfs-control:" + mountpoint;
  const std::string subtype = std::string("subtype=") + kControlSubtype;
  if (fuse_opt_add_opt_escaped(&raw, fsname.c_str()) != 0 ||
      fuse_opt_add_opt(&raw, subtype.c_str()) != 0 ||
      fuse_opt_add_opt(&raw, "default_permissions") != 0 ||
      (geteuid() == 0 && fuse_opt_add_opt(&raw, "allow_other") != 0) ||
      fuse_opt_add_opt(&raw, "auto_unmount") != 0) {
    std::free(raw);
    return Status::Error(Code::kIoError, "out of memory");
  }
  std::unique_ptr<char, void (*)(void*)> opts(raw, std::free);
  std::vector<std::string> args = {"clairfs", "-o", opts.get()};
  if (debug) args.push_back("-d");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  fuse_session* se = fuse_session_new(&fargs, &ControlFs::Ops(), sizeof(fuse_lowlevel_ops), &fs);
  fuse_opt_free_args(&fargs);
  if (!se) return Status::Error(Code::kInvalidArgument, "cannot create the control session");
  const int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    const int err = errno;
    fuse_session_destroy(se);
    return Status::FromErrno(err, "eventfd");
  }
  if (fuse_session_mount(se, path.c_str()) != 0) {
    close(stop_fd);
    fuse_session_destroy(se);
    (void)rmdir(path.c_str());  // made by PrepareControlMountpoint: a failed start leaves none
    return Status::Error(Code::kIoError, "cannot mount the control files on '" + path + "'");
  }
  std::unique_ptr<ControlMount> mount(new ControlMount(se, path, stop_fd));
  if (auto m = FindMount(path)) mount->devno_ = m->devno;
  // Workers wait in poll() on the descriptor and the stop eventfd together, and a read finding
  // no request (another worker took it) returns EAGAIN instead of blocking.
  const int fd = fuse_session_fd(se);
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, "control session descriptor");  // ~ControlMount unmounts
  }
  return mount;
}

void ControlMount::Start(int threads) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Serve(); });
}

void ControlMount::Serve() {
  fuse_buf buf{};
  const int fd = fuse_session_fd(se_);
  while (!stopping_.load(std::memory_order_acquire)) {
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int n = poll(p, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (p[1].revents & POLLIN)) break;
    if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      if (!stopping_.load() && !gone_logged_.exchange(true)) {
        LogError(
            "the control mount {} was unmounted: .clairfs leads nowhere until "
            "clairfs is restarted",
            path_);
      }
      break;
    }
    const int res = fuse_session_receive_buf(se_, &buf);
    if (res == -EINTR || res == -EAGAIN) continue;
    if (res <= 0) break;  // 0: the connection ended (ENODEV)
    fuse_session_process_buf(se_, &buf);
  }
  std::free(buf.mem);
}

void ControlMount::Stop() {
  if (!se_) return;
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  for (auto& w : workers_) w.join();
  workers_.clear();
  // No worker reads the descriptor any more: unmounting may close it.
  if (unmounted_.exchange(true)) return;  // DetachForExit took it: the process is ending
  fuse_session_unmount(se_);
  fuse_session_destroy(se_);
  se_ = nullptr;
  close(stop_fd_);
  if (rmdir(path_.c_str()) != 0 && errno != ENOENT) {
    LogDebug("cannot remove {}: {}", path_, std::strerror(errno));
  }
}

void ControlMount::DetachForExit() {
  if (unmounted_.exchange(true)) return;  // Stop unmounted it (or is doing so)
  auto m = FindMount(path_);
  if (m && m->devno == devno_) {
    if (Status s = DetachMount(path_); !s.ok()) {
      LogCritical("cannot detach {}: {}", path_, s.message());
    }
  }
  close(fd_);  // the kernel aborts the connection once the workers die in _exit
}

}  // namespace clairfs
