#include "daemon/compose.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "cache/base/log.h"
#include "cache/tiers/ram_tier.h"
#include "conf/memory_budget.h"
#include "daemon/daemon_log.h"
#include "daemon/stop_signals.h"

namespace clairfs {
namespace {

// Whether the comma-separated FUSE options hold `name` as a whole option.
bool HasOption(const std::string& options, std::string_view name) {
  for (size_t at = 0; at <= options.size();) {
    const size_t end = std::min(options.find(',', at), options.size());
    if (std::string_view(options).substr(at, end - at) == name) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace

std::unique_ptr<DaemonParts> DaemonParts::Build(Start& start, const CommandLine& cl,
                                                int* exit_code) {
  const auto fail = [&](ExitCode code, const std::string& message) {
    *exit_code = Fail(code, message);
    return nullptr;
  };
  std::unique_ptr<DaemonParts> d(new DaemonParts());
  d->config_ = start.config;
  Config& config = d->config_;
  const std::string& config_path = start.config_path;
  const std::string& data_abs = start.dataset;
  const std::string& mount_abs = start.mount;
  const bool foreground = cl.foreground;
  cluster::MpiTransport* transport = start.transport.get();

  // The dataset stays reachable through this descriptor after the mount hides its path.
  // A dead dataset file system remounted at its path is read again, unless that path leads
  // through this very mount (mounted over the dataset, or above it).
  const bool beneath_mount =
      data_abs == mount_abs || data_abs.rfind(mount_abs == "/" ? "/" : mount_abs + "/", 0) == 0;
  auto backing = PosixBacking::Open(
      data_abs, config.cache.io, &d->stats_.cache,
      beneath_mount ? PosixBacking::OnDisconnect::kKeep : PosixBacking::OnDisconnect::kReopen);
  if (!backing.ok()) return fail(ExitCode::kNoInput, backing.status().message());
  d->backing_ = std::move(backing.value());

  MemoryFit memory_fit;  // the capacities against the memory limit, logged below
  if (auto s =
          ResolveForDataset(&config, data_abs, transport ? transport->rank() : -1, &memory_fit);
      !s.ok()) {
    return fail(ExitCode::kConfig, (config_path.empty() ? "" : config_path + ": ") + s.message());
  }
  if (auto s = SetUpLogging(config.log, foreground); !s.ok()) {
    return fail(ExitCode::kConfig, (config_path.empty() ? "" : config_path + ": ") + s.message());
  }
  LogInfo("configuration: {}", config_path.empty() ? "built-in defaults" : config_path);
  for (const auto& o : cl.overrides) LogInfo("configuration: -o {}={}", o.key, o.value);
  for (const auto& note : cl.notes) LogWarn("{}", note);
  LogInfo("{}", memory_fit.summary);
  for (const auto& w : memory_fit.warnings) LogWarn("{}", w);

  PrefetchOptions popts = config.cache.prefetch;  // tier_threads from the tiers
  for (const auto& t : config.cache.tiers) {
    if (t.kind == "ssd") {
      // A daemon opens RocksDB only after the fork (see SsdTier::Prepare).
      ThreadsWithoutStopSignals guard;  // RocksDB's
      SsdOptions ssd_opts;
      ssd_opts.dataset = data_abs;  // recorded in the directory's description (cache_info.h)
      auto ssd = foreground ? SsdTier::Open(t.kind, t.dir, t.capacity, ssd_opts)
                            : SsdTier::Prepare(t.kind, t.dir, t.capacity, ssd_opts);
      if (!ssd.ok()) {
        // Another daemon holds the directory's lock (cache/tiers/ssd_dir.h): worth a retry later.
        const bool locked = ssd.status().code() == Code::kLocked;
        return fail(locked ? ExitCode::kCacheLocked : ExitCode::kConfig, ssd.status().message());
      }
      LogInfo("ssd tier in {}: {} objects, {} of {} bytes", t.dir, ssd.value()->objects(),
              ssd.value()->used_bytes(), t.capacity);
      d->ssd_tiers_.push_back(ssd.value().get());
      d->tiers_.push_back(std::move(ssd.value()));
    } else {
      d->tiers_.push_back(std::make_unique<RamTier>(t.kind, t.capacity));
    }
    d->tier_ptrs_.push_back(d->tiers_.back().get());
    popts.tier_threads.push_back(t.threads);
  }
  // fuse.open_mode none: a read the page cache answered is never seen, so positions are also
  // given up page_cache_lag reads behind.
  if (config.fuse.open_mode == OpenMode::kNone) {
    popts.consumption_lag = std::min(popts.consumption_lag, config.cache.page_cache_lag);
  }
  d->prefetcher_ =
      std::make_unique<Prefetcher>(*d->backing_, d->tier_ptrs_, popts, &d->stats_.cache);
  std::vector<std::string> aliases = {data_abs};
  if (mount_abs != data_abs) aliases.push_back(mount_abs);
  d->registrar_ =
      std::make_unique<Registrar>(*d->backing_, *d->prefetcher_, d->stats_.cache, aliases);
  d->views_ = std::make_unique<ControlViews>(*d->registrar_, *d->prefetcher_, d->stats_);
  d->access_ = std::make_unique<AccessPolicy>(*d->backing_, config.fuse, d->stats_.fs);
  d->fs_ =
      std::make_unique<ClairFs>(*d->backing_, *d->prefetcher_, *d->registrar_, *d->access_,
                                d->stats_.cache, d->stats_.fs, config.fuse, aliases, start.control);
  d->control_fs_ =
      std::make_unique<ControlFs>(*d->registrar_, *d->views_, *d->access_, config.fuse);
  // The batch path's socket sits beside the control mount (docs/batch-path.md); who may reach
  // it is who may reach the mount: other users only through an allow_other mount.
  d->batch_path_ = start.control + ".batch";
  d->allow_other_ = geteuid() == 0 || HasOption(cl.fuse_options, "allow_other");
  if (transport) {
    DaemonParts* p = d.get();
    start.sealed->CountRefusedIn(&p->stats_.cluster.peer_refused);
    p->peer_ = std::make_unique<cluster::ClusterNode>(*start.sealed, config.cluster.peer,
                                                      &p->stats_.cluster);
    p->prefetcher_->SetCluster(p->peer_->Hooks(config.cluster.backing_advantage));
    p->views_->SetClusterInfo([p] { return p->peer_->InfoJson(); });
    // Every node's report in stats (control/cluster_view.h); this node's is filled from the
    // views' counters, for the others and for its own row alike.
    p->peer_->SetReportSource([p](cluster::NodeReport* r) { p->views_->FillReport(r); });
    p->views_->SetClusterReports(
        [p] { return p->peer_->ClusterReports(); },
        {p->peer_->report_period(),
         cluster::ReportStaleAfter(config.cluster.peer, transport->size())});
    LogInfo("rank {} of {}: peer tier on", transport->rank(), transport->size());
  }
  return d;
}

Status DaemonParts::ReopenSsdTiers() {
  ThreadsWithoutStopSignals guard;  // RocksDB's
  for (auto* ssd : ssd_tiers_) {
    if (Status s = ssd->Reopen(); !s.ok()) return s;
  }
  return Status::Ok();
}

void DaemonParts::CloseSsdTiers() {
  for (auto* ssd : ssd_tiers_) ssd->Close();
}

}  // namespace clairfs
