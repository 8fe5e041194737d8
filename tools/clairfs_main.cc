// clairfs: mount a dataset read-only with a clairvoyant cache (docs/usage.md).
// Order of start-up: parse options, open the dataset, construct everything, mount, daemonize,
// then start threads (fork would not carry them), serve, and tear down in reverse.
// Under an MPI launcher (more than one rank) the daemon stays in the foreground under a
// supervising parent (tools/supervise.h), joins the job's peer tier (cluster/), and
// "{rank}" in the mountpoint and SSD directories becomes its rank.
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/syslog_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cache/backing.h"
#include "cache/prefetcher.h"
#include "cache/ram_tier.h"
#include "cache/ssd_tier.h"
#include "cluster/mpi_transport.h"
#include "cluster/peer_tier.h"
#include "conf/config.h"
#include "fs/clairfs_fs.h"
#include "fs/control.h"
#include "tools/supervise.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "clairfs: %s\n", message.c_str());
  return 1;
}

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

// mountinfo writes space, tab, newline and backslash in paths as octal escapes (\040).
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      out += static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// True iff path is the mountpoint of a FUSE mount of clairfs (per /proc/self/mountinfo).
bool IsClairfsMount(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mnt;
    fields >> id >> parent >> devno >> root >> mnt;
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || Unescape(mnt) != path) continue;
    if (line.compare(dash + 3, 13, "fuse.clairfs ") == 0) return true;
  }
  return false;
}

