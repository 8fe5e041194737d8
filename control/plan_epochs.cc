#include "control/plan_epochs.h"

#include <algorithm>

namespace clairfs {

std::vector<PlanEpoch> PlanEpochs(const Plan& plan, size_t tiers) {
  uint32_t epochs = 0;
  for (const PlanStream& st : plan.streams) epochs = std::max(epochs, st.epochs());
  std::vector<PlanEpoch> out(epochs);
  for (PlanEpoch& e : out) {
    e.tiers.resize(tiers);
    e.tiers_distinct.resize(tiers);
  }
  std::vector<bool> filled(plan.objects.size(), false);
  // The last epoch (+ 1) in which a tier served the object: 0 none.
  std::vector<uint32_t> served_in(plan.objects.size(), 0);
  const auto add = [](EpochSource& s, uint64_t bytes) {
    ++s.reads;
    s.bytes += bytes;
  };
  for (uint32_t e = 0; e < epochs; ++e) {
    PlanEpoch& out_e = out[e];
    for (const PlanStream& st : plan.streams) {
      if (e >= st.epochs()) continue;
      const size_t begin = st.epoch_begin[e];
      const size_t end = e + 1 < st.epochs() ? st.epoch_begin[e + 1] : st.sequence.size();
      for (size_t pos = begin; pos < end; ++pos) {
        const uint32_t id = st.sequence[pos];
        const PlanObject& o = plan.objects[id];
        add(out_e.total, o.bytes);
        const Placement& at = o.place;
        if (at.InTier() && at.tier < tiers) {
          if (filled[id]) {
            add(out_e.tiers[at.tier], o.bytes);
            if (served_in[id] != e + 1) {
              served_in[id] = e + 1;
              add(out_e.tiers_distinct[at.tier], o.bytes);
            }
          } else {
            filled[id] = true;
            add(out_e.backing, o.bytes);
            add(out_e.fills, o.bytes);
          }
        } else if (at == kPeer) {
          add(out_e.peers, o.bytes);
        } else {
          add(out_e.backing, o.bytes);
        }
      }
    }
  }
  return out;
}

}  // namespace clairfs
