#include "fs/inode_table.h"

namespace clairfs {

InodeTable::InodeTable() { nodes_[kRootId] = Node{"", 0, 0, 1, {}}; }

uint64_t InodeTable::Acquire(const std::string& path, dev_t dev, ino_t ino) {
  std::lock_guard lock(mu_);
  if (path.empty()) return kRootId;
  auto [it, inserted] = by_key_.try_emplace(Key{dev, ino}, next_id_);
  if (inserted) {
    nodes_.emplace(next_id_, Node{path, dev, ino, 1, {}});
    return next_id_++;
  }
  ++nodes_[it->second].nlookup;
  return it->second;
}

void InodeTable::Forget(uint64_t id, uint64_t n) {
  std::lock_guard lock(mu_);
  if (id == kRootId) return;
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  if (it->second.nlookup > n) {
    it->second.nlookup -= n;
    return;
  }
  by_key_.erase(Key{it->second.dev, it->second.ino});
  nodes_.erase(it);
}

bool InodeTable::Path(uint64_t id, std::string* path) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return false;
  *path = it->second.path;
  return true;
}

FileVersion InodeTable::SwapOpenVersion(uint64_t id, const FileVersion& version) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return {};
  FileVersion old = it->second.opened;
  it->second.opened = version;
  return old;
}

size_t InodeTable::size() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

}  // namespace clairfs
