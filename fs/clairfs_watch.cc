// ClairFs's watch of the backing store, the stats ahead of the reads it vouches for and the
// revalidation of what the kernel caches (fs/backing_watch.h, cache/backing/stat_ahead.h,
// fs/revalidate.h): how they are wired to the kernel's caches, the prefetcher and each other.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "fs/clairfs_fs.h"

namespace clairfs {

void ClairFs::NotifyInode(uint64_t id, bool contents) {
  // Pages go through the core, which records the drop (fs/core/page_versions.h), so that the
  // next READ of the new version is served at once instead of refused once.
  if (contents) return core_.DropPages(id);
  fuse_session* se = session_.load(std::memory_order_acquire);
  if (!se) return;
  // Attributes only (offset -1). The kernel forgets the node's cached ACLs with them.
  const int rc = fuse_lowlevel_notify_inval_inode(se, id, -1, 0);
  if (rc != 0 && rc != -ENOENT) {
    spdlog::debug("invalidation of node {}: {}", id, std::strerror(-rc));
  }
}

void ClairFs::NotifyEntry(uint64_t parent, const std::string& name) {
  fuse_session* se = session_.load(std::memory_order_acquire);
  if (!se) return;
  const int rc = fuse_lowlevel_notify_inval_entry(se, parent, name.c_str(), name.size());
  if (rc != 0 && rc != -ENOENT) {
    spdlog::debug("invalidation of '{}' in node {}: {}", name, parent, std::strerror(-rc));
  }
}

void ClairFs::StartWatch() {
  const bool fresh = !options_.immutable;
  if (fresh) {
    Revalidator::Notify notify;
    notify.inode = [this](uint64_t id, bool contents) { NotifyInode(id, contents); };
    notify.entry = [this](uint64_t parent, const std::string& name) { NotifyEntry(parent, name); };
    RevalidateOptions ro;
    ro.interval =
        std::chrono::milliseconds(static_cast<int64_t>(options_.revalidate_interval * 1000));
    revalidator_ = std::make_unique<Revalidator>(backing_, core_.inodes(), std::move(notify), ro,
                                                 stats_.fresh);
    revalidator_->Start();
  }
  // per_open: every open reaches the daemon, which checks the version and the caller's access.
  if (options_.open_mode != OpenMode::kNone) return;
  if (options_.stat_ahead > 0 && (options_.watch_backing || fresh)) {
    StatAhead::Hooks ah;
    ah.upcoming = [this](uint32_t n, std::vector<std::string>* paths,
                         std::vector<Signpost>* posts) { prefetcher_.Upcoming(n, paths, posts); };
    ah.watched = [this](const std::string& dir) { return watch_ && watch_->Watched(dir); };
    ah.quiet = [this] { return watch_ && watch_->Quiet(); };
    StatAheadOptions ao;
    ao.ahead = options_.stat_ahead;
    ao.max_age = std::chrono::milliseconds(static_cast<int64_t>(options_.stat_max_age * 1000));
    ao.capacity = std::max<size_t>(4096, size_t{8} * options_.stat_ahead);
    if (fresh) {
      // Every batch compared with what the kernel was given; a batch at least every max_age.
      ah.checked = [r = revalidator_.get()](
                       const std::vector<std::string>& paths, const std::vector<struct stat>& st,
                       const std::vector<Status>& status) { r->Check(paths, st, status); };
      ao.check_all = true;
      ao.idle_refresh = ao.max_age;
      // Signposts: a reader the page cache serves asks for the attributes of a few planned
      // files (GetAttr calls Reached), so the stretch statted ahead follows it. Attributes
      // only: the drop waits for no page, so it is safe on StatAhead's thread.
      ah.post = [this](const std::string& path) {
        uint64_t id = 0;
        InodeTable::Shown shown;
        if (!core_.inodes().ByPath(path, &id) || !core_.inodes().ShownOf(id, &shown) ||
            !shown.known || shown.gone) {
          return false;  // the kernel holds no attributes of it: its use asks anyway
        }
        NotifyInode(id, false);
        return true;
      };
      ah.sighted = [this](const Signpost& post) { return prefetcher_.Sighted(post); };
    }
    ahead_ = std::make_unique<StatAhead>(backing_, std::move(ah), ao, stats_.stat_ahead);
  }
  if (options_.watch_backing) {
    BackingWatch::Hooks hooks;
    if (ahead_) {
      hooks.changed = [a = ahead_.get()](const std::string& path) { a->Forget(path); };
      hooks.lost = [a = ahead_.get()] { a->ForgetAll(); };
    }
    hooks.node_of = [this](const std::string& path) -> uint64_t {
      struct stat st;
      uint64_t id = 0;
      InodeTable::NodeInfo info;
      if (!backing_.Lstat(path, &st).ok() ||
          !core_.inodes().Keyed(st.st_dev, st.st_ino, &id, &info)) {
        return 0;
      }
      return id;
    };
    hooks.invalidate = [this](uint64_t id, BackingWatch::Scope scope) {
      NotifyInode(id, scope == BackingWatch::Scope::kContents);
    };
    hooks.invalidate_entry = [this](uint64_t parent, const std::string& name) {
      NotifyEntry(parent, name);
    };
    auto w = BackingWatch::Start(backing_, std::move(hooks), FUSE_ROOT_ID, stats_.watch);
    if (w.ok()) {
      watch_ = std::move(w.value());
    } else {
      spdlog::warn(
          "cannot watch the dataset for changes ({}): the kernel notices this node's changes "
          "only {}",
          w.status().message(),
          fresh ? "within the revalidation bounds (fuse.revalidate_interval, stat_max_age)"
                : "after fuse.attr_timeout / entry_timeout");
      if (!fresh) ahead_.reset();  // nothing would vouch for its stats, nothing compares them
    }
  }
  std::function<void(uint64_t, const std::string&)> dir_seen;
  if (watch_)
    dir_seen = [w = watch_.get()](uint64_t id, const std::string& path) { w->Watch(id, path); };
  core_.SetWatchers(ahead_.get(), std::move(dir_seen));
  if (ahead_) {
    prefetcher_.SetConsumeHook([a = ahead_.get()] { a->Consumed(); });
    ahead_->Start();
  }
}

void ClairFs::StopWatch() {
  if (ahead_) ahead_->Stop();
  if (watch_) watch_->Stop();
  if (revalidator_) revalidator_->Stop();
}

}  // namespace clairfs
