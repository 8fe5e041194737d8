#include "cache/consumption.h"

namespace clairfs {

void Consumption::Reset(std::shared_ptr<const Plan> plan, bool keep) {
  const size_t n = plan->sequence.size();
  if (keep && plan_) {
    consumed_.resize(n, 0);
  } else {
    consumed_.assign(n, 0);
    low_ = high_ = 0;
    given_up_ = 0;
  }
  next_use_.assign(plan->objects.size(), kNoPos);
  for (size_t p = n; p-- > low_;) {
    if (!consumed_[p]) next_use_[plan->sequence[p]] = static_cast<uint32_t>(p);
  }
  plan_ = std::move(plan);
}

uint32_t Consumption::Consume(uint32_t id) {
  uint32_t p = next_use_[id];
  while (p != kNoPos && done(p)) p = plan_->next_same[p];
  if (p == kNoPos) {
    next_use_[id] = kNoPos;
    return p;
  }
  consumed_[p] = 1;
  uint32_t q = plan_->next_same[p];
  while (q != kNoPos && consumed_[q]) q = plan_->next_same[q];
  next_use_[id] = q;
  if (p + 1 > high_) high_ = p + 1;
  // Everything more than lag_ behind the furthest read is given up.
  const uint32_t floor = high_ > lag_ ? high_ - lag_ : 0;
  while (low_ < consumed_.size() && (consumed_[low_] || low_ < floor)) {
    given_up_ += !consumed_[low_];
    ++low_;
  }
  return p;
}

}  // namespace clairfs
