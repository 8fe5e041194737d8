#include "fs/page_push.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>

namespace clairfs {

PagePush::PagePush(PosixBacking& backing, Prefetcher& prefetcher, InodeTable& inodes,
                   Stats& stats, std::function<fuse_session*()> session)
    : backing_(backing),
      prefetcher_(prefetcher),
      inodes_(inodes),
      stats_(stats),
      session_(std::move(session)) {
  if (const char* g = std::getenv("CLAIRFS_PUSH_GAP")) gap_ = static_cast<uint32_t>(std::atoi(g));
}

void PagePush::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Loop(); });
}

void PagePush::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PagePush::Loop() {
  Prefetcher::UpcomingCursor cursor;
  for (;;) {
    std::vector<Prefetcher::Upcoming> batch;
    if (fuse_session* se = session_()) {
      batch = prefetcher_.NextUpcoming(&cursor, gap_, kAhead, kBatch);
      for (const auto& u : batch) {
        {
          std::lock_guard lock(mu_);
          if (stop_) return;
        }
        Push(u, se);
      }
    }
    std::unique_lock lock(mu_);
    if (stop_) return;
    if (batch.empty()) cv_.wait_for(lock, kIdle, [&] { return stop_; });
  }
}

void PagePush::Push(const Prefetcher::Upcoming& u, fuse_session* se) {
  const Blob& blob = *u.blob;
  if (blob.size() == 0) return;
  struct stat st;
  if (!backing_.Lstat(u.path, &st).ok() || !S_ISREG(st.st_mode) ||
      VersionOf(st) != blob.version()) {
    stats_.push.skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t id = 0;
  InodeTable::NodeInfo node;
  if (!inodes_.Keyed(st.st_dev, st.st_ino, &id, &node) || node.path != u.path || !node.Names(st)) {
    stats_.push.unknown.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const InodeTable::Seen seen = inodes_.SeenOf(id);
  if (seen.reported != blob.version() ||
      (seen.opened != FileVersion{} && seen.opened != blob.version())) {
    stats_.push.skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  fuse_bufvec bufv = FUSE_BUFVEC_INIT(blob.size());
  bufv.buf[0].mem = const_cast<char*>(blob.data());
  const int rc = fuse_lowlevel_notify_store(se, id, 0, &bufv, fuse_buf_copy_flags{});
  if (rc == -ENOENT) {  // the kernel holds no inode for it: quietly not pushed
    stats_.push.unknown.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (rc != 0) {
    stats_.push.failed.fetch_add(1, std::memory_order_relaxed);
    if (uint64_t more = 0; fail_log_.Allow(&more)) {
      spdlog::warn("page push of {}: {}{}", u.path, std::strerror(-rc),
                   more ? fmt::format(" ({} more failed pushes since the last line)", more) : "");
    }
    return;
  }
  if (!inodes_.MarkPushed(id, blob.version())) {
    // A READ bound another version while the pages went in: they must not be read.
    fuse_lowlevel_notify_inval_inode(se, id, 0, 0);
    stats_.push.skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  stats_.push.pushed.fetch_add(1, std::memory_order_relaxed);
  stats_.push.bytes.fetch_add(blob.size(), std::memory_order_relaxed);
}

}  // namespace clairfs
