// clairfs: mount a dataset read-only with a clairvoyant cache (docs/usage.md).
// Order of start-up: parse options, open the dataset, construct everything, mount, daemonize,
// then start threads (fork would not carry them), serve, and tear down in reverse.
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/syslog_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cache/backing.h"
#include "cache/prefetcher.h"
#include "cache/ram_tier.h"
#include "cache/ssd_tier.h"
#include "conf/config.h"
#include "fs/clairfs_fs.h"
#include "fs/control.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "clairfs: %s\n", message.c_str());
  return 1;
}

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : std::string();
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
    if (mnt != path || dash == std::string::npos) continue;
    if (line.compare(dash + 3, 13, "fuse.clairfs ") == 0) return true;
  }
  return false;
}

// A daemon killed without unmounting leaves its mount behind: every access fails with
// ENOTCONN. If that is what sits at path, and it is clairfs's, detach it (fusermount3 -uz) so
// this daemon can mount there. Anything else is left alone and reported.
bool CleanStaleMount(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 || errno != ENOTCONN) return true;
  if (!IsClairfsMount(path)) return false;
  const std::string cmd = "fusermount3 -uz '" + path + "' 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) return false;
  std::fprintf(stderr, "clairfs: detached the stale clairfs mount at %s\n", path.c_str());
  return stat(path.c_str(), &st) == 0;
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
  CLI::App app{"clairfs: a read-only FUSE mount of a dataset that prefetches in the order the "
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
  const std::string data_abs = RealPath(dataset);
  struct stat st;
  if (data_abs.empty() || stat(data_abs.c_str(), &st) != 0) {
    return Fail("dataset '" + dataset + "': " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return Fail("dataset '" + dataset + "' is not a directory");
  if (mountpoint.empty()) mountpoint = data_abs;
  {
    char buf[PATH_MAX];
    const std::string abs = mountpoint[0] == '/' ? mountpoint
                                                 : std::string(getcwd(buf, sizeof(buf))) + "/" + mountpoint;
    if (!CleanStaleMount(abs)) {
      return Fail("mountpoint '" + mountpoint + "' is a stale mount whose daemon is gone; "
                  "run: fusermount3 -u " + mountpoint);
    }
  }
  const std::string mount_abs = RealPath(mountpoint);
  if (mount_abs.empty()) {
    return Fail("mountpoint '" + mountpoint + "': " + std::strerror(errno));
  }

  // The dataset stays reachable through this descriptor after the mount hides its path.
  auto backing = clairfs::PosixBacking::Open(data_abs);
  if (!backing.ok()) return Fail(backing.status().message());

  if (auto s = clairfs::ResolveForDataset(&config, data_abs); !s.ok()) {
    return Fail((config_path.empty() ? "" : config_path + ": ") + s.message());
  }
  SetUpLogging(config.log, foreground);
  clairfs::Stats stats;
  std::vector<std::unique_ptr<clairfs::Tier>> tiers;
  std::vector<clairfs::Tier*> tier_ptrs;
  clairfs::PrefetchOptions popts;
  for (const auto& t : config.cache.tiers) {
    if (t.kind == "ssd") {
      auto ssd = clairfs::SsdTier::Open(t.kind, t.dir, t.capacity);
      if (!ssd.ok()) return Fail(ssd.status().message());
      spdlog::info("ssd tier in {}: {} objects, {} of {} bytes", t.dir, ssd.value()->objects(),
                   ssd.value()->used_bytes(), t.capacity);
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
  popts.fetch_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(config.cache.fetch_timeout * 1000));
  popts.max_file_size = config.cache.max_file_size;
  clairfs::Prefetcher prefetcher(*backing.value(), tier_ptrs, popts, &stats);
  std::vector<std::string> aliases = {data_abs};
  if (mount_abs != data_abs) aliases.push_back(mount_abs);
  clairfs::ControlPlane control(*backing.value(), prefetcher, stats, aliases);
  clairfs::ClairFs fs(*backing.value(), prefetcher, control, stats, config.fuse, aliases);

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
  fuse_session* se = fuse_session_new(&args, &clairfs::ClairFs::Ops(),
                                      sizeof(fuse_lowlevel_ops), &fs);
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
  spdlog::info("clairfs {} serving {} at {}", CLAIRFS_VERSION, data_abs, mount_abs);
  prefetcher.Start();
  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, static_cast<unsigned>(config.fuse.threads));
  fuse_loop_cfg_set_idle_threads(loop, static_cast<unsigned>(config.fuse.threads));
  const int rc = fuse_session_loop_mt(se, loop);
  fuse_loop_cfg_destroy(loop);
  prefetcher.Stop();
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  spdlog::info("clairfs stopped");
  return rc == 0 ? 0 : 1;
}
