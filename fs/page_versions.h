// PageVersions: which version of a file the kernel's page cache may hold, in no-open mode
// (fuse.open_mode: none), so that no read() returns pages of two versions.
//
// In that mode the kernel keeps a file's pages across opens and sends a READ only for the
// pages it lacks; one read() may copy some pages it holds and get the others from READs. If
// the file was rewritten in between, the pages held are of the old version and the READs would
// bring the new one: a mix that no version held. The daemon cannot see which pages the kernel
// holds, only what it served and when it made the kernel drop them, so it keeps per node:
//  - the version of the pages served since the last drop (`pages`);
//  - drops of the node's pages (fuse_lowlevel_notify_inval_inode): one that begins after the
//    last page of `pages` was served removes them all (the kernel waits for pages still
//    locked by their READ before it drops them) once it completes ("cleared");
//  - the threads (the requests' pid) whose read() began after the pages switched version:
//    those whose READ is at offset 0 (a read() gets a file's pages in order: one that asks
//    for the first page copied none of it before). (A read() also asks for the attributes
//    at its start once a drop invalidated them, but counting those threads let mixes
//    through in tests/fs/test_rewrite.py: not used.)
// Rules, for a READ of version v by thread pid:
//  - of the version of `pages` (or none held): served, except during `grace` after the pages
//    switched version to a thread not known to have begun its read() after the switch: a
//    read() that held old pages when they were dropped copies them and asks for the next
//    ones within microseconds, and must not get new pages after old ones;
//  - of another version: served once the old pages were cleared, to a READ at offset 0 or
//    after `grace`; a READ at offset 0 whose old pages are not cleared yet is
//    served after the caller dropped every page but its own (kDropOthers); otherwise refused
//    (the caller answers ESTALE: the read() returns the old pages it copied, or the error),
//    and the caller starts a drop if none is under way (kRefuseDrop).
// Sequence numbers order serves and drops; times are the caller's (steady clock, ns), so the
// rules are tested without waiting. Thread-safe; mu_ is a leaf.
#pragma once

#include <array>
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
    kDropOthers,  // first drop every page but this READ's, then ask again
    kRefuse,      // it must not be; a drop of the node's pages is under way or done
    kRefuseDrop,  // it must not be, and the caller must drop the node's pages (Drop*)
  };
  // A READ by thread pid of node at offset 0 (start) or not is about to be answered with
  // bytes of version v, at time now_ns.
  Verdict Serve(uint64_t node, const FileVersion& v, uint32_t pid, bool start, int64_t now_ns);
  // A drop of pages of node begins (all of them, or all but those of one READ being
  // answered); returns its ticket for DropDone.
  uint64_t DropBegin(uint64_t node);
  // The drop with that ticket has completed (the notification returned) at now_ns.
  void DropDone(uint64_t node, uint64_t ticket, int64_t now_ns);
  // The kernel forgot node: its pages are gone.
  void Forget(uint64_t node);
  size_t size() const;

 private:
  static constexpr size_t kFresh = 16;
  struct Node {
    FileVersion pages;          // the version of the pages served since the last drop
    uint64_t served = 0;        // sequence number of the last page of `pages` served
    uint64_t drop_begun = 0;    // the latest drop begun
    int64_t cleared_ns = -1;    // when a drop begun after `served` completed; -1: none yet
    int64_t switched_ns = -1;   // when the pages of the version before `pages` were cleared
    std::array<uint32_t, kFresh> fresh{};  // threads that began a read() after that
    size_t nfresh = 0;          // entries of fresh used (a ring once full)
    bool IsFresh(uint32_t pid) const;
    void AddFresh(uint32_t pid);
  };
  void Cleared(Node& n, uint64_t ticket, int64_t now_ns);
  const int64_t grace_ns_;
  mutable std::mutex mu_;  // leaf lock
  uint64_t seq_ = 0;
  std::unordered_map<uint64_t, Node> nodes_;
};

}  // namespace clairfs
