#include "fs/core/node_reads.h"

#include <vector>

namespace clairfs {

uint64_t NodeReads::Cost(const OpenContents& c) {
  // A chunked file holds one chunk at a time (OpenContents::chunk), at most its grid's size.
  return (c.blob ? c.blob->size() : 0) + (c.chunked ? c.chunk_size : 0);
}

std::shared_ptr<OpenContents> NodeReads::Find(uint64_t node) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.contents;
}

void NodeReads::Bind(uint64_t node, std::shared_ptr<OpenContents> contents) {
  // Released after the lock: the last reference may close a descriptor.
  std::vector<std::shared_ptr<OpenContents>> dropped;
  const uint64_t cost = contents ? Cost(*contents) : 0;
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it != nodes_.end()) {
    it->second.contents.swap(contents);
    dropped.push_back(std::move(contents));
    bytes_ = bytes_ - it->second.bytes + cost;
    it->second.bytes = cost;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  } else {
    lru_.push_front(node);
    nodes_.emplace(node, Entry{std::move(contents), lru_.begin(), cost});
    bytes_ += cost;
  }
  // The least recently used go, never the node just bound (at the front).
  while (nodes_.size() > 1 && (nodes_.size() > capacity_ || bytes_ > max_bytes_)) {
    auto last = nodes_.find(lru_.back());
    dropped.push_back(std::move(last->second.contents));
    bytes_ -= last->second.bytes;
    nodes_.erase(last);
    lru_.pop_back();
  }
}

void NodeReads::Release(uint64_t node, const OpenContents* contents) {
  std::shared_ptr<OpenContents> dropped;
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.contents.get() != contents) return;
  dropped = std::move(it->second.contents);
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  nodes_.erase(it);
}

void NodeReads::Drop(uint64_t node) {
  std::shared_ptr<OpenContents> dropped;
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  dropped = std::move(it->second.contents);
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  nodes_.erase(it);
}

size_t NodeReads::size() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

uint64_t NodeReads::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace clairfs
