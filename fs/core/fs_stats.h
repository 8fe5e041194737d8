// FsStats: the counters of the dataset mount's core (fs/core/), updated lock-free on the FUSE
// threads and read by .clairfs/stats (control/node_stats.h). The cache's own counters are Stats
// (cache/base/stats.h).
#pragma once

#include <atomic>
#include <cstdint>

namespace clairfs {

struct FsStats {
  using Counter = std::atomic<uint64_t>;
  Counter bytes_read{0};  // bytes returned by read() on dataset files
  // READ requests on dataset files the daemon answered (ok or not): a read() the page cache
  // answers sends none, a large one several (the kernel's request size, fuse max_pages).
  Counter read_requests{0};
  // Opens served, while the backing store did not answer, from a cached copy of the version
  // the kernel last saw (DatasetCore::BindUnverified): not revalidated against the store.
  Counter served_unverified{0};
  // Access (fs/core/access_rules.h): refusals beyond the kernel's own permission check.
  Counter open_denied{0};     // dataset opens the open-time access re-check refused (EACCES)
  Counter control_denied{0};  // opens of .clairfs/manifest for writing by a non-owner refused
  // Metadata calls on the backing store, by whom they were made (cache/backing/stat_ahead.h
  // makes the others ahead, counted in Stats::StatAhead).
  struct Metadata {
    Counter lookups{0};  // LOOKUPs of dataset names the daemon answered (ok or not)
    // Of them, answered with stats made ahead (the parent's and the name's): no backing call.
    Counter lookups_ahead{0};
    // Stats of the backing store (lstat, fstat) made on a reader's path: by LOOKUP, GETATTR,
    // READLINK and the binding of a read (an open of an unplanned file, which reads too, is not
    // one).
    Counter reader_stats{0};
  } metadata;
  struct Errors {
    Counter stale_node{0};    // requests on a node whose path now names another object (ESTALE)
    Counter access_check{0};  // open re-checks made without the caller's supplementary groups
  } errors;
};

}  // namespace clairfs
