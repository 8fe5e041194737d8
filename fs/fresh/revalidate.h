// Revalidator: makes the kernel forget what it caches of a dataset object that changed where
// no watch sees it (another node of a network or parallel file system, a tool writing the
// store directly), within a documented bound, while the kernel keeps names, attributes and
// pages for entry_timeout / attr_timeout (long, so that warm reads stay at page-cache speed).
//
// What the kernel was given of each node it holds is in the InodeTable (InodeTable::Shown: the
// version of the last lookup, getattr or open reply, the mode and owner). A fresh stat of the
// node's own path is compared with it (Compare):
//  - the path names nothing, or another object (deleted, renamed over, replaced): the kernel's
//    entry for the name is dropped (in the parent's node), so the next open looks it up again
//    and gets ENOENT or the new object; the node is marked gone (not told twice);
//  - another version (size, mtime, ctime, inode): its attributes, cached ACLs and pages (a
//    directory: its cached listing). ctime covers a chmod, chown or ACL change and a rewrite
//    that kept size and mtime;
//  - the same version but another mode or owner (a file system without ctime): attributes.
// What was told is recorded (InodeTable::Revalidated) so that a change is told once; the
// kernel's next reply records what it is given. A stat that fails without an answer (a
// deadline, a dead store: StoreUnreachable) or with another error changes nothing (counted in
// fresh.failed, logged once per episode).
//
// Stats come from two places:
//  - Check(): the stats made ahead of the plan's next reads (cache/backing/stat_ahead.h), so that a
//    planned read sees a change made elsewhere before it (the bound is StatAhead's refresh);
//  - the sweep (a thread of its own, Start): rounds over every node the kernel holds (the
//    root and directories included), each spread evenly over 0.45 x `interval` in batches of
//    `batch` paths (one Backing::LstatMany call each, with the store's deadline), back to
//    back. A node held through two rounds is statted at least once in any 0.9 x interval, so
//    a change is seen within `interval` plus one batch's time. Each node costs one stat per
//    round: about 2 / interval stats per second per node held.
// An invalidation only makes the kernel ask the daemon again: a spurious one costs a round trip.
//
// Thread-safe. Lock order: mu_ is a leaf; the table's lock is taken and released inside its
// own calls; the store and the notifications are called holding neither.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/backing/backing.h"
#include "fs/core/inode_table.h"
#include "fs/fresh/fresh_stats.h"

namespace clairfs {

struct RevalidateOptions {
  std::chrono::milliseconds interval{60'000};  // fuse.revalidate_interval
  bool sweep = true;                           // the sweep's thread runs (Start)
  size_t batch = 128;                          // paths per store call of the sweep
};

class Revalidator {
 public:
  // How the kernel is told; called on the caller's thread (the sweep's, StatAhead's), never
  // under a lock of this class. Thread-safe.
  struct Notify {
    // Drop node id's attributes and cached ACLs, with every page (contents) or without.
    std::function<void(uint64_t id, bool contents)> inode;
    // Drop the kernel's entry for name in directory node parent.
    std::function<void(uint64_t parent, const std::string& name)> entry;
  };
  enum class Change {
    kNone,        // as shown, or nothing known
    kAttributes,  // mode or owner
    kContents,    // another version: attributes and pages (a directory: its listing)
    kGone,        // the path names nothing or another object
    kUnanswered,  // the stat failed: nothing learned
  };

  // backing, inodes and counters must outlive this.
  Revalidator(const Backing& backing, InodeTable& inodes, Notify notify, RevalidateOptions options,
              FreshStats& counters);
  ~Revalidator();  // Stop()
  Revalidator(const Revalidator&) = delete;
  Revalidator& operator=(const Revalidator&) = delete;

  // Starts the sweep's thread (if options.sweep); after any daemonizing fork.
  void Start();
  // Ends it; returns within the store deadline of a batch. Idempotent.
  void Stop();

  // Stats of the files the plan reads next (paths dataset relative, as StatAhead made them):
  // each compared with the node the kernel holds for its path, if any.
  void Check(const std::vector<std::string>& paths, const std::vector<struct stat>& st,
             const std::vector<Status>& status);
  // One whole round now, on the calling thread, unspread (tests, and the thread's rounds).
  void SweepOnce() { Sweep(nullptr); }

  // What a stat of the node's path (status s, st) shows against what the kernel was given.
  // root: the dataset root (never another object).
  static Change Compare(const InodeTable::Shown& shown, bool root, const Status& s,
                        const struct stat& st);

 private:
  using Clock = std::chrono::steady_clock;
  void Loop();
  // A round over the nodes held now; with a start time, batches are spread over the round's
  // span from it. False if stopped meanwhile.
  bool Sweep(const Clock::time_point* start);
  void SweepBatch(const std::vector<uint64_t>& ids, size_t from, size_t to);
  void Apply(uint64_t id, const InodeTable::Shown& shown, Change change, const Status& s,
             const struct stat& st);
  // Sleeps until t; false if stopped first.
  bool WaitUntil(Clock::time_point t);

  const Backing& backing_;
  InodeTable& inodes_;
  const Notify notify_;
  const RevalidateOptions options_;
  FreshStats& counters_;
  std::atomic<bool> failing_logged_{false};  // this episode of failing stats was logged

  // Lock order: a leaf. Guards stop_ and the thread's start.
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace clairfs
