// clairfs: mount a dataset read-only with a clairvoyant cache (docs/usage.md, clairfs(1)).
// Order of start-up: parse options, open the dataset, construct everything, mount, daemonize,
// then start threads (fork would not carry them), serve, and tear down in reverse.
// Under an MPI launcher (more than one rank) the daemon stays in the foreground under a
// supervising parent (tools/supervise.h), joins the job's peer tier (cluster/), and
// "{rank}" in the mountpoint and SSD directories becomes its rank.
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/backing.h"
#include "cache/prefetcher.h"
#include "cache/ram_tier.h"
#include "cache/ssd_tier.h"
#include "cluster/cluster_node.h"
#include "cluster/mpi_transport.h"
#include "conf/config.h"
#include "conf/memory_budget.h"
#include "fs/access.h"
#include "fs/clairfs_fs.h"
#include "fs/control.h"
#include "fs/control_fs.h"
#include "tools/command_line.h"
#include "tools/control_mount.h"
#include "tools/daemon_log.h"
#include "tools/lifecycle.h"
#include "tools/mounts.h"
#include "tools/supervise.h"

namespace {

using clairfs::ExitCode;

int Fail(ExitCode code, const std::string& message) {
  std::fprintf(stderr, "clairfs: %s\n", message.c_str());
  return static_cast<int>(code);
}

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

// What sits at path (absolute, lexically normal) before mounting there: nothing of clairfs's
// (fine), a live clairfs (refused: unmount it first), or the mount of a killed daemon, on
// which every request fails with ENOTCONN. statvfs() always reaches the daemon (stat() may be
// answered from the kernel's attribute cache), so it tells the last two apart. A dead one is
// detached (umount2 or fusermount3 -uz, no shell). Returns an error message, or "" when path
// is ready.
std::string PrepareMountpoint(const std::string& path) {
  const auto IsClairfs = [&] {
    auto m = clairfs::FindMount(path);
    return m && m->fstype == "fuse.clairfs";
  };
  if (!IsClairfs()) return "";
  struct statvfs sv;
  if (statvfs(path.c_str(), &sv) == 0) {
    return "'" + path +
           "' is already mounted by a running clairfs; unmount it first "
           "(fusermount3 -u " +
           path + ")";
  }
  if (errno != ENOTCONN) return "";
  if (clairfs::Status s = clairfs::DetachMount(path); !s.ok() || IsClairfs()) {
    return "'" + path +
           "' is the stale mount of a clairfs that is gone, and it could not be detached (" +
           (s.ok() ? std::string("still listed") : s.message()) + "); run: fusermount3 -u " + path;
  }
  std::fprintf(stderr, "clairfs: detached the stale mount of a killed clairfs at %s\n",
               path.c_str());
  return "";
}

std::string LexicalAbsolute(const std::string& p) {
  std::filesystem::path abs = std::filesystem::absolute(p).lexically_normal();
  std::string s = abs.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// The FUSE options: what clairfs sets, then the user's -o options as they are. A value that
// comes from a path is escaped, so a comma or backslash in it cannot start another option.
// The mount is read-only for the kernel too (the control files are on a mount of their own:
// tools/control_mount.h), so an open for writing fails there, also in no-open mode, where
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

// How long a stop may take once asked for (FUSE requests in progress, prefetch threads, the
// peer tier, RocksDB) before the daemon detaches its mount and exits anyway.
constexpr std::chrono::seconds kStopGrace{5};

// Threads serving the control mount. More than one, so that a long manifest validation at a
// writer's close() or a read of stats waiting for another writer's release
// (ControlPlane::AwaitReleases) never holds back the release it waits for; a few more for
// several processes registering at once. Each costs only its stack while idle.
constexpr int kControlThreads = 4;

// Closes the FUSE session's descriptor under the FUSE threads still reading it, on the way to
// _exit: deliberate, so that the kernel aborts the connection even while a thread stuck in
// uninterruptible I/O keeps the process alive. Named for tests/tsan.supp.
void AbortFuseConnection(int fd) { close(fd); }

// Until Serving(): a start that fails takes back the SSD cache directories it made
// (SsdTier::Abandon), so that a failed start leaves no empty cache behind. Declared after the
// tiers it names, so that it runs while they are still alive.
class StartGuard {
 public:
  explicit StartGuard(const std::vector<clairfs::SsdTier*>& tiers) : tiers_(tiers) {}
  ~StartGuard() {
    if (serving_) return;
    for (auto* t : tiers_) t->Abandon();
  }
  StartGuard(const StartGuard&) = delete;
  StartGuard& operator=(const StartGuard&) = delete;
  void Serving() { serving_ = true; }

 private:
  const std::vector<clairfs::SsdTier*>& tiers_;
  bool serving_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  ExitCode parsed = ExitCode::kOk;
  auto command_line = clairfs::ParseCommandLine(argc, argv, &parsed);
  if (!command_line) return static_cast<int>(parsed);
  clairfs::CommandLine& cl = *command_line;
  std::string& dataset = cl.dataset;
  std::string& mountpoint = cl.mountpoint;
  bool& foreground = cl.foreground;
  const bool debug = cl.debug;
  const std::string config_path = clairfs::ConfigPathToRead(cl);

  auto loaded = clairfs::LoadConfig(config_path, cl.overrides);
  if (!loaded.ok()) return Fail(ExitCode::kConfig, loaded.status().message());
  clairfs::Config config = std::move(loaded.value());
  // Cluster mode only when asked for (--cluster, cluster.enabled) under a launcher of more
  // than one rank: an MPI environment inherited by a plain start is ignored, and MPI is not
  // touched at all.
  std::unique_ptr<clairfs::cluster::MpiTransport> transport;
  const int world = clairfs::cluster::LauncherWorldSize();
  const bool want_cluster = cl.cluster || config.cluster.enabled;
  if (want_cluster && world == 0) {
    return Fail(ExitCode::kUsage,
                "cluster mode (--cluster or cluster.enabled) needs an MPI launcher: mpiexec -n N "
                "clairfs --cluster DATASET MOUNTPOINT");
  }
  if (!want_cluster && world > 1) {
    cl.notes.push_back("an MPI launcher's environment says " + std::to_string(world) +
                       " ranks, but cluster mode is off: this daemon serves this node alone "
                       "(--cluster or cluster.enabled shares the cache between the ranks)");
  }
  const bool launched = want_cluster && world > 1;
  if (launched) {
    // Ranks sharing a machine must not stack their mounts on one path.
    const int local = clairfs::cluster::LauncherLocalSize();
    if (local > 1 && mountpoint.find("{rank}") == std::string::npos) {
      return Fail(ExitCode::kUsage,
                  std::to_string(local) + " ranks of this launch run on this machine and would "
                  "all mount on '" + (mountpoint.empty() ? dataset : mountpoint) +
                  "'; give each its own mountpoint with {rank}, e.g. mpiexec ... clairfs "
                  "--cluster " + dataset + " '/mnt/data{rank}'");
    }
    foreground = true;  // the launcher owns the process
    if (int code; clairfs::Supervise(&code)) return code;
  }
  if (launched) {
    auto t = [] {
      ThreadsWithoutStopSignals guard;
      return clairfs::cluster::MpiTransport::Create();
    }();
    if (!t.ok()) return Fail(ExitCode::kFailure, t.status().message());
    transport = std::move(t.value());
    const std::string rank = std::to_string(transport->rank());
    for (size_t at; (at = mountpoint.find("{rank}")) != std::string::npos;) {
      mountpoint.replace(at, 6, rank);
    }
    clairfs::SubstituteRank(&config, transport->rank());
  }
  // A killed daemon's mount must go before any path through it is resolved.
  if (std::string err =
          PrepareMountpoint(LexicalAbsolute(mountpoint.empty() ? dataset : mountpoint));
      !err.empty()) {
    return Fail(ExitCode::kMountFailed, err);
  }
  const std::string data_abs = RealPath(dataset);
  struct stat st;
  if (data_abs.empty() || stat(data_abs.c_str(), &st) != 0) {
    return Fail(ExitCode::kNoInput, "dataset '" + dataset + "': " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Fail(ExitCode::kNoInput, "dataset '" + dataset + "' is not a directory");
  }
  if (mountpoint.empty()) mountpoint = data_abs;
  const std::string mount_abs = RealPath(mountpoint);
  if (mount_abs.empty()) {
    return Fail(ExitCode::kNoInput, "mountpoint '" + mountpoint + "': " + std::strerror(errno));
  }
  // Where the control files are mounted; `.clairfs` in the mount leads there.
  auto control_path = clairfs::ControlMountPath(mount_abs);
  if (!control_path.ok()) return Fail(ExitCode::kMountFailed, control_path.status().message());

  // The dataset stays reachable through this descriptor after the mount hides its path.
  clairfs::Stats stats;
  clairfs::IoOptions io;
  io.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.cache.backing_timeout * 1000));
  // A dead dataset file system remounted at its path is read again, unless that path leads
  // through this very mount (mounted over the dataset, or above it).
  const bool beneath_mount =
      data_abs == mount_abs || data_abs.rfind(mount_abs == "/" ? "/" : mount_abs + "/", 0) == 0;
  auto backing = clairfs::PosixBacking::Open(
      data_abs, io, &stats,
      beneath_mount ? clairfs::PosixBacking::OnDisconnect::kKeep
                    : clairfs::PosixBacking::OnDisconnect::kReopen);
  if (!backing.ok()) return Fail(ExitCode::kNoInput, backing.status().message());

  clairfs::MemoryFit memory_fit;  // the capacities against the memory limit, logged below
  if (auto s = clairfs::ResolveForDataset(&config, data_abs, transport ? transport->rank() : -1,
                                          &memory_fit);
      !s.ok()) {
    return Fail(ExitCode::kConfig, (config_path.empty() ? "" : config_path + ": ") + s.message());
  }
  if (auto s = clairfs::SetUpLogging(config.log, foreground); !s.ok()) {
    return Fail(ExitCode::kConfig, (config_path.empty() ? "" : config_path + ": ") + s.message());
  }
  spdlog::info("configuration: {}", config_path.empty() ? "built-in defaults" : config_path);
  for (const auto& o : cl.overrides) spdlog::info("configuration: -o {}={}", o.key, o.value);
  for (const auto& note : cl.notes) spdlog::warn("{}", note);
  spdlog::info("{}", memory_fit.summary);
  for (const auto& w : memory_fit.warnings) spdlog::warn("{}", w);
  std::vector<std::unique_ptr<clairfs::Tier>> tiers;
  std::vector<clairfs::Tier*> tier_ptrs;
  std::vector<clairfs::SsdTier*> ssd_tiers;  // closed across the daemonizing fork
  StartGuard start_guard(ssd_tiers);
  clairfs::PrefetchOptions popts;
  for (const auto& t : config.cache.tiers) {
    if (t.kind == "ssd") {
      // A daemon opens RocksDB only after the fork (see SsdTier::Prepare).
      ThreadsWithoutStopSignals guard;  // RocksDB's
      clairfs::SsdOptions ssd_opts;
      ssd_opts.dataset = data_abs;  // recorded in the directory's description (cache_info.h)
      auto ssd = foreground ? clairfs::SsdTier::Open(t.kind, t.dir, t.capacity, ssd_opts)
                            : clairfs::SsdTier::Prepare(t.kind, t.dir, t.capacity, ssd_opts);
      if (!ssd.ok()) {
        // Another daemon holds the directory's lock (cache/ssd_dir.h): worth a retry later.
        const bool locked = ssd.status().os_errno() == EWOULDBLOCK;
        return Fail(locked ? ExitCode::kCacheLocked : ExitCode::kConfig, ssd.status().message());
      }
      spdlog::info("ssd tier in {}: {} objects, {} of {} bytes", t.dir, ssd.value()->objects(),
                   ssd.value()->used_bytes(), t.capacity);
      ssd_tiers.push_back(ssd.value().get());
      tiers.push_back(std::move(ssd.value()));
    } else {
      tiers.push_back(std::make_unique<clairfs::RamTier>(t.kind, t.capacity));
    }
    tier_ptrs.push_back(tiers.back().get());
    popts.tier_threads.push_back(t.threads);
  }
  popts.staging_capacity = config.cache.staging_capacity;
  popts.staging_threads = config.cache.staging_threads;
  popts.demand_threads = config.cache.demand_threads;
  popts.fetch_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(config.cache.fetch_timeout * 1000));
  popts.chunk_size = config.cache.chunk_size;
  popts.record_chunk_size = config.cache.record_chunk_size;
  popts.consumption_lag = config.fuse.open_mode == clairfs::OpenMode::kNone
                              ? std::min(config.cache.consumption_lag, config.cache.page_cache_lag)
                              : config.cache.consumption_lag;
  popts.watch.no_plan_after =
      std::chrono::milliseconds(static_cast<int64_t>(config.warn.no_plan_after * 1000));
  popts.watch.check_reads = config.warn.check_reads;
  popts.watch.order_slack = config.warn.order_slack;
  popts.stream_idle =
      std::chrono::milliseconds(static_cast<int64_t>(config.cache.stream_idle * 1000));
  popts.max_streams = config.cache.max_streams;
  popts.keep_copies = config.cache.keep_copies;
  clairfs::Prefetcher prefetcher(*backing.value(), tier_ptrs, popts, &stats);
  std::vector<std::string> aliases = {data_abs};
  if (mount_abs != data_abs) aliases.push_back(mount_abs);
  clairfs::ControlPlane control(*backing.value(), prefetcher, stats, aliases);
  clairfs::AccessPolicy access(*backing.value(), config.fuse, stats);
  clairfs::ClairFs fs(*backing.value(), prefetcher, control, access, stats, config.fuse, aliases,
                      control_path.value());
  clairfs::ControlFs control_fs(control, access, config.fuse);
  std::unique_ptr<clairfs::cluster::ClusterNode> peer;
  if (transport) {
    const auto ms = [](double secs) {
      return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
    };
    clairfs::cluster::PeerOptions po;
    po.plan_timeout = ms(config.cluster.plan_timeout);
    po.peer_timeout = ms(config.cluster.peer_timeout);
    po.down_for = ms(config.cluster.down_for);
    po.serve_threads = config.cluster.serve_threads;
    peer = std::make_unique<clairfs::cluster::ClusterNode>(*transport, po, &stats);
    prefetcher.SetCluster(peer->Hooks(config.cluster.backing_advantage));
    control.SetClusterInfo([&] { return peer->InfoJson(); });
    spdlog::info("rank {} of {}: peer tier on", transport->rank(), transport->size());
  }

