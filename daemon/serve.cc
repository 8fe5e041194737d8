#include "daemon/serve.h"

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/base/log.h"
#include "daemon/control_mount.h"
#include "daemon/daemon_log.h"
#include "daemon/lifecycle.h"
#include "daemon/mounts.h"
#include "daemon/stop_signals.h"

namespace clairfs {
namespace {

// The FUSE options: what clairfs sets, then the user's -o options as they are. A value that
// comes from a path is escaped, so a comma or backslash in it cannot start another option.
// The mount is read-only for the kernel too (the control files are on a mount of their own:
// daemon/control_mount.h), so an open for writing fails there, also in no-open mode, where
// no OPEN reaches the daemon.
// Returns nullptr when libfuse cannot allocate.
char* MountOptions(const std::string& dataset, const std::string& user) {
  char* opts = nullptr;
  const std::string fsname = "fsname=clairfs:" + dataset;
  if (fuse_opt_add_opt_escaped(&opts, fsname.c_str()) != 0 ||
      fuse_opt_add_opt(&opts, "subtype=clairfs") != 0 ||
      fuse_opt_add_opt(&opts, "default_permissions") != 0 || fuse_opt_add_opt(&opts, "ro") != 0 ||
      (geteuid() == 0 && fuse_opt_add_opt(&opts, "allow_other") != 0)) {
    std::free(opts);
    return nullptr;
  }
  if (!user.empty() && fuse_opt_add_opt(&opts, user.c_str()) != 0) {  // escaped already
    std::free(opts);
    return nullptr;
  }
  return opts;
}

// How long a stop may take once asked for (FUSE requests in progress, prefetch threads, the
// peer tier, RocksDB) before the daemon detaches its mount and exits anyway.
constexpr std::chrono::seconds kStopGrace{5};

// Threads serving the control mount. More than one, so that a long manifest validation at a
// writer's close() or a read of stats waiting for another writer's release
// (Registrar::AwaitReleases) never holds back the release it waits for; a few more for
// several processes registering at once. Each costs only its stack while idle.
constexpr int kControlThreads = 4;

// Closes the FUSE descriptors (the session's and each worker's clone) under the FUSE threads
// still reading them, on the way to _exit: deliberate, so that the kernel aborts the connections
// even while a thread stuck in uninterruptible I/O keeps the process alive (CloseFuseDescriptors).
// Named for tests/tsan.supp.
void AbortFuseConnection() {
  const int closed = CloseFuseDescriptors();
  LogWarn("closed {} FUSE descriptor(s): the kernel aborts the connections", closed);
}

// The FUSE session of the dataset mount, taken down on every way out of Serve: unmounted if it
// was mounted, its signal handlers removed if they were installed, then destroyed. Close does
// it at the point of a stop where it belongs; the destructor, for a start that fails.
class Session {
 public:
  explicit Session(fuse_session* se) : se_(se) {}
  ~Session() { Close(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  fuse_session* get() const { return se_; }
  bool InstallSignalHandlers() {
    handlers_ = fuse_set_signal_handlers(se_) == 0;
    return handlers_;
  }
  bool Mount(const std::string& mountpoint) {
    mounted_ = fuse_session_mount(se_, mountpoint.c_str()) == 0;
    return mounted_;
  }
  void Close() {
    if (!se_) return;
    if (mounted_) fuse_session_unmount(se_);
    if (handlers_) fuse_remove_signal_handlers(se_);
    fuse_session_destroy(se_);
    se_ = nullptr;
  }

 private:
  fuse_session* se_;
  bool handlers_ = false;
  bool mounted_ = false;
};

}  // namespace

int Serve(DaemonParts& parts, Start& start, const CommandLine& cl, const char* argv0) {
  const std::string& mount_abs = start.mount;
  std::unique_ptr<char, void (*)(void*)> opts_raw(MountOptions(start.dataset, cl.fuse_options),
                                                  std::free);
  if (!opts_raw) return Fail(ExitCode::kFailure, "out of memory");
  const std::string opts = opts_raw.get();
  std::vector<std::string> fargs = {argv0, "-o", opts};
  if (cl.debug) fargs.push_back("-d");
  std::vector<char*> fargv;
  for (auto& a : fargs) fargv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(fargv.size()), fargv.data());
  // libfuse copies the arguments it keeps; they are freed on every way out of main.
  std::unique_ptr<fuse_args, void (*)(fuse_args*)> free_args(&args, fuse_opt_free_args);
  fuse_session* se =
      fuse_session_new(&args, &ClairFs::Ops(), sizeof(fuse_lowlevel_ops), &parts.fs());
  if (!se) return Fail(ExitCode::kUsage, "invalid FUSE options: " + opts);
  Session session(se);
  parts.fs().SetSession(se);
  if (!session.InstallSignalHandlers()) {
    return Fail(ExitCode::kFailure, "cannot install signal handlers");
  }
  // Set once mounted (before the lifecycle thread starts). Our mount is told apart from
  // whatever may sit at the path later by its device number. Closing the FUSE descriptors
  // aborts the connections once the threads reading them die in _exit, so the callers blocked
  // on this mount get an error even while a thread stuck in uninterruptible I/O keeps the
  // process (and its descriptor table) alive.
  dev_t mount_dev = 0;
  bool mounted = false;
  // Set before the lifecycle thread starts; destroyed (stopped) before the session.
  std::unique_ptr<ControlMount> control_mount;
  Lifecycle::Hooks hooks;
  hooks.on_hangup = [] { ReopenLog(); };
  hooks.on_stop = [b = &parts.backing()] { b->Stop(); };
  hooks.on_overrun = [&mount_abs, &mount_dev, &mounted, &control_mount] {
    if (control_mount) control_mount->DetachForExit();
    auto m = FindMount(mount_abs);
    if (m && m->devno == mount_dev) {
      if (Status s = DetachMount(mount_abs); !s.ok()) {
        LogCritical("cannot detach {}: {}", mount_abs, s.message());
      } else {
        LogWarn("detached {}", mount_abs);
      }
    }
    if (mounted) AbortFuseConnection();
  };
  // After the signal handlers, before the mount: SIGTERM, SIGINT and SIGHUP are ours from the
  // moment the mount is visible.
  auto life = Lifecycle::Install(se, kStopGrace, std::move(hooks));
  if (!life.ok()) return Fail(ExitCode::kFailure, life.status().message());
  // The control files first: the main mount is announced (appears) with `.clairfs` usable.
  auto mounted_control = [&]() -> Result<std::unique_ptr<ControlMount>> {
    if (Status s = PrepareControlMountpoint(start.control); !s.ok()) {
      return s;
    }
    return ControlMount::Mount(parts.control_fs(), start.control, mount_abs, cl.debug);
  }();
  if (!mounted_control.ok()) {
    return Fail(ExitCode::kMountFailed, mounted_control.status().message());
  }
  control_mount = std::move(mounted_control.value());
  if (!session.Mount(mount_abs)) {
    return Fail(ExitCode::kMountFailed,
                "cannot mount on '" + mount_abs + "' (see the message above)");
  }
  if (const auto found = FindMount(mount_abs)) mount_dev = found->devno;
  mounted = true;
  if (fuse_daemonize(cl.foreground ? 1 : 0) != 0) {
    return Fail(ExitCode::kFailure, "cannot daemonize");
  }
  if (!cl.foreground) {
    if (Status s = parts.ReopenSsdTiers(); !s.ok()) {
      LogCritical("cannot reopen the SSD tier after daemonizing: {}", s.message());
      return static_cast<int>(ExitCode::kFailure);
    }
  }
  parts.Serving();
  std::optional<ThreadsWithoutStopSignals> guard(std::in_place);
  control_mount->Start(kControlThreads);
  life.value()->StartThread();
  parts.StartThreads();
  LogInfo("clairfs {} serving {} at {}", CLAIRFS_VERSION, start.dataset, mount_abs);
  guard.reset();
  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, static_cast<unsigned>(parts.config().fuse.threads));
  fuse_loop_cfg_set_idle_threads(loop, static_cast<unsigned>(parts.config().fuse.threads));
  fuse_loop_cfg_set_clone_fd(loop, parts.config().fuse.clone_fd ? 1 : 0);
  // Returns once a signal or an unmount ended the session and every worker has finished
  // its request; a signal has started the stop clock already.
  const int rc = fuse_session_loop_mt(se, loop);
  Lifecycle& lc = *life.value();
  lc.BeginStop();
  fuse_loop_cfg_destroy(loop);
  // Calls stuck on the backing store fail now, so no prefetch thread waits out their deadline.
  parts.backing().Stop();
  lc.SetStage("stopping the batch path");
  parts.StopBatch();
  lc.SetStage("stopping the freshness threads");
  parts.StopFreshness();
  // fusermount3 -u of the mount alone (or a signal) ends the control mount too.
  lc.SetStage("unmounting the control files");
  control_mount->Stop();
  parts.StopThreads([&lc](const char* stage) { lc.SetStage(stage); });
  lc.SetStage("unmounting");
  session.Close();
  lc.SetStage("closing the SSD tier (RocksDB)");
  parts.CloseSsdTiers();
  lc.Finish();
  if (lc.stop_signal() != 0) {
    LogInfo("clairfs stopped ({})", strsignal(lc.stop_signal()));
  } else {
    LogInfo("clairfs stopped");
  }
  LogFlush();
  // MPI_Finalize waits for every rank; a dead one would keep this process forever.
  if (start.transport) start.transport->Finalize(std::chrono::seconds(10), rc == 0 ? 0 : 1);
  // I/O threads still inside calls on a stuck store may return at any time: no destructor of
  // this process (the logger, the allocator's leak check that stops every thread) may run
  // under them. Everything of ours is closed by now.
  if (const int stuck = parts.backing().LiveThreads(); stuck > 0) {
    LogWarn("{} I/O thread(s) still stuck in the dataset's file system; exiting without them",
            stuck);
    LogFlush();
    _exit(rc == 0 ? 0 : 1);
  }
  return rc == 0 ? 0 : 1;
}

}  // namespace clairfs
