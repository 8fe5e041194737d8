// Stats: the daemon's counters, updated lock-free by every layer and read by .clairfs/stats.
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
  Counter bytes_read{0};  // bytes returned by read() on dataset files
  // READ requests on dataset files the daemon answered (ok or not): a read() the page cache
  // answers sends none, a large one several (the kernel's request size, fuse max_pages).
  Counter read_requests{0};
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
  // Peer tier (cluster/): object reads whose bytes came from a peer, objects fetched from peers
  // (for a reader or the prefetch), and the bytes moved each way.
  Counter served_peer{0};
  Counter peer_fetched{0};
  Counter peer_bytes_in{0};
  Counter peer_bytes_out{0};
  Counter peer_errors{0};   // requests that failed: timeout, down peer, bad hash, bad reply
  Counter peer_adopted{0};  // objects other nodes pushed (read before this owner had them), kept
  // Opens served, while the backing store did not answer, from a cached copy of the version
  // the kernel last saw (DatasetCore::BindUnverified): not revalidated against the store.
  Counter served_unverified{0};
  // Messages refused: another protocol version, or no magic; or an object whose size or
  // version does not match the key and version asked for.
  Counter peer_protocol_errors{0};
  Counter mpi_errors{0};  // MPI calls that returned an error (logged, rate-limited)
  // Peer messages dropped unread because their seal failed (cluster/sealed_transport.h).
  struct PeerRefused {
    Counter unsealed{0};       // no seal: not sent by a daemon of a sealed cluster
    Counter other_cluster{0};  // sealed under another cluster's key
    Counter other_session{0};  // sealed for another session: an earlier run's, or another rank's
    Counter forged{0};         // the MAC does not match: bytes changed, or sealed without the key
    Counter replayed{0};       // accepted once already: sent again
  } peer_refused;
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

  // The backing watch (fs/fresh/backing_watch.h, fuse.open_mode none): changes on this node passed
  // on to the kernel's caches.
  struct Watch {
    Counter directories{0};    // gauge: directories watched now
    Counter events{0};         // inotify events read
    Counter invalidations{0};  // entries, attributes or pages the kernel was told to drop
    Counter refused{0};        // watches that could not be added (limit, not a directory)
    Counter overflows{0};      // event queues lost (IN_Q_OVERFLOW)
  } watch;

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

  // Freshness for changes no watch sees (fs/fresh/revalidate.h): the kernel told to forget what it
  // caches of objects that changed; all zero with fuse.immutable.
  struct Fresh {
    Counter checked{0};      // files the plan reads next compared after a stat ahead
    Counter swept{0};        // nodes the kernel holds statted by the revalidation sweep
    Counter rounds{0};       // sweeps over every node held, completed
    Counter invalidated{0};  // nodes whose attributes or pages the kernel was told to drop
    Counter entries{0};      // names dropped because their object went or was replaced
    Counter failed{0};       // stats that failed without an answer (the node left as it was)
  } fresh;

  // Access (fs/access.h): refusals beyond the kernel's own permission check.
  Counter open_denied{0};     // dataset opens the open-time access re-check refused (EACCES)
  Counter control_denied{0};  // opens of .clairfs/manifest for writing by a non-owner refused
  struct Errors {
    Counter fetch{0};       // backing-store reads that failed
    Counter timeout{0};     // readers that gave up waiting on a fetch
    Counter stale{0};       // opens of a planned file that changed since planning
    Counter stale_node{0};  // requests on a node whose path now names another object (ESTALE)
    Counter tier_full{0};   // a tier refused an object the plan gave it
    Counter manifest_rejected{0};  // invalid manifests
    Counter access_check{0};       // open re-checks made without the caller's supplementary groups
    Counter backing_timeout{0};    // backing-store calls that failed for their deadline (timed out,
                                   // or refused at once: their path or every I/O thread stuck)
  } errors;
};

}  // namespace clairfs
