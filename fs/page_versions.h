// PageVersions: which version of a file the kernel's page cache may hold, in no-open mode
// (fuse.open_mode: none), so that no read() returns pages of two versions.
//
// In that mode the kernel keeps a file's pages across opens and sends a READ only for the
// pages it lacks; one read() may copy some pages it holds and get the others from READs. If
// the file was rewritten in between, the pages held are of the old version and the READs would
// bring the new one: a mix that no version held. The daemon cannot see which pages the kernel
// holds, only what it served and when it made the kernel drop them, so it keeps per node:
//  - the version of the pages served since the last drop (`pages`), and when the last was;
//  - the drops of all the node's pages (fuse_lowlevel_notify_inval_inode from offset 0):
//    one that begins after the last page of `pages` was served removes them all (the
//    kernel waits for pages still locked by their READ before it drops them).
// A READ of another version than `pages` is served only once such a drop has completed and
// `grace` has passed since: a read() that held old pages when they were dropped copies them
// and asks for the next ones within microseconds; it must not get new pages after old ones.
// Until then the READ is refused (the caller answers ESTALE: the read() returns the old pages
// it copied, or the error) and the caller starts a drop if none that clears the old pages is
// under way. Those refusals only happen when a file changes between two reads of it that
// reach the daemon less than `grace` apart (or with old pages never dropped).
//
// Sequence numbers order serves and drops; times are the caller's (steady clock, ns), so the
// rules are tested without waiting. Thread-safe; mu_ is a leaf.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "cache/object.h"

namespace clairfs {

class PageVersions {
 public:
  explicit PageVersions(int64_t grace_ns) : grace_ns_(grace_ns) {}

  enum class Verdict {
    kServe,       // the READ may be answered with bytes of that version
    kRefuse,      // it must not; a drop of the node's pages is under way or done
    kRefuseDrop,  // it must not, and the caller must drop the node's pages (Drop*)
  };
  // A READ of node is about to be answered with bytes of version v, at time now_ns.
  Verdict Serve(uint64_t node, const FileVersion& v, int64_t now_ns);
  // A drop of every page of node begins; returns its ticket for DropDone.
  uint64_t DropBegin(uint64_t node);
  // The drop with that ticket has completed (the notification returned) at now_ns.
  void DropDone(uint64_t node, uint64_t ticket, int64_t now_ns);
  // The kernel forgot node: its pages are gone.
  void Forget(uint64_t node);
  size_t size() const;

 private:
  struct Node {
    FileVersion pages;          // the version of the pages served since the last drop
    uint64_t served = 0;        // sequence number of the last page of `pages` served
    uint64_t drop_begun = 0;    // the latest drop begun
    int64_t cleared_ns = -1;    // when a drop begun after `served` completed; -1: none yet
  };
  const int64_t grace_ns_;
  mutable std::mutex mu_;  // leaf lock
  uint64_t seq_ = 0;
  std::unordered_map<uint64_t, Node> nodes_;
};

}  // namespace clairfs
