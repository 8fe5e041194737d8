#include "daemon/start.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "daemon/control_mount.h"
#include "daemon/mounts.h"
#include "daemon/stop_signals.h"
#include "daemon/supervise.h"

namespace clairfs {
namespace {

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
    auto m = FindMount(path);
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
  if (Status s = DetachMount(path); !s.ok() || IsClairfs()) {
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

}  // namespace

std::variant<Start, int> PrepareStart(CommandLine& cl) {
  std::string& dataset = cl.dataset;
  std::string& mountpoint = cl.mountpoint;
  bool& foreground = cl.foreground;
  Start start;
  start.config_path = ConfigPathToRead(cl);
  auto loaded = LoadConfig(start.config_path, cl.overrides);
  if (!loaded.ok()) return Fail(ExitCode::kConfig, loaded.status().message());
  Config& config = start.config;
  config = std::move(loaded.value());
  // Cluster mode only when asked for (--cluster, cluster.enabled) under a launcher of more
  // than one rank: an MPI environment inherited by a plain start is ignored, and MPI is not
  // touched at all.
  std::unique_ptr<cluster::MpiTransport>& transport = start.transport;
  const int world = cluster::LauncherWorldSize();
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
    const int local = cluster::LauncherLocalSize();
    if (local > 1 && mountpoint.find("{rank}") == std::string::npos) {
      return Fail(ExitCode::kUsage,
                  std::to_string(local) +
                      " ranks of this launch run on this machine and would "
                      "all mount on '" +
                      (mountpoint.empty() ? dataset : mountpoint) +
                      "'; give each its own mountpoint with {rank}, e.g. mpiexec ... clairfs "
                      "--cluster " +
                      dataset + " '/mnt/data{rank}'");
    }
    if (config.cluster.key_file.empty()) {
      return Fail(ExitCode::kConfig,
                  "cluster mode needs cluster.key_file: a file holding the cluster's secret, the "
                  "same on every node and readable by the daemon's user alone (e.g. `head -c 32 "
                  "/dev/urandom > /etc/clairfs/cluster.key; chmod 600 /etc/clairfs/cluster.key`, "
                  "copied to every node; docs/permissions.md)");
    }
    auto key = cluster::LoadClusterKey(config.cluster.key_file);
    if (!key.ok()) return Fail(ExitCode::kConfig, key.status().message());
    start.key = std::move(key.value());
    foreground = true;                            // the launcher owns the process
    if (int code; Supervise(&code)) return code;  // the parent, after its child
  }
  if (launched) {
    auto nonce = cluster::RandomNonce();
    if (!nonce.ok()) return Fail(ExitCode::kFailure, nonce.status().message());
    const std::string hello = cluster::SealedTransport::Hello(*start.key, nonce.value());
    auto t = [&] {
      ThreadsWithoutStopSignals guard;
      return cluster::MpiTransport::Create(hello, config.cluster.peer.plan_timeout);
    }();
    if (!t.ok()) return Fail(ExitCode::kFailure, t.status().message());
    transport = std::move(t.value());
    auto sealed = cluster::SealedTransport::Create(*transport, start.key, std::move(nonce.value()),
                                                   transport->hellos());
    if (!sealed.ok()) return Fail(ExitCode::kConfig, sealed.status().message());
    start.sealed = std::move(sealed.value());
    const std::string rank = std::to_string(transport->rank());
    for (size_t at; (at = mountpoint.find("{rank}")) != std::string::npos;) {
      mountpoint.replace(at, 6, rank);
    }
    SubstituteRank(&config, transport->rank());
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
  auto control_path = ControlMountPath(mount_abs);
  if (!control_path.ok()) return Fail(ExitCode::kMountFailed, control_path.status().message());

  start.dataset = data_abs;
  start.mount = mount_abs;
  start.control = std::move(control_path.value());
  return std::variant<Start, int>(std::move(start));
}

}  // namespace clairfs
