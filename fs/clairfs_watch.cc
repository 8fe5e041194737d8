// ClairFs's watch of the backing store and the stats ahead of the reads it vouches for
// (fs/backing_watch.h, cache/stat_ahead.h): how they are wired to the kernel's caches, the
// prefetcher and each other.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "fs/clairfs_fs.h"

namespace clairfs {

void ClairFs::StartWatch() {
  // per_open: every open reaches the daemon, which checks the version and the caller's access.
  if (!options_.watch_backing || options_.open_mode != OpenMode::kNone) return;
  if (options_.stat_ahead > 0) {
    StatAhead::Hooks ah;
    ah.upcoming = [this](uint32_t n, std::vector<std::string>* paths) {
      prefetcher_.Upcoming(n, paths);
    };
    ah.watched = [this](const std::string& dir) { return watch_ && watch_->Watched(dir); };
    ah.quiet = [this] { return watch_ && watch_->Quiet(); };
    StatAheadOptions ao;
    ao.ahead = options_.stat_ahead;
    ao.max_age = std::chrono::milliseconds(static_cast<int64_t>(options_.stat_max_age * 1000));
    ao.capacity = std::max<size_t>(4096, size_t{8} * options_.stat_ahead);
    ahead_ = std::make_unique<StatAhead>(backing_, std::move(ah), ao, stats_.stat_ahead);
  }
  BackingWatch::Hooks hooks;
  if (ahead_) {
    hooks.changed = [a = ahead_.get()](const std::string& path) { a->Forget(path); };
    hooks.lost = [a = ahead_.get()] { a->ForgetAll(); };
  }
  hooks.node_of = [this](const std::string& path) -> uint64_t {
    struct stat st;
    uint64_t id = 0;
    InodeTable::NodeInfo info;
    if (!backing_.Lstat(path, &st).ok() || !inodes_.Keyed(st.st_dev, st.st_ino, &id, &info)) {
      return 0;
    }
    return id;
  };
  hooks.invalidate = [this](uint64_t id, BackingWatch::Scope scope) {
    if (scope == BackingWatch::Scope::kContents) return DropPages(id);  // recorded
    fuse_session* se = session_.load(std::memory_order_acquire);
    if (!se) return;
    // Attributes only (offset -1), or with every page of the file (offset 0, length 0). The
    // kernel forgets the node's cached ACLs with its attributes.
    const off_t off = scope == BackingWatch::Scope::kContents ? 0 : -1;
    const int rc = fuse_lowlevel_notify_inval_inode(se, id, off, 0);
    if (rc != 0 && rc != -ENOENT) {
      spdlog::debug("invalidation of node {}: {}", id, std::strerror(-rc));
    }
  };
  hooks.invalidate_entry = [this](uint64_t parent, const std::string& name) {
    fuse_session* se = session_.load(std::memory_order_acquire);
    if (!se) return;
    const int rc = fuse_lowlevel_notify_inval_entry(se, parent, name.c_str(), name.size());
    if (rc != 0 && rc != -ENOENT) {
      spdlog::debug("invalidation of '{}' in node {}: {}", name, parent, std::strerror(-rc));
    }
  };
  auto w = BackingWatch::Start(backing_, std::move(hooks), FUSE_ROOT_ID, stats_.watch);
  if (!w.ok()) {
    spdlog::warn(
        "cannot watch the dataset for changes ({}): the kernel notices them only "
        "after fuse.attr_timeout / entry_timeout",
        w.status().message());
    ahead_.reset();
    return;
  }
  watch_ = std::move(w.value());
  if (ahead_) {
    prefetcher_.SetConsumeHook([a = ahead_.get()] { a->Consumed(); });
    ahead_->Start();
  }
}

void ClairFs::StopWatch() {
  if (ahead_) ahead_->Stop();
  if (watch_) watch_->Stop();
}

}  // namespace clairfs
