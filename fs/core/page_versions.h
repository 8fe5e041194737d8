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
//  - the threads (the requests' pid) whose read() began after the pages switched version
//    ("fresh": they read the first page alone after the switch);
//  - the threads that sent its latest READs, and when.
// A read() gets a file's pages in order, in batches: it looks the next batch up in the page
// cache only once it copied the last one. One that held old pages when they were dropped
// copies them and then takes the next ones from the page cache, whoever put them there: a
// READ of the new version for any range but the first page, by any thread, may hand new
// pages to such a read() right after old ones. So, for a READ of version v by thread pid:
//  - of another version than `pages`: served once the old pages were cleared and either
//    `grace` has passed since (a read() holding old pages asks for the next ones long before)
//    or the READ is of the first page alone (no read() that copied old pages needs it again);
//    that READ's thread is then fresh. A first page whose old pages are not cleared yet is
//    served after the caller dropped every page but its own (kDropOthers). Anything else is
//    refused (the caller answers ESTALE: the read() returns the old pages it copied, or the
//    error; the kernel retries a failed readahead with a READ of the first page it needs
//    alone) and the caller starts a drop if none is under way (kRefuseDrop);
//  - of the version of `pages` (or none held): served, except within `grace` of a switch,
//    when a READ past the first page alone is served only to a fresh thread, and only while
//    no thread but it that is not fresh sent a READ of the node since `grace` before the
//    switch. Such a thread may be in a read() that copied old pages, and the pages served to
//    the fresh one would go to the page cache it takes its next ones from: serving fresh
//    threads regardless let about 1 read() in 2,000 of tests/fs/test_rewrite.py mix under
//    load, every one with the later pages served to another thread during that read(). A
//    lone reader of a changed file still reads it whole at once. (READs of more than the
//    first page at offset 0 are not the first page alone.)
// What is left rests on timing: a thread that copies old pages from the page cache without
// sending a READ (all it needs is cached) and waits more than `grace` before its next batch,
// or whose READs were all sent more than `grace` before the switch, is not seen.
// (A read() also asks for the attributes at its start once a drop invalidated them, but
// counting those threads as begun after the drop let mixes through in tests/fs/
// test_rewrite.py: not used.)
// Sequence numbers order serves and drops; times are the caller's (steady clock, ns), so the
// rules are tested without waiting. Thread-safe; mu_ is a leaf.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "cache/base/object.h"

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
  // A READ by thread pid of node is about to be answered with bytes of version v, at time
  // now_ns. first_page: the READ is of the file's first page alone (offset 0, one page).
  Verdict Serve(uint64_t node, const FileVersion& v, uint32_t pid, bool first_page, int64_t now_ns);
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
  static constexpr size_t kReaders = 8;  // of more threads, the oldest go (see Saw)
  struct Node {
    FileVersion pages;         // the version of the pages served since the last drop
    uint64_t served = 0;       // sequence number of the last page of `pages` served
    uint64_t drop_begun = 0;   // the latest drop begun
    int64_t cleared_ns = -1;   // when a drop begun after `served` completed; -1: none yet
    int64_t switched_ns = -1;  // when the pages of the version before `pages` were cleared
    std::array<uint32_t, kFresh> fresh{};  // threads that began a read() after that
    size_t nfresh = 0;                     // entries of fresh used (a ring once full)
    bool IsFresh(uint32_t pid) const;
    void AddFresh(uint32_t pid);
    // The threads that sent the latest READs of the node (served or not) and when.
    struct Reader {
      uint32_t pid = 0;
      int64_t ns = INT64_MIN;
    };
    std::array<Reader, kReaders> readers{};
    void Saw(uint32_t pid, int64_t now_ns);
    // A thread not known to have begun after the switch, other than pid, sent a READ at
    // since_ns or later.
    bool OthersSince(uint32_t pid, int64_t since_ns) const;
  };
  void Cleared(Node& n, uint64_t ticket, int64_t now_ns);
  const int64_t grace_ns_;
  mutable std::mutex mu_;  // leaf lock
  uint64_t seq_ = 0;
  std::unordered_map<uint64_t, Node> nodes_;
};

}  // namespace clairfs
