// BatchReader: one sample of a batch (docs/batch-path.md), read as the mount would serve it, into
// a client's buffer. No FUSE, no sockets: the server (batch/batch_server.h) calls it per item.
//
// Contract of Read:
//  - The path is checked first (ValidPath): relative, no `.`, `..` or empty component, no NUL,
//    at most 4,096 bytes, not the root's `.clairfs` (EINVAL; ELOOP for `.clairfs`, a link in
//    the mount).
//  - Access (docs/permissions.md): the daemon's own user, or root when the daemon runs as root,
//    reads with the daemon's rights. Another user is checked with its own credentials, as the
//    kernel checks an open: every directory searched and the file opened for reading, as that
//    user (PosixBacking::CheckAccess under RunAs), at every request, so a revoked access is
//    refused at once. When the daemon cannot switch identities or the mount is not
//    allow_other, another user is refused (EACCES). Never wider than the mount.
//  - Version: the one a stat of the path shows (StatAhead::Recent when it vouches, else the
//    backing's Lstat, no symlink followed: a symlink is ELOOP, a non-regular file EINVAL), and
//    the bytes are all of that version: the prefetcher's blob of it (consumed in the plan as an
//    open is), chunk by chunk for a chunked file, else the backing descriptor, whose fstat
//    then names the version served (ESTALE if it changes while read). The same counters as a
//    read through the mount (file_reads, served.*, bytes_read, read_requests).
//  - Placement: the bytes [offset, offset+length) of that version (length clipped at its end,
//    kToEnd: to the end; an offset past the end gives 0 bytes) are written into the buffer at
//    `at` (the caller aligns it; memcpy into its mapping, else pwritev into its descriptor),
//    only if they end at or before `limit` (else ENOBUFS and nothing is written).
// Thread-safe: one reader serves every connection's thread at once; it holds no lock.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "batch/batch_stats.h"
#include "cache/backing/backing.h"
#include "cache/backing/identity.h"
#include "cache/backing/stat_ahead.h"
#include "cache/base/stats.h"
#include "cache/prefetch/prefetcher.h"
#include "fs/core/caller.h"
#include "fs/core/file_read.h"
#include "fs/core/fs_stats.h"

namespace clairfs {

class BatchReader {
 public:
  struct Parts {
    PosixBacking* backing = nullptr;
    Prefetcher* prefetcher = nullptr;
    Stats* stats = nullptr;
    FsStats* fs_stats = nullptr;
    BatchStats* batch_stats = nullptr;
    StatAhead* ahead = nullptr;  // null: every version from a stat of the store
    // Called with each directory on a sample's path (dataset relative, the root left out)
    // before its version is taken, as a LOOKUP through the mount has the backing watch follow
    // a directory: a stat made ahead answers for a file only while its directory is watched
    // (StatAhead::Recent). Null: no watch.
    std::function<void(const std::string& dir)> dir_seen;
  };
  // Every part must outlive the reader. self: the daemon's credentials; can_switch: it may take
  // another user's (geteuid() == 0 && CanSwitchIdentity()); allow_other: the mount lets other
  // users in.
  BatchReader(Parts parts, Credentials self, bool can_switch, bool allow_other);

  struct Sample {
    int error = 0;  // 0 or a positive errno (docs/batch-path.md, kReadReply)
    uint64_t length = 0;
    uint64_t file_size = 0;
  };
  // Where a sample's bytes go: the client's buffer, mapped (map, written with memcpy) or not
  // (null: pwritev into fd).
  struct Buffer {
    int fd = -1;
    char* map = nullptr;
  };
  Sample Read(const Caller& caller, std::string_view path, uint64_t offset, uint64_t length,
              Buffer buffer, uint64_t at, uint64_t limit);

  // EINVAL unless path is a canonical relative path of at most 4096 bytes; ELOOP for the
  // root's `.clairfs`; 0 when it may be read.
  static int ValidPath(std::string_view path);
  // The errno a sample gets for a failure: one of those docs/batch-path.md names.
  static int ErrnoOf(const Status& s);

 private:
  // EACCES, another error, or 0: may caller read path (see the contract)?
  int Allow(const Caller& caller, const std::string& path);
  // Binds f to the version a stat of path shows (DatasetCore::Bind's rules, without the
  // kernel's node): a blob of it, chunked, or the descriptor.
  // fits: whether the sample's bytes fit the window at the size a stat shows; asked before the
  // file is consumed in the plan, so that a sample refused with ENOBUFS (kNoSpace) and asked
  // for again counts once.
  Status Bind(const std::string& path, OpenContents* f,
              const std::function<bool(uint64_t size)>& fits);

  const Parts p_;
  const Credentials self_;
  const bool can_switch_;
  const bool allow_other_;
};

}  // namespace clairfs
