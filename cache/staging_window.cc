#include "cache/staging_window.h"

#include <algorithm>

namespace clairfs {

void StagingWindow::Reset(uint32_t cursor) {
  entries_.clear();
  counted_.clear();
  bytes_ = 0;
  cursor_ = cursor;
}

bool StagingWindow::Follow(uint32_t low) {
  cursor_ = std::max(cursor_, low);
  bool freed = false;
  while (!counted_.empty() && counted_.front().first < low) {
    const auto [pos, id] = counted_.front();
    counted_.pop_front();
    // Positions are unique: an entry whose last counted occurrence is pos is this one's.
    if (auto it = entries_.find(id); it != entries_.end() && it->second.last == pos) {
      Drop(it);
      freed = true;
    }
  }
  return freed;
}

StagingWindow::Step StagingWindow::Next(const Plan& plan, const Consumption& consumption,
                                        Tier* peer, Job* job) {
  while (cursor_ < plan.sequence.size()) {
    const uint32_t p = cursor_;
    const uint32_t id = plan.sequence[p];
    const PlanObject& o = plan.objects[id];
    if (consumption.done(p) || !o.place.Staged()) {
      ++cursor_;
      continue;
    }
    if (auto it = entries_.find(id); it != entries_.end()) {
      ++it->second.pending;
      it->second.last = p;
      counted_.emplace_back(p, id);
      ++cursor_;
      continue;
    }
    if (bytes_ + o.bytes > capacity_) return Step::kFull;
    if (o.place == kPeer && peer && !peer->Contains(o.key, o.version)) return Step::kAwaitPeer;
    ++cursor_;
    Entry& e = entries_[id];
    e.pending = 1;
    e.last = p;
    e.bytes = o.bytes;
    counted_.emplace_back(p, id);
    bytes_ += e.bytes;
    job->id = id;
    job->key = o.key;
    job->version = o.version;
    return Step::kFetch;
  }
  return Step::kIdle;
}

void StagingWindow::Attach(uint32_t id, FlightPtr flight) {
  if (auto it = entries_.find(id); it != entries_.end()) it->second.flight = std::move(flight);
}

bool StagingWindow::Land(uint32_t id, const FlightPtr& flight, const Result<BlobPtr>& r) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.flight != flight) return false;
  if (r.ok()) {
    it->second.blob = r.value();
    return false;
  }
  Drop(it);
  return true;
}

StagingWindow::Hit StagingWindow::Take(uint32_t id, uint32_t pos) {
  Hit hit;
  auto it = entries_.find(id);
  // An occurrence at or past the cursor was not counted: the entry serves a later one.
  if (it == entries_.end() || (pos != kNoPos && pos >= cursor_)) return hit;
  hit.blob = it->second.blob;
  hit.flight = it->second.flight;
  if (pos != kNoPos && --it->second.pending == 0) {
    Drop(it);
    hit.freed = true;
  }
  return hit;
}

void StagingWindow::Drop(std::unordered_map<uint32_t, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  entries_.erase(it);
}

}  // namespace clairfs
