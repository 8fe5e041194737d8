// NodeReads: the contents behind READ requests that come without an open (fuse.open_mode:
// none). In that mode the kernel sends no OPEN and no RELEASE for dataset files: it keeps
// their pages across opens and asks only for what its page cache lacks, so a READ carries a
// node id and no handle. A read that starts a file (offset 0, or the first READ seen for the
// node) binds the node to contents exactly as an open did (ClairFs::Bind: one version, a blob
// of it or its descriptor); the READs that follow for the same node use them, until:
//  - a READ reaches the file's end (the kernel asked for its last bytes: the file was read),
//  - the next start of a read of the node (which binds afresh, revalidating the version),
//  - the kernel forgets the node, or
//  - more than `capacity` nodes are bound (the least recently used is dropped; its next READ
//    binds again, without consuming: see ClairFs::ReadNode).
// So memory holds at most `capacity` nodes' contents, and a file's bytes never outlive its
// read by much. Thread-safe; mu_ is a leaf.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "fs/file_read.h"

namespace clairfs {

class NodeReads {
 public:
  explicit NodeReads(size_t capacity = 4096) : capacity_(capacity < 1 ? 1 : capacity) {}

  // The contents node is bound to, or null.
  std::shared_ptr<OpenContents> Find(uint64_t node);
  // Binds node to contents (replacing what it was bound to).
  void Bind(uint64_t node, std::shared_ptr<OpenContents> contents);
  // Unbinds node if it is still bound to contents (a READ that reached the end).
  void Release(uint64_t node, const OpenContents* contents);
  // Unbinds node (forgotten by the kernel).
  void Drop(uint64_t node);
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<OpenContents> contents;
    std::list<uint64_t>::iterator lru;  // position in lru_
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> nodes_;
  std::list<uint64_t> lru_;  // most recently used first
};

}  // namespace clairfs
