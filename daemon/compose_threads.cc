// The composition root's threads (daemon/compose.h): what keeps the kernel's caches of the
// dataset mount fresh (the revalidation sweep, the watch of the backing store, the stats ahead
// of the reads), wired to the adapter's notifications, the core's nodes and the prefetcher's
// plan; the peer tier wired to the prefetcher; the prefetcher. Started after any daemonizing
// fork, stopped in the order daemon/serve.cc gives.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "cache/base/log.h"
#include "daemon/compose.h"

namespace clairfs {

void DaemonParts::StartFreshness() {
  const FsOptions& options = config_.fuse;
  ClairFs& fs = *fs_;
  DatasetCore& core = fs.core();
  const bool fresh = !options.immutable;
  if (fresh) {
    Revalidator::Notify notify;
    notify.inode = [&fs](uint64_t id, bool contents) { fs.NotifyInode(id, contents); };
    notify.entry = [&fs](uint64_t parent, const std::string& name) {
      fs.NotifyEntry(parent, name);
    };
    RevalidateOptions ro;
    ro.interval =
        std::chrono::milliseconds(static_cast<int64_t>(options.revalidate_interval * 1000));
    revalidator_ = std::make_unique<Revalidator>(*backing_, core.inodes(), std::move(notify), ro,
                                                 stats_.fresh);
    revalidator_->Start();
  }
  // per_open: every open reaches the daemon, which checks the version and the caller's access.
  if (options.open_mode != OpenMode::kNone) return;
  Prefetcher& prefetcher = *prefetcher_;
  if (options.stat_ahead > 0 && (options.watch_backing || fresh)) {
    StatAhead::Hooks ah;
    ah.upcoming = [&prefetcher](const UpcomingQuery& query, UpcomingFiles* files) {
      prefetcher.Upcoming(query, files);
    };
    ah.watched = [this](const std::string& dir) { return watch_ && watch_->Watched(dir); };
    ah.quiet = [this] { return watch_ && watch_->Quiet(); };
    StatAheadOptions ao;
    ao.ahead = options.stat_ahead;
    ao.max_age = std::chrono::milliseconds(static_cast<int64_t>(options.stat_max_age * 1000));
    ao.max_reach = std::max<uint32_t>(2048, 4 * options.stat_ahead);
    ao.capacity = std::max<size_t>(32768, size_t{8} * options.stat_ahead);
    if (fresh) {
      // Every batch compared with what the kernel was given; a batch at least every max_age.
      ah.checked = [r = revalidator_.get()](
                       const std::vector<std::string>& paths, const std::vector<struct stat>& st,
                       const std::vector<Status>& status) { r->Check(paths, st, status); };
      ao.check_all = true;
      ao.idle_refresh = ao.max_age;
      // Signposts: a reader the page cache serves asks for the attributes of a few planned
      // files (DatasetCore::GetAttr calls Reached), so the stretch statted ahead follows it.
      // Attributes only: the drop waits for no page, so it is safe on StatAhead's thread.
      ah.post = [&fs, &core](const std::string& path) {
        uint64_t id = 0;
        InodeTable::Shown shown;
        if (!core.inodes().ShownByPath(path, &id, &shown) || !shown.known || shown.gone) {
          return false;  // the kernel holds no attributes of it: its use asks anyway
        }
        fs.NotifyInode(id, false);
        return true;
      };
      ah.sighted = [&prefetcher](const Signpost& post) { return prefetcher.Sighted(post); };
    }
    ahead_ = std::make_unique<StatAhead>(*backing_, std::move(ah), ao, stats_.cache.stat_ahead);
  }
  if (options.watch_backing) {
    BackingWatch::Hooks hooks;
    if (ahead_) {
      hooks.changed = [a = ahead_.get()](const std::string& path) { a->Forget(path); };
      hooks.lost = [a = ahead_.get()] { a->ForgetAll(); };
    }
    hooks.node_of = [this, &core](const std::string& path) -> uint64_t {
      struct stat st;
      uint64_t id = 0;
      InodeTable::NodeInfo info;
      if (!backing_->Lstat(path, &st).ok() ||
          !core.inodes().Keyed(st.st_dev, st.st_ino, &id, &info)) {
        return 0;
      }
      return id;
    };
    hooks.invalidate = [&fs](uint64_t id, BackingWatch::Scope scope) {
      fs.NotifyInode(id, scope == BackingWatch::Scope::kContents);
    };
    hooks.invalidate_entry = [&fs](uint64_t parent, const std::string& name) {
      fs.NotifyEntry(parent, name);
    };
    auto w = BackingWatch::Start(*backing_, std::move(hooks), InodeTable::kRootId, stats_.watch);
    if (w.ok()) {
      watch_ = std::move(w.value());
    } else {
      LogWarn(
          "cannot watch the dataset for changes ({}): the kernel notices this node's changes "
          "only {}",
          w.status().message(),
          fresh ? "within the revalidation bounds (fuse.revalidate_interval, stat_max_age)"
                : "after fuse.attr_timeout / entry_timeout");
      if (!fresh) ahead_.reset();  // nothing would vouch for its stats, nothing compares them
    }
  }
  std::function<void(uint64_t, const std::string&)> dir_seen;
  if (watch_) {
    dir_seen = [w = watch_.get()](uint64_t id, const std::string& path) { w->Watch(id, path); };
  }
  core.SetWatchers(ahead_.get(), std::move(dir_seen));
  if (ahead_) {
    prefetcher.SetConsumeHook([a = ahead_.get()] { a->Consumed(); });
    ahead_->Start();
  }
}

void DaemonParts::StartBatch() {
  if (!config_.batch.enabled) return;
  BatchReader::Parts parts;
  parts.backing = backing_.get();
  parts.prefetcher = prefetcher_.get();
  parts.stats = &stats_.cache;
  parts.fs_stats = &stats_.fs;
  parts.batch_stats = &stats_.batch;
  parts.ahead = ahead_.get();
  if (watch_) {
    parts.dir_seen = [w = watch_.get()](const std::string& dir) { w->WatchPath(dir); };
  }
  batch_reader_ = std::make_unique<BatchReader>(
      parts, OwnCredentials(), geteuid() == 0 && CanSwitchIdentity(), allow_other_);
  Registrar* registrar = registrar_.get();
  batch_ = std::make_unique<BatchServer>(*batch_reader_, config_.batch, stats_.batch,
                                         [registrar] { registrar->AwaitReleases(); });
  if (Status s = batch_->Start(batch_path_, allow_other_); !s.ok()) {
    LogWarn("the batch path is off: {}", s.message());
    batch_.reset();
    batch_reader_.reset();
    return;
  }
  control_fs_->SetBatchPath(batch_path_);
  LogInfo("batch path at {}", batch_path_);
}

void DaemonParts::StopBatch() {
  if (!batch_) return;
  control_fs_->SetBatchPath("");
  batch_->Stop();
}

void DaemonParts::StartThreads() {
  StartFreshness();
  StartBatch();
  Prefetcher& prefetcher = *prefetcher_;
  if (peer_) {
    peer_->Start(
        [&prefetcher](const std::string& key, const FileVersion& version) {
          return prefetcher.GetLocal(key, version);
        },
        [&prefetcher] { prefetcher.Replan(); },
        [&prefetcher](const std::string& key, BlobPtr blob) {
          prefetcher.Adopt(key, std::move(blob));
        },
        [&prefetcher](const std::string& key, const FileVersion& version) {
          return prefetcher.FetchForPeer(key, version);
        });
  }
  prefetcher.Start();
}

void DaemonParts::StopFreshness() {
  if (ahead_) ahead_->Stop();
  if (watch_) watch_->Stop();
  if (revalidator_) revalidator_->Stop();
}

void DaemonParts::StopThreads(const std::function<void(const char*)>& stage) {
  stage("stopping the prefetch threads");
  prefetcher_->Stop();
  if (peer_) {
    stage("stopping the peer tier");
    peer_->Stop();
  }
}

}  // namespace clairfs
