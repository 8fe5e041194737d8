// Options of the FUSE adapter. A plain struct with only standard headers (docs/configuration.md,
// "Defaults"): its member initialisers are the one place each default is written; conf/ fills
// it from the fuse.* and control.* keys, and conf/clairfs.yaml must equal it (config_test).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace clairfs {

// How an open of a dataset file is checked (docs/permissions.md).
enum class AccessCheck {
  kOpen,    // the kernel's check, then the daemon re-checks the caller's access to the backing
            // file with the caller's credentials: a revocation takes effect at the next open
  kKernel,  // the kernel's check only, on modes and ACLs it may have cached for attr_timeout
};

// How dataset files are opened (docs/architecture.md, "No-open mode").
enum class OpenMode {
  kPerOpen,  // every open and close of a dataset file is a request to the daemon
  kNone,     // the kernel opens dataset files itself and keeps their pages across opens; the
             // daemon sees a file's reads only when they miss the page cache (fs/core/node_reads.h)
};

struct FsOptions {
  int threads = 8;  // most FUSE worker threads serving requests at once
  // fuse.clone_fd: each worker thread reads requests from a /dev/fuse descriptor of its own
  // (libfuse clone_fd): a request and its reply stay on one thread's queue.
  bool clone_fd = true;
  double entry_timeout = 3600;                    // seconds the kernel may cache a name lookup
  double attr_timeout = 3600;                     // seconds the kernel may cache attributes
  bool keep_cache = true;                         // keep file pages in the page cache across opens
  AccessCheck access_check = AccessCheck::kOpen;  // fuse.access_check
  OpenMode open_mode = OpenMode::kNone;           // fuse.open_mode
  // fuse.watch_backing, with open_mode none: changes made on this node count at the next open
  // (fs/fresh/backing_watch.h)
  bool watch_backing = true;
  // fuse.stat_ahead, fuse.stat_max_age, open_mode none: versions checked ahead of the reads
  // (cache/backing/stat_ahead.h), used by reads while the watch vouches for them and, unless
  // immutable, compared with what the kernel holds (fs/fresh/revalidate.h); 0 positions: each read
  // checks its own, and nothing is compared ahead.
  uint32_t stat_ahead = 256;
  double stat_max_age = 1.0;  // seconds
  // fuse.revalidate_interval: seconds within which a change no watch sees (another node of a
  // network file system) reaches the kernel's caches of what the plan does not read next
  // (fs/fresh/revalidate.h, the sweep); fuse.immutable: the dataset never changes while mounted (no
  // sweep, no comparison ahead of the reads).
  double revalidate_interval = 60.0;
  bool immutable = false;
  // Not a config key: bytes of file contents NodeReads (fs/core/node_reads.h) may hold for reads in
  // no-open mode, beyond which the least recently read node is let go (its next READ binds
  // again). Counted in the daemon's memory budget (conf/memory_budget.h).
  uint64_t node_read_bytes = 32ull << 20;
  std::string control_group;         // control.group: its members may write .clairfs/manifest too
  std::optional<gid_t> control_gid;  // control_group's id, resolved at start; none: owner only

  bool operator==(const FsOptions&) const = default;
};

}  // namespace clairfs
