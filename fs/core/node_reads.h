// NodeReads: the contents behind READ requests that come without an open (fuse.open_mode:
// none). In that mode the kernel sends no OPEN and no RELEASE for dataset files: it keeps
// their pages across opens and asks only for what its page cache lacks, so a READ carries a
// node id and no handle. A read that starts a file (offset 0, or the first READ seen for the
// node) binds the node to contents exactly as an open did (DatasetCore::Bind: one version, a blob
// of it or its descriptor); the READs that follow for the same node use them, until:
//  - a READ reaches the file's end (the kernel asked for its last bytes: the file was read),
//  - the next start of a read of the node (which binds afresh, revalidating the version),
//  - the kernel forgets the node, or
//  - more than `capacity` nodes are bound, or the bound nodes hold more than `max_bytes` of
//    contents (a whole object, or a chunked file's current chunk, counted at its chunk size):
//    the least recently used are dropped, never the one just bound; a dropped node's next READ
//    binds again, without consuming (see DatasetCore::ReadNode).
// So memory holds at most `capacity` nodes' contents and about max_bytes of them (plus one
// node's), however many files readers leave half read, and a file's bytes never outlive its
// read by much. The bytes may be shared with a tier or the staging window; max_bytes counts
// them all the same (conf/memory_budget.h counts it in the daemon's memory). Thread-safe; mu_
// is a leaf.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "fs/core/file_read.h"

namespace clairfs {

class NodeReads {
 public:
  explicit NodeReads(size_t capacity = 4096, uint64_t max_bytes = UINT64_MAX)
      : capacity_(capacity < 1 ? 1 : capacity), max_bytes_(max_bytes) {}

  // The contents node is bound to, or null.
  std::shared_ptr<OpenContents> Find(uint64_t node);
  // Binds node to contents (replacing what it was bound to).
  void Bind(uint64_t node, std::shared_ptr<OpenContents> contents);
  // Unbinds node if it is still bound to contents (a READ that reached the end).
  void Release(uint64_t node, const OpenContents* contents);
  // Unbinds node (forgotten by the kernel).
  void Drop(uint64_t node);
  size_t size() const;
  // Bytes of contents bound (as counted against max_bytes).
  uint64_t bytes() const;

 private:
  struct Entry {
    std::shared_ptr<OpenContents> contents;
    std::list<uint64_t>::iterator lru;  // position in lru_
    uint64_t bytes = 0;                 // Cost(*contents) when bound
  };
  static uint64_t Cost(const OpenContents& c);
  const size_t capacity_;
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> nodes_;
  std::list<uint64_t> lru_;  // most recently used first
  uint64_t bytes_ = 0;       // sum of the entries' bytes
};

}  // namespace clairfs
