#include "fs/core/inode_table.h"

#include <algorithm>

namespace clairfs {

InodeTable::InodeTable() {
  nodes_[kRootId] = Node{NodeInfo{"", 0, 0, S_IFDIR}, 1, {}};
  by_path_[nodes_.at(kRootId).info.path] = kRootId;
}

uint64_t InodeTable::Acquire(const std::string& path, dev_t dev, ino_t ino, mode_t type,
                             uint64_t linked) {
  std::lock_guard lock(mu_);
  if (path.empty()) return kRootId;
  type &= S_IFMT;
  auto key = by_key_.find(Key{dev, ino});
  if (key != by_key_.end()) {
    Node& n = nodes_.at(key->second);
    if (n.info.type == type && (n.info.path == path || key->second == linked)) {
      ++n.nlookup;
      return key->second;
    }
  }
  // A new object, or a reused inode number: a new node, which the key names from now on.
  const uint64_t id = next_id_++;
  auto [it, added] = nodes_.emplace(id, Node{NodeInfo{path, dev, ino, type}, 1, {}});
  by_key_[Key{dev, ino}] = id;
  by_path_.erase(path);  // the old key may view another node's string: replaced whole
  by_path_.emplace(std::string_view(it->second.info.path), id);
  return id;
}

bool InodeTable::Keyed(dev_t dev, ino_t ino, uint64_t* id, NodeInfo* info) const {
  std::lock_guard lock(mu_);
  auto key = by_key_.find(Key{dev, ino});
  if (key == by_key_.end()) return false;
  *id = key->second;
  *info = nodes_.at(key->second).info;
  return true;
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
  auto key = by_key_.find(Key{it->second.info.dev, it->second.info.ino});
  if (key != by_key_.end() && key->second == id) by_key_.erase(key);
  auto named = by_path_.find(it->second.info.path);
  if (named != by_path_.end() && named->second == id) by_path_.erase(named);
  nodes_.erase(it);
}

bool InodeTable::Get(uint64_t id, NodeInfo* info) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return false;
  *info = it->second.info;
  return true;
}

bool InodeTable::Path(uint64_t id, std::string* path) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return false;
  *path = it->second.info.path;
  return true;
}

void InodeTable::Report(uint64_t id, const FileVersion& version) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  if (it != nodes_.end()) it->second.seen.reported = version;
}

void InodeTable::Report(uint64_t id, const struct stat& st) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  Node& n = it->second;
  const FileVersion v = VersionOf(st);
  // The kernel drops a file's pages on a reply of another size or mtime (auto_inval_data), not
  // on another ctime alone (a rewrite that put size and mtime back): after such a reply its
  // pages are still of the version reported before, which stays recorded, so that
  // fs/fresh/revalidate.h, comparing a fresh stat with it, drops them.
  const bool pages_kept = n.known && !n.gone && S_ISREG(n.mode) && S_ISREG(st.st_mode) &&
                          v.size == n.seen.reported.size && v.mtime_ns == n.seen.reported.mtime_ns;
  if (!pages_kept) n.seen.reported = v;
  n.mode = st.st_mode;
  n.uid = st.st_uid;
  n.gid = st.st_gid;
  n.known = true;
  n.gone = false;
}

bool InodeTable::ByPath(const std::string& path, uint64_t* id) const {
  std::lock_guard lock(mu_);
  auto it = by_path_.find(path);
  if (it == by_path_.end()) return false;
  *id = it->second;
  return true;
}

bool InodeTable::ShownOf(uint64_t id, Shown* shown) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return false;
  const Node& n = it->second;
  *shown = Shown{n.info, n.seen, n.mode, n.uid, n.gid, n.known, n.gone};
  return true;
}

bool InodeTable::ShownByPath(std::string_view path, uint64_t* id, Shown* shown) const {
  std::lock_guard lock(mu_);
  auto by = by_path_.find(path);
  if (by == by_path_.end()) return false;
  auto it = nodes_.find(by->second);
  if (it == nodes_.end()) return false;
  const Node& n = it->second;
  *id = by->second;
  shown->info.path.clear();
  shown->info.dev = n.info.dev;
  shown->info.ino = n.info.ino;
  shown->info.type = n.info.type;
  shown->seen = n.seen;
  shown->mode = n.mode;
  shown->uid = n.uid;
  shown->gid = n.gid;
  shown->known = n.known;
  shown->gone = n.gone;
  return true;
}

void InodeTable::HeldIds(std::vector<uint64_t>* ids) const {
  std::lock_guard lock(mu_);
  ids->reserve(ids->size() + nodes_.size());
  for (const auto& [id, n] : nodes_) ids->push_back(id);
  std::sort(ids->begin(), ids->end());
}

void InodeTable::Revalidated(uint64_t id, const struct stat* st, bool gone) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  Node& n = it->second;
  n.gone = gone;
  if (gone || !st) return;
  n.seen.reported = VersionOf(*st);
  n.mode = st->st_mode;
  n.uid = st->st_uid;
  n.gid = st->st_gid;
  n.known = true;
}

InodeTable::Seen InodeTable::SwapOpen(uint64_t id, const FileVersion& version, uint64_t* changes) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  Seen old;
  if (it != nodes_.end()) {
    old = it->second.seen;
    it->second.seen = Seen{version, version, false};
    if (old.opened != version) opened_changes_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (changes) *changes = opened_changes_.load(std::memory_order_relaxed);
  return old;
}

bool InodeTable::ServedOlder(uint64_t id, const FileVersion& version) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second.seen.opened == version) return false;
  it->second.seen.older_pages = true;
  return true;
}

InodeTable::Seen InodeTable::SeenOf(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(id);
  return it == nodes_.end() ? Seen{} : it->second.seen;
}

size_t InodeTable::size() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

}  // namespace clairfs
