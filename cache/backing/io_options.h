// Options of the backing store's I/O threads (cache/backing/io_executor.h).
// Plain structs with only standard headers (docs/configuration.md, "Defaults"): the member
// initialisers are the one place each default is written; conf/ parses the YAML keys named
// beside each member into them, and conf/clairfs.yaml must equal them (tests/unit/config_test).
#pragma once

#include <chrono>

namespace clairfs {

struct IoOptions {
  // cache.backing_timeout: longest a call may go without progress, from its submission or
  // its last Touch(). The members below are not config keys.
  std::chrono::milliseconds timeout{30'000};
  // Most I/O threads at once, including those held by abandoned calls.
  int max_threads = 64;
  // While the store looks stalled (a call was abandoned at its deadline and no call has
  // returned since), new calls wait at most this long: a dead or stalled store costs each
  // caller about this much, not the full timeout. One stuck file among answering ones does
  // not make the store look stalled.
  std::chrono::milliseconds stalled_timeout{1'000};
  // cache.backing_pages: what becomes of the page-cache pages of the store's files once a
  // whole-object read (Backing::Read, what fills the tiers) has its bytes: kDrop has the kernel
  // let them go (POSIX_FADV_DONTNEED on the range read), since the daemon now holds the bytes
  // and a second copy in memory only takes room (not for a file modified within the last
  // second: a writer may be at work); kKeep leaves them, for a node whose other
  // processes read the same files directly.
  enum class Pages { kDrop, kKeep };
  Pages pages = Pages::kDrop;

  bool operator==(const IoOptions&) const = default;
};

}  // namespace clairfs
