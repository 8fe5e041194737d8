// PagePush (fuse.push_pages, an experiment; docs/benchmarks.md, "Pushing staged pages"): in
// no-open mode (fs/node_reads.h), pushes the bytes of the files the plan reads next into the
// kernel's page cache (fuse_lowlevel_notify_store), so that a read of them makes no round trip
// to the daemon even when their pages were evicted since the last epoch.
//
// Contract:
// - One thread of its own walks Prefetcher::NextUpcoming (the objects after each stream's
//   furthest consumed position, held by a local tier or landed in the staging window): at most
//   kAhead positions ahead, at most kBatch blobs held at once (the bounded queue). It never
//   runs in a request handler and holds no lock while it notifies the kernel.
// - Only a node the kernel knows is pushed to: the inode table has a node for the file's path
//   and (dev, ino), and the kernel still holds its inode (else notify_store answers -ENOENT:
//   counted in push.unknown, nothing logged). Nodes are never created for it.
// - Only the version a READ would serve is pushed: the backing file is stat'ed first and its
//   version must equal the blob's; the kernel's attributes (reported) must be of that version
//   (its cached size bounds what a read sees), and the pages the kernel may hold (opened) of
//   that version or none. After the push the node records the version as opened
//   (InodeTable::MarkPushed), so a later READ that binds another version drops the pages
//   (ClairFs::ReadNode); if a READ bound another version during the push, the pushed pages are
//   dropped here (notify_inval_inode). Between the push and such a READ, a file changed under
//   its name is served from the page cache at the pushed version, as any cached page is.
// - Failures are counted (Stats::push) and logged rate-limited, never fatal.
// - The pushes are not reads: nothing is consumed. A read the page cache answers does not reach
//   the daemon, so consumption moves only by the reads that miss it (give-up, page_cache_lag).
//
// Lifetime: construct, Start() once the session is mounted, Stop() before the session is
// destroyed (idempotent; also from the destructor). Thread-safe.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "cache/backing.h"
#include "cache/log_limit.h"
#include "cache/prefetcher.h"
#include "cache/stats.h"
#include "fs/inode_table.h"

namespace clairfs {

class PagePush {
 public:
  static constexpr uint32_t kAhead = 1024;  // positions past the furthest read walked
  // Positions right after the furthest read that are not pushed (the readers take them before
  // a push would land). Experiment knob: the environment variable CLAIRFS_PUSH_GAP.
  static constexpr uint32_t kDefaultGap = 0;
  static constexpr size_t kBatch = 64;      // blobs held at once by the pushing thread
  // How long the thread sleeps when it found nothing to push (it polls the prefetcher).
  static constexpr std::chrono::milliseconds kIdle{2};

  // All references must outlive this object. session: the session to notify (null: nothing
  // is pushed).
  PagePush(PosixBacking& backing, Prefetcher& prefetcher, InodeTable& inodes, Stats& stats,
           std::function<fuse_session*()> session);
  ~PagePush() { Stop(); }
  PagePush(const PagePush&) = delete;
  PagePush& operator=(const PagePush&) = delete;

  void Start();
  void Stop();

 private:
  void Loop();
  // Pushes one upcoming file, checked as the contract says.
  void Push(const Prefetcher::Upcoming& u, fuse_session* se);

  PosixBacking& backing_;
  Prefetcher& prefetcher_;
  InodeTable& inodes_;
  Stats& stats_;
  const std::function<fuse_session*()> session_;
  uint32_t gap_ = kDefaultGap;
  LogLimit fail_log_;
  // Lock order: mu_ is a leaf (never held while calling the prefetcher, the inode table, the
  // store or the kernel).
  std::mutex mu_;
  std::condition_variable cv_;  // stop
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace clairfs
