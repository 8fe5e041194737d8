// Stats: the cache's counters (cache/), updated lock-free and read by .clairfs/stats with the
// counters of the layers above (control/node_stats.h: the FUSE adapter's, the freshness parts'
// and the cluster's, each defined in its own layer).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace clairfs {

inline constexpr int kMaxTiers = 4;

struct Stats {
  using Counter = std::atomic<uint64_t>;
  // Reads of dataset files that reached the daemon: each open (fuse.open_mode per_open), or
  // each READ at offset 0 (none: a read whose start the page cache did not hold).
  Counter file_reads{0};
  // An object read is an open of a file that is one object, or a reader's first read of a
  // chunk (cache/base/object_key.h) since its previous chunk; the served_* counters count them.
  std::array<Counter, kMaxTiers> served_tier{};    // object reads served by each tier
  std::array<Counter, kMaxTiers> tier_fetched{};   // objects the prefetch put into each tier
  std::array<Counter, kMaxTiers> tier_promoted{};  // of those, copied from another tier
  Counter served_staging{0};                       // object reads served from the staging window
  Counter served_backing{0};         // object reads served by reading the backing store on demand
  Counter backing_reads{0};          // objects (or direct opens) read from the backing store
  Counter backing_bytes{0};          // bytes read from the backing store
  Counter unplanned_file_reads{0};   // file_reads of files the plan does not name
  Counter chunk_reads{0};            // object reads of chunks (first reads of a chunk, see above)
  Counter unplanned_chunk_reads{0};  // reads of chunks of a planned file the plan does not name
  // Prefetches completed, tier fills and staging fetches together: counted per fetch, so an
  // object staged in several epochs or refilled after an eviction counts each time.
  Counter fetched_objects{0};
  Counter staging_fetched{0};  // of those, fetches into the staging window
  Counter stall_ns{0};         // time readers waited on a fetch
  // Peer tier (cluster/, cluster/cluster_stats.h for its own): object reads whose bytes came from
  // a peer, and objects fetched from peers (for a reader or the prefetch).
  Counter served_peer{0};
  Counter peer_fetched{0};
  Counter peer_adopted{0};  // objects other nodes pushed (read before this owner had them), kept
  // Kept copies (cache/plan/kept_copies.h, cache/prefetch/keep_writer.h): faster tiers' objects
  // copied into the persistent tier so that a remount finds them.
  struct Kept {
    Counter queued{0};   // copies queued after a store into a faster tier
    Counter written{0};  // of those, written into the keep tier
    Counter bytes{0};    // their bytes
    Counter skipped{0};  // the keep tier held it already, it left the faster tier, or the
                         // placement no longer keeps it
    Counter dropped{0};  // not queued (queue full, stopped) or left queued at the stop deadline
    Counter failed{0};   // the keep tier was off or refused the write (logged)
  } kept;

  // Versions checked ahead of the reads (cache/backing/stat_ahead.h, fuse.open_mode none).
  struct StatAhead {
    Counter batches{0};    // backing-store calls made ahead (each many stats)
    Counter stats{0};      // stats recorded by them
    Counter used{0};       // reads that took their file's version from one (no call of their own)
    Counter missed{0};     // reads that found none usable and made their own
    Counter signposts{0};  // signposts armed: planned files whose cached attributes were
                           // dropped, so that a reader's next use asks the daemon
                           // (cache/backing/stat_ahead.h)
    Counter reached{0};    // signposts a reader reached (a getattr of the file)
  } stat_ahead;

  struct Errors {
    Counter fetch{0};              // backing-store reads that failed
    Counter timeout{0};            // readers that gave up waiting on a fetch
    Counter stale{0};              // opens of a planned file that changed since planning
    Counter tier_full{0};          // a tier refused an object the plan gave it
    Counter manifest_rejected{0};  // invalid manifests
    Counter backing_timeout{0};    // backing-store calls that failed for their deadline (timed out,
                                   // or refused at once: their path or every I/O thread stuck)
  } errors;
};

}  // namespace clairfs
