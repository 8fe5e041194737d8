#include "cache/consumption.h"

namespace clairfs {

void Consumption::Reset(std::shared_ptr<const Plan> plan, bool keep) {
  const size_t n = plan->sequence.size();
  if (keep && plan_) {
    consumed_.resize(n, 0);
  } else {
    consumed_.assign(n, 0);
    low_ = 0;
  }
  next_use_.assign(plan->files.size(), kNoPos);
  for (size_t p = n; p-- > low_;) {
    if (!consumed_[p]) next_use_[plan->sequence[p]] = static_cast<uint32_t>(p);
  }
  plan_ = std::move(plan);
}

uint32_t Consumption::Consume(uint32_t id) {
  const uint32_t p = next_use_[id];
  if (p == kNoPos) return p;
  consumed_[p] = 1;
  uint32_t q = plan_->next_same[p];
  while (q != kNoPos && consumed_[q]) q = plan_->next_same[q];
  next_use_[id] = q;
  while (low_ < consumed_.size() && consumed_[low_]) ++low_;
  return p;
}

}  // namespace clairfs
