#include "cache/plan/consumption.h"

#include <algorithm>

namespace clairfs {

void Consumption::Reset(const PlanStream& stream, size_t objects, bool keep) {
  const size_t n = stream.sequence.size();
  if (!keep || n < seq_.size()) {
    consumed_.assign((n + 63) / 64, 0);
    low_ = high_ = 0;
    given_up_ = 0;
  } else {
    consumed_.resize((n + 63) / 64, 0);
  }
  seq_ = stream.sequence;
  epoch_begin_ = stream.epoch_begin;
  next_use_.assign(objects, kNoPos);
  last_.assign(objects, kNoPos);
  last_pos_.assign(objects, kNoPos);
  link_.clear();
  horizon_ = low_;
  // Each object's last not-consumed position: walked from the end, so that a plan of many
  // epochs stops within its last epoch once every object the stream reads was met (the count
  // is unknown without Finalize: then, or when some object is consumed to its end, the walk
  // goes down to low_).
  const uint32_t want = stream.distinct;
  uint32_t met = 0;
  for (size_t p = n; p > low_ && (want == 0 || met < want);) {
    --p;
    const uint32_t id = seq_[p];
    if (last_pos_[id] != kNoPos || consumed(static_cast<uint32_t>(p))) continue;
    last_pos_[id] = static_cast<uint32_t>(p);
    ++met;
  }
  high_ = low_;  // the give-up floor restarts with the index
}

uint64_t Consumption::epoch() const {
  if (low_ >= seq_.size()) return epoch_begin_.size();
  auto it = std::upper_bound(epoch_begin_.begin(), epoch_begin_.end(), low_);
  return static_cast<uint64_t>(it - epoch_begin_.begin()) - 1;
}

void Consumption::Extend() {
  const uint32_t q = horizon_++;
  link_.push_back(kNoPos);
  if (consumed(q)) return;  // kept from before a Reset: not an occurrence to take
  const uint32_t id = seq_[q];
  if (next_use_[id] == kNoPos) {
    next_use_[id] = q;
  } else {
    link_[last_[id] - low_] = q;
  }
  last_[id] = q;
}

uint32_t Consumption::Consume(uint32_t id) {
  if (!Reads(id)) return kNoPos;
  while (next_use_[id] == kNoPos) Extend();  // Reads(): an occurrence lies ahead
  const uint32_t p = next_use_[id];
  consumed_[p >> 6] |= uint64_t{1} << (p & 63);
  next_use_[id] = link_[p - low_];
  if (last_pos_[id] == p) last_pos_[id] = kNoPos;  // its last occurrence was taken
  if (p + 1 > high_) high_ = p + 1;
  Advance();
  return p;
}

uint32_t Consumption::Locate(uint32_t id, uint32_t ahead) {
  const uint64_t limit = std::min<uint64_t>(seq_.size(), uint64_t{low_} + ahead);
  while (next_use_[id] == kNoPos && horizon_ < limit) Extend();
  return next_use_[id] < limit ? next_use_[id] : kNoPos;
}

void Consumption::Advance() {
  // Everything more than lag_ behind the furthest read is given up.
  const uint32_t floor = high_ > lag_ ? high_ - lag_ : 0;
  while (low_ < seq_.size() && (consumed(low_) || low_ < floor)) {
    if (!consumed(low_)) {
      ++given_up_;
      const uint32_t id = seq_[low_];
      if (next_use_[id] == low_) next_use_[id] = link_.front();
      if (last_pos_[id] == low_) last_pos_[id] = kNoPos;
    }
    link_.pop_front();  // low_ < horizon_: see the invariant at horizon_
    ++low_;
  }
}

}  // namespace clairfs
