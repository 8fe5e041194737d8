#include "fs/page_versions.h"

namespace clairfs {

PageVersions::Verdict PageVersions::Serve(uint64_t node, const FileVersion& v, int64_t now_ns) {
  std::lock_guard lock(mu_);
  const uint64_t seq = ++seq_;
  Node& n = nodes_[node];
  const bool same = n.pages == FileVersion{} || n.pages == v;
  if (same || (n.cleared_ns >= 0 && now_ns - n.cleared_ns >= grace_ns_)) {
    n.pages = v;
    n.served = seq;
    n.cleared_ns = -1;  // pages served now are cleared only by a drop begun after
    return Verdict::kServe;
  }
  return n.drop_begun > n.served ? Verdict::kRefuse : Verdict::kRefuseDrop;
}

uint64_t PageVersions::DropBegin(uint64_t node) {
  std::lock_guard lock(mu_);
  const uint64_t seq = ++seq_;
  if (auto it = nodes_.find(node); it != nodes_.end()) it->second.drop_begun = seq;
  return seq;
}

void PageVersions::DropDone(uint64_t node, uint64_t ticket, int64_t now_ns) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  Node& n = it->second;
  // The first drop to complete among those begun after the last page served removed them all.
  if (ticket > n.served && n.cleared_ns < 0) n.cleared_ns = now_ns;
}

void PageVersions::Forget(uint64_t node) {
  std::lock_guard lock(mu_);
  nodes_.erase(node);
}

size_t PageVersions::size() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

}  // namespace clairfs