  std::unique_ptr<char, void (*)(void*)> opts_raw(MountOptions(data_abs, cl.fuse_options),
                                                  std::free);
  if (!opts_raw) return Fail(ExitCode::kFailure, "out of memory");
  const std::string opts = opts_raw.get();
  std::vector<std::string> fargs = {argv[0], "-o", opts};
  if (debug) fargs.push_back("-d");
  std::vector<char*> fargv;
  for (auto& a : fargs) fargv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(fargv.size()), fargv.data());
  // libfuse copies the arguments it keeps; they are freed on every way out of main.
  std::unique_ptr<fuse_args, void (*)(fuse_args*)> free_args(&args, fuse_opt_free_args);
  fuse_session* se =
      fuse_session_new(&args, &clairfs::ClairFs::Ops(), sizeof(fuse_lowlevel_ops), &fs);
  if (!se) return Fail(ExitCode::kUsage, "invalid FUSE options: " + opts);
  fs.SetSession(se);
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return Fail(ExitCode::kFailure, "cannot install signal handlers");
  }
  // Set once mounted. Our mount is told apart from whatever may sit at the path later by its
  // device number. Closing the session's descriptor aborts the connection once the threads
  // reading it die in _exit, so the callers blocked on this mount get an error even while a
  // thread stuck in uninterruptible I/O keeps the process (and its descriptors) alive.
  dev_t mount_dev = 0;
  int fuse_fd = -1;
  std::unique_ptr<clairfs::ControlMount> control_mount;  // set before the lifecycle thread starts
  clairfs::Lifecycle::Hooks hooks;
  hooks.on_hangup = [] { clairfs::ReopenLog(); };
  hooks.on_stop = [b = backing.value().get()] { b->Stop(); };
  hooks.on_overrun = [&mount_abs, &mount_dev, &fuse_fd, &control_mount] {
    if (control_mount) control_mount->DetachForExit();
    auto m = clairfs::FindMount(mount_abs);
    if (m && m->devno == mount_dev) {
      if (clairfs::Status s = clairfs::DetachMount(mount_abs); !s.ok()) {
        spdlog::critical("cannot detach {}: {}", mount_abs, s.message());
      } else {
        spdlog::warn("detached {}", mount_abs);
      }
    }
    if (fuse_fd >= 0) AbortFuseConnection(fuse_fd);
  };
  // After fuse_set_signal_handlers, before the mount: SIGTERM, SIGINT and SIGHUP are ours
  // from the moment the mount is visible.
  auto life = clairfs::Lifecycle::Install(se, kStopGrace, std::move(hooks));
  if (!life.ok()) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return Fail(ExitCode::kFailure, life.status().message());
  }
  // The control files first: the main mount is announced (appears) with `.clairfs` usable.
  auto mounted_control = [&]() -> clairfs::Result<std::unique_ptr<clairfs::ControlMount>> {
    if (clairfs::Status s = clairfs::PrepareControlMountpoint(control_path.value()); !s.ok()) {
      return s;
    }
    return clairfs::ControlMount::Mount(control_fs, control_path.value(), mount_abs, debug);
  }();
  if (!mounted_control.ok()) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return Fail(ExitCode::kMountFailed, mounted_control.status().message());
  }
  control_mount = std::move(mounted_control.value());
  if (fuse_session_mount(se, mount_abs.c_str()) != 0) {
    control_mount->Stop();
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return Fail(ExitCode::kMountFailed, "cannot mount on '" + mount_abs + "' (see the message above)");
  }
  if (const auto mounted = clairfs::FindMount(mount_abs)) mount_dev = mounted->devno;
  fuse_fd = fuse_session_fd(se);
  if (fuse_daemonize(foreground ? 1 : 0) != 0) {
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return Fail(ExitCode::kFailure, "cannot daemonize");
  }
  if (!foreground) {
    ThreadsWithoutStopSignals guard;  // RocksDB's
    for (auto* ssd : ssd_tiers) {
      if (clairfs::Status s = ssd->Reopen(); !s.ok()) {
        spdlog::critical("cannot reopen the SSD tier after daemonizing: {}", s.message());
        fuse_session_unmount(se);
        fuse_remove_signal_handlers(se);
        fuse_session_destroy(se);
        return static_cast<int>(ExitCode::kFailure);
      }
    }
  }
  start_guard.Serving();
  std::optional<ThreadsWithoutStopSignals> guard(std::in_place);
  fs.StartWatch();
  control_mount->Start(kControlThreads);
  life.value()->StartThread();
  spdlog::info("clairfs {} serving {} at {}", CLAIRFS_VERSION, data_abs, mount_abs);
  if (peer) {
    peer->Start(
        [&](const std::string& path, const clairfs::FileVersion& version) {
          return prefetcher.GetLocal(path, version);
        },
        [&] { prefetcher.Replan(); },
        [&](const std::string& path, clairfs::BlobPtr blob) {
          prefetcher.Adopt(path, std::move(blob));
        });
  }
  prefetcher.Start();
  guard.reset();
  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, static_cast<unsigned>(config.fuse.threads));
  fuse_loop_cfg_set_idle_threads(loop, static_cast<unsigned>(config.fuse.threads));
  // Returns once a signal or an unmount ended the session and every worker has finished
  // its request; a signal has started the stop clock already.
  const int rc = fuse_session_loop_mt(se, loop);
  clairfs::Lifecycle& lc = *life.value();
  lc.BeginStop();
  fuse_loop_cfg_destroy(loop);
  // Calls stuck on the backing store fail now, so no prefetch thread waits out their deadline.
  backing.value()->Stop();
  fs.StopWatch();
  // fusermount3 -u of the mount alone (or a signal) ends the control mount too.
  lc.SetStage("unmounting the control files");
  control_mount->Stop();
  lc.SetStage("stopping the prefetch threads");
  prefetcher.Stop();
  if (peer) {
    lc.SetStage("stopping the peer tier");
    peer->Stop();
  }
  lc.SetStage("unmounting");
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  lc.SetStage("closing the SSD tier (RocksDB)");
  for (auto* ssd : ssd_tiers) ssd->Close();
  lc.Finish();
  if (lc.stop_signal() != 0) {
    spdlog::info("clairfs stopped ({})", strsignal(lc.stop_signal()));
  } else {
    spdlog::info("clairfs stopped");
  }
  spdlog::default_logger()->flush();
  // MPI_Finalize waits for every rank; a dead one would keep this process forever.
  if (transport) transport->Finalize(std::chrono::seconds(10), rc == 0 ? 0 : 1);
  // I/O threads still inside calls on a stuck store may return at any time: no destructor of
  // this process (the logger, the allocator's leak check that stops every thread) may run
  // under them. Everything of ours is closed by now.
  if (const int stuck = backing.value()->LiveThreads(); stuck > 0) {
    spdlog::warn("{} I/O thread(s) still stuck in the dataset's file system; exiting without them",
                 stuck);
    spdlog::default_logger()->flush();
    _exit(rc == 0 ? 0 : 1);
  }
  return rc == 0 ? 0 : 1;
}
