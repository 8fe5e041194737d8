#include "cache/prefetch/staging_window.h"

#include <algorithm>

#include "cache/prefetch/cluster_hooks.h"

namespace clairfs {

void StagingWindow::Reset(const Plan& plan, const std::vector<Consumption>& streams) {
  carried_.clear();
  for (auto& [id, e] : entries_) {
    if (e.blob) carried_.emplace(std::move(e.key), std::move(e.blob));
  }
  entries_.clear();
  bytes_ = 0;
  ready_ = 0;
  staged_.assign((plan.objects.size() + 63) / 64, 0);
  staged_count_ = 0;
  for (size_t id = 0; id < plan.objects.size(); ++id) {
    if (!plan.objects[id].place.Staged()) continue;
    staged_[id >> 6] |= uint64_t{1} << (id & 63);
    ++staged_count_;
  }
  cursors_.assign(streams.size(), Cursor{});
  for (size_t s = 0; s < streams.size(); ++s) cursors_[s].next = streams[s].low();
}

bool StagingWindow::Release(uint32_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || --it->second.pending > 0) return false;
  Drop(it);
  return true;
}

bool StagingWindow::Follow(size_t s, const Consumption& c) {
  Cursor& cur = cursors_[s];
  cur.next = std::max(cur.next, c.low());
  bool freed = false;
  while (!cur.counted.empty() && cur.counted.front().first < c.low()) {
    const auto [pos, id] = cur.counted.front();
    cur.counted.pop_front();
    // A consumed occurrence was released by Take; a given-up one is released here.
    if (!c.consumed(pos)) freed = Release(id) || freed;
  }
  return freed;
}

StagingWindow::Step StagingWindow::Next(const Plan& plan, const std::vector<Consumption>& streams,
                                        PeerSource* peer, Job* job) {
  std::vector<bool> waiting(cursors_.size(), false);  // streams awaiting a peer
  bool any_waiting = false;
  for (uint32_t steps = 0;; ++steps) {
    if (steps >= kSkipLimit) return Step::kMore;
    // The stream whose cursor leads its readers the least.
    size_t s = cursors_.size();
    uint32_t least = kNoPos;
    for (size_t i = 0; i < cursors_.size(); ++i) {
      if (waiting[i] || cursors_[i].next >= plan.streams[i].sequence.size()) continue;
      const uint32_t lead = cursors_[i].next - std::min(cursors_[i].next, streams[i].low());
      if (lead < least) least = lead, s = i;
    }
    if (s == cursors_.size()) {
      if (!any_waiting) carried_.clear();
      return any_waiting ? Step::kAwaitPeer : Step::kIdle;
    }
    Cursor& cur = cursors_[s];
    const PositionList& seq = plan.streams[s].sequence;
    const uint32_t end = static_cast<uint32_t>(seq.size());
    if (staged_count_ == 0) {  // nothing to stage: every walk is over at once
      cur.next = end;
      continue;
    }
    // Skips what needs no entry (done, or not staged); the lead changed, so choose again.
    uint32_t p = cur.next;
    while (p < end && steps < kSkipLimit && (streams[s].done(p) || !Staged(seq[p]))) {
      ++p;
      ++steps;
    }
    if (p != cur.next) {
      cur.next = p;
      continue;
    }
    const uint32_t id = seq[p];
    const PlanObject& o = plan.objects[id];
    if (auto it = entries_.find(id); it != entries_.end()) {
      ++it->second.pending;
      cur.counted.emplace_back(p, id);
      ++cur.next;
      continue;
    }
    if (bytes_ + o.bytes > capacity_) {
      carried_.clear();
      return Step::kFull;
    }
    if (o.place == kPeer && peer && !peer->Contains(o.key, o.version)) {
      waiting[s] = any_waiting = true;
      continue;
    }
    ++cur.next;
    Entry& e = entries_[id];
    e.key = o.key;
    e.pending = 1;
    e.bytes = o.bytes;
    cur.counted.emplace_back(p, id);
    bytes_ += e.bytes;
    if (auto c = carried_.find(e.key); c != carried_.end()) {
      BlobPtr blob = std::move(c->second);
      carried_.erase(c);
      if (blob->version() == o.version && blob->size() == o.bytes) {
        e.blob = std::move(blob);  // taken back from before the Reset: nothing to fetch
        ready_ += e.bytes;
        continue;
      }
    }
    job->id = id;
    job->key = o.key;
    job->version = o.version;
    return Step::kFetch;
  }
}

void StagingWindow::Attach(uint32_t id, FlightPtr flight) {
  if (auto it = entries_.find(id); it != entries_.end()) it->second.flight = std::move(flight);
}

bool StagingWindow::Land(uint32_t id, const FlightPtr& flight, const Result<BlobPtr>& r) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.flight != flight) return false;
  if (r.ok()) {
    if (!it->second.blob) ready_ += it->second.bytes;
    it->second.blob = r.value();
    return false;
  }
  Drop(it);
  return true;
}

StagingWindow::Hit StagingWindow::Take(uint32_t id, size_t s, uint32_t pos) {
  Hit hit;
  auto it = entries_.find(id);
  // An occurrence at or past the cursor was not counted: the entry serves a later one.
  if (it == entries_.end() || (pos != kNoPos && pos >= cursor(s))) return hit;
  hit.blob = it->second.blob;
  hit.flight = it->second.flight;
  if (pos != kNoPos) hit.freed = Release(id);
  return hit;
}

void StagingWindow::Drop(std::unordered_map<uint32_t, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  if (it->second.blob) ready_ -= it->second.bytes;
  entries_.erase(it);
}

}  // namespace clairfs
