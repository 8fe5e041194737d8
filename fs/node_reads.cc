#include "fs/node_reads.h"

namespace clairfs {

std::shared_ptr<OpenContents> NodeReads::Find(uint64_t node) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.contents;
}

void NodeReads::Bind(uint64_t node, std::shared_ptr<OpenContents> contents) {
  std::shared_ptr<OpenContents> dropped;  // released after the lock: it may close a descriptor
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it != nodes_.end()) {
    it->second.contents.swap(contents);
    dropped = std::move(contents);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  if (nodes_.size() >= capacity_) {
    auto last = nodes_.find(lru_.back());
    dropped = std::move(last->second.contents);
    nodes_.erase(last);
    lru_.pop_back();
  }
  lru_.push_front(node);
  nodes_.emplace(node, Entry{std::move(contents), lru_.begin()});
}

void NodeReads::Release(uint64_t node, const OpenContents* contents) {
  std::shared_ptr<OpenContents> dropped;
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.contents.get() != contents) return;
  dropped = std::move(it->second.contents);
  lru_.erase(it->second.lru);
  nodes_.erase(it);
}

void NodeReads::Drop(uint64_t node) {
  std::shared_ptr<OpenContents> dropped;
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  dropped = std::move(it->second.contents);
  lru_.erase(it->second.lru);
  nodes_.erase(it);
}

size_t NodeReads::size() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

}  // namespace clairfs
