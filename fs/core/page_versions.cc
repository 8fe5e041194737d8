#include "fs/core/page_versions.h"

#include <algorithm>

namespace clairfs {

bool PageVersions::Node::IsFresh(uint32_t pid) const {
  const auto end = fresh.begin() + std::min(nfresh, kFresh);
  return std::find(fresh.begin(), end, pid) != end;
}

void PageVersions::Node::AddFresh(uint32_t pid) {
  if (!IsFresh(pid)) fresh[nfresh++ % kFresh] = pid;  // the oldest goes: refused, never mixed
}

void PageVersions::Node::Saw(uint32_t pid, int64_t now_ns) {
  // Its own entry, a free one, else the oldest of a thread known to have begun after the
  // switch, else the oldest: an entry of another thread goes only when all are of such
  // threads, and then only the oldest, so OthersSince is answered right.
  Reader* slot = nullptr;
  for (Reader& r : readers) {
    if (r.pid == pid || r.ns == INT64_MIN) {
      slot = &r;
      break;
    }
  }
  if (slot == nullptr) {
    for (const bool fresh_only : {true, false}) {
      for (Reader& r : readers) {
        if ((!fresh_only || IsFresh(r.pid)) && (slot == nullptr || r.ns < slot->ns)) slot = &r;
      }
      if (slot != nullptr) break;
    }
  }
  *slot = Reader{pid, now_ns};
}

bool PageVersions::Node::OthersSince(uint32_t pid, int64_t since_ns) const {
  return std::any_of(readers.begin(), readers.end(), [&](const Reader& r) {
    return r.ns != INT64_MIN && r.pid != pid && r.ns >= since_ns && !IsFresh(r.pid);
  });
}

void PageVersions::Cleared(Node& n, uint64_t ticket, int64_t now_ns) {
  // The first drop to complete among those begun after the last page served removed them all.
  if (ticket > n.served && n.cleared_ns < 0) {
    n.cleared_ns = now_ns;
    n.nfresh = 0;  // threads that began before this drop may hold the pages it removed
  }
}

PageVersions::Verdict PageVersions::Serve(uint64_t node, const FileVersion& v, uint32_t pid,
                                          bool first_page, int64_t now_ns) {
  std::lock_guard lock(mu_);
  const uint64_t seq = ++seq_;
  Node& n = nodes_[node];
  n.Saw(pid, now_ns);
  if (n.pages == FileVersion{} || n.pages == v) {
    const bool settling = n.switched_ns >= 0 && now_ns - n.switched_ns < grace_ns_;
    if (settling) {
      if (first_page) {
        n.AddFresh(pid);
      } else if (!n.IsFresh(pid) || n.OthersSince(pid, n.switched_ns - grace_ns_)) {
        // May be a read() that copied old pages, or these pages may go to one: another
        // thread that may have begun before the switch read the node lately.
        return Verdict::kRefuse;
      }
    }
    n.pages = v;
    n.served = seq;
    n.cleared_ns = -1;  // pages served now are cleared only by a drop begun after
    return Verdict::kServe;
  }
  const bool cleared = n.cleared_ns >= 0;
  if (cleared && (first_page || now_ns - n.cleared_ns >= grace_ns_)) {
    n.switched_ns = first_page ? now_ns : n.cleared_ns;
    n.nfresh = 0;
    if (first_page) n.AddFresh(pid);
    n.pages = v;
    n.served = seq;
    n.cleared_ns = -1;
    return Verdict::kServe;
  }
  if (n.drop_begun > n.served) return Verdict::kRefuse;  // a drop is under way
  return first_page ? Verdict::kDropOthers : Verdict::kRefuseDrop;
}

uint64_t PageVersions::DropBegin(uint64_t node) {
  std::lock_guard lock(mu_);
  const uint64_t seq = ++seq_;
  if (auto it = nodes_.find(node); it != nodes_.end()) it->second.drop_begun = seq;
  return seq;
}

void PageVersions::DropDone(uint64_t node, uint64_t ticket, int64_t now_ns) {
  std::lock_guard lock(mu_);
  if (auto it = nodes_.find(node); it != nodes_.end()) Cleared(it->second, ticket, now_ns);
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
