// KernelCache: what the core (fs/core/dataset_core.h) tells the kernel's caches. The FUSE
// adapter implements it with the kernel's notifications (ClairFs); tests record the calls.
#pragma once

#include <cstdint>

namespace clairfs {

class KernelCache {
 public:
  virtual ~KernelCache() = default;
  // The kernel must drop the attributes it caches for node (size, times, mode, ACLs), so that
  // the next stat() or read() asks again. Never blocks; a node the kernel no longer holds is
  // nothing to drop.
  virtual void InvalidateAttrs(uint64_t node) = 0;
  // The kernel must drop node's pages from offset `from` on, with its attributes. Waits until
  // the kernel dropped them (so never called over pages of a READ not yet answered by the
  // calling thread). True iff they were dropped (or the kernel holds no such node); false when
  // the notification failed or no session is attached yet: the pages stay as they were.
  virtual bool DropPages(uint64_t node, uint64_t from) = 0;
};

}  // namespace clairfs