// What sits at path (absolute, lexically normal) before mounting there: nothing of clairfs's
// (fine), a live clairfs (refused: unmount it first), or the mount of a killed daemon, on
// which every request fails with ENOTCONN. statvfs() always reaches the daemon (stat() may be
// answered from the kernel's attribute cache), so it tells the last two apart. A dead one is
// detached with fusermount3 -uz. Returns an error message, or "" when path is ready.
std::string PrepareMountpoint(const std::string& path) {
  if (!IsClairfsMount(path)) return "";
  struct statvfs sv;
  if (statvfs(path.c_str(), &sv) == 0) {
    return "'" + path +
           "' is already mounted by a running clairfs; unmount it first "
           "(fusermount3 -u " +
           path + ")";
  }
  if (errno != ENOTCONN) return "";
  const std::string cmd = "fusermount3 -uz '" + path + "' 2>/dev/null";
  if (std::system(cmd.c_str()) != 0 || IsClairfsMount(path)) {
    return "'" + path +
           "' is the stale mount of a clairfs that is gone, and it could not be "
           "detached; run: fusermount3 -u " +
           path;
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

void SetUpLogging(const clairfs::LogConfig& log, bool foreground) {
  std::shared_ptr<spdlog::logger> logger;
  if (!log.file.empty()) {
    logger = spdlog::basic_logger_mt("clairfs", log.file);
  } else if (foreground) {
    logger = spdlog::stderr_logger_mt("clairfs");
  } else {
    logger = spdlog::syslog_logger_mt("clairfs", "clairfs", LOG_PID);
  }
  logger->set_level(spdlog::level::from_str(log.level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "clairfs: a read-only FUSE mount of a dataset that prefetches in the order the "
      "training job will read it (.clairfs/manifest)."};
  std::string dataset, mountpoint, config_path;
  bool foreground = false, debug = false;
  std::vector<std::string> mount_opts;
  app.add_option("DATASET", dataset, "the dataset directory")->required();
  app.add_option("MOUNTPOINT", mountpoint, "where to mount (default: over DATASET itself)");
  app.add_option("-c,--config", config_path, "YAML configuration file (see conf/clairfs.yaml)");
  app.add_flag("-f,--foreground", foreground, "stay in the foreground and log to stderr");
  app.add_option("-o", mount_opts, "FUSE mount options, comma separated (repeatable)");
  app.add_flag("-d,--debug", debug, "print every FUSE request (implies -f)");
  app.set_version_flag("-V,--version", std::string("clairfs ") + CLAIRFS_VERSION);
  CLI11_PARSE(app, argc, argv);
  if (debug) foreground = true;

  clairfs::Config config;
  if (!config_path.empty()) {
    auto loaded = clairfs::LoadConfigFile(config_path);
    if (!loaded.ok()) return Fail(loaded.status().message());
    config = std::move(loaded.value());
  }
  // With one rank, or no launcher, MPI is not touched at all.
  std::unique_ptr<clairfs::cluster::MpiTransport> transport;
  if (clairfs::cluster::LauncherWorldSize() > 1) {
    foreground = true;  // the launcher owns the process
    if (int code; clairfs::Supervise(&code)) return code;
    auto t = clairfs::cluster::MpiTransport::Create();
    if (!t.ok()) return Fail(t.status().message());
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
    return Fail(err);
  }
  const std::string data_abs = RealPath(dataset);
  struct stat st;
  if (data_abs.empty() || stat(data_abs.c_str(), &st) != 0) {
    return Fail("dataset '" + dataset + "': " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return Fail("dataset '" + dataset + "' is not a directory");
  if (mountpoint.empty()) mountpoint = data_abs;
  const std::string mount_abs = RealPath(mountpoint);
  if (mount_abs.empty()) {
    return Fail("mountpoint '" + mountpoint + "': " + std::strerror(errno));
  }

  // The dataset stays reachable through this descriptor after the mount hides its path.
  clairfs::Stats stats;
  clairfs::IoOptions io;
  io.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.cache.backing_timeout * 1000));
  auto backing = clairfs::PosixBacking::Open(data_abs, io, &stats);
  if (!backing.ok()) return Fail(backing.status().message());

  if (auto s = clairfs::ResolveForDataset(&config, data_abs, transport ? transport->rank() : -1);
      !s.ok()) {
    return Fail((config_path.empty() ? "" : config_path + ": ") + s.message());
  }
  SetUpLogging(config.log, foreground);
  std::vector<std::unique_ptr<clairfs::Tier>> tiers;
  std::vector<clairfs::Tier*> tier_ptrs;
  std::vector<clairfs::SsdTier*> ssd_tiers;  // closed across the daemonizing fork
  clairfs::PrefetchOptions popts;
  for (const auto& t : config.cache.tiers) {
    if (t.kind == "ssd") {
      // A daemon opens RocksDB only after the fork (see SsdTier::Prepare).
      auto ssd = foreground ? clairfs::SsdTier::Open(t.kind, t.dir, t.capacity)
                            : clairfs::SsdTier::Prepare(t.kind, t.dir, t.capacity);
      if (!ssd.ok()) return Fail(ssd.status().message());
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
  popts.max_file_size = config.cache.max_file_size;
  clairfs::Prefetcher prefetcher(*backing.value(), tier_ptrs, popts, &stats);
  std::vector<std::string> aliases = {data_abs};
  if (mount_abs != data_abs) aliases.push_back(mount_abs);
  clairfs::ControlPlane control(*backing.value(), prefetcher, stats, aliases);
  clairfs::ClairFs fs(*backing.value(), prefetcher, control, stats, config.fuse, aliases);
  std::unique_ptr<clairfs::cluster::PeerTier> peer;
  if (transport) {
    const auto ms = [](double secs) {
      return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
    };
    clairfs::cluster::PeerOptions po;
    po.plan_timeout = ms(config.cluster.plan_timeout);
    po.peer_timeout = ms(config.cluster.peer_timeout);
    po.down_for = ms(config.cluster.down_for);
    po.serve_threads = config.cluster.serve_threads;
    peer = std::make_unique<clairfs::cluster::PeerTier>(*transport, po, &stats);
    clairfs::ClusterHooks hooks;
    hooks.place = [&](clairfs::Plan& plan, const clairfs::PlacementLimits& limits, bool replan) {
      return peer->Place(plan, limits, replan);
    };
    hooks.held = [&](const std::string& path, const clairfs::FileVersion& version) {
      peer->Held(path, version);
    };
    hooks.fetched = [&](const std::string& path, const clairfs::BlobPtr& blob) {
      peer->Fetched(path, blob);
    };
    hooks.peer = peer.get();
    hooks.backing_advantage = config.cluster.backing_advantage;
    prefetcher.SetCluster(std::move(hooks));
    control.SetClusterInfo([&] { return peer->InfoJson(); });
    spdlog::info("rank {} of {}: peer tier on", transport->rank(), transport->size());
  }

  std::string opts = "fsname=clairfs:" + data_abs + ",subtype=clairfs,default_permissions";
  if (geteuid() == 0) opts += ",allow_other";
  for (const auto& o : mount_opts) opts += "," + o;
  std::vector<std::string> fargs = {argv[0], "-o", opts};
  if (debug) fargs.push_back("-d");
  std::vector<char*> fargv;
  for (auto& a : fargs) fargv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(fargv.size()), fargv.data());
  // libfuse copies the arguments it keeps; they are freed on every way out of main.
  std::unique_ptr<fuse_args, void (*)(fuse_args*)> free_args(&args, fuse_opt_free_args);
  fuse_session* se =
      fuse_session_new(&args, &clairfs::ClairFs::Ops(), sizeof(fuse_lowlevel_ops), &fs);
  if (!se) return Fail("invalid FUSE options: " + opts);
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return Fail("cannot install signal handlers");
  }
  if (fuse_session_mount(se, mount_abs.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return Fail("cannot mount on '" + mount_abs + "' (see the message above)");
  }
  if (fuse_daemonize(foreground ? 1 : 0) != 0) {
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return Fail("cannot daemonize");
  }
  if (!foreground) {
    for (auto* ssd : ssd_tiers) {
      if (clairfs::Status s = ssd->Reopen(); !s.ok()) {
        spdlog::critical("cannot reopen the SSD tier after daemonizing: {}", s.message());
        fuse_session_unmount(se);
        fuse_remove_signal_handlers(se);
        fuse_session_destroy(se);
        return 1;
      }
    }
  }
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
  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, static_cast<unsigned>(config.fuse.threads));
  fuse_loop_cfg_set_idle_threads(loop, static_cast<unsigned>(config.fuse.threads));
  const int rc = fuse_session_loop_mt(se, loop);
  fuse_loop_cfg_destroy(loop);
  // Calls stuck on the backing store fail now, so no prefetch thread waits out their deadline.
  backing.value()->Stop();
  prefetcher.Stop();
  if (peer) peer->Stop();
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  spdlog::info("clairfs stopped");
  // MPI_Finalize waits for every rank; a dead one would keep this process forever.
  if (transport) transport->Finalize(std::chrono::seconds(10), rc == 0 ? 0 : 1);
  return rc == 0 ? 0 : 1;
}
