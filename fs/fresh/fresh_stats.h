// The counters of the parts that keep the kernel's caches true (fs/fresh/), updated lock-free by
// their threads and read by .clairfs/stats (control/node_stats.h).
#pragma once

#include <atomic>
#include <cstdint>

namespace clairfs {

// The backing watch (fs/fresh/backing_watch.h, fuse.open_mode none): changes on this node passed
// on to the kernel's caches.
struct WatchStats {
  using Counter = std::atomic<uint64_t>;
  Counter directories{0};    // gauge: directories watched now
  Counter events{0};         // inotify events read
  Counter invalidations{0};  // entries, attributes or pages the kernel was told to drop
  Counter refused{0};        // watches that could not be added (limit, not a directory)
  Counter overflows{0};      // event queues lost (IN_Q_OVERFLOW)
};

// Freshness for changes no watch sees (fs/fresh/revalidate.h): the kernel told to forget what it
// caches of objects that changed; all zero with fuse.immutable.
struct FreshStats {
  using Counter = std::atomic<uint64_t>;
  Counter checked{0};      // files the plan reads next compared after a stat ahead
  Counter swept{0};        // nodes the kernel holds statted by the revalidation sweep
  Counter rounds{0};       // sweeps over every node held, completed
  Counter invalidated{0};  // nodes whose attributes or pages the kernel was told to drop
  Counter entries{0};      // names dropped because their object went or was replaced
  Counter failed{0};       // stats that failed without an answer (the node left as it was)
};

}  // namespace clairfs
