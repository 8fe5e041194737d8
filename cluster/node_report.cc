#include "cluster/node_report.h"

#include <algorithm>
#include <limits>

#include "cluster/message_codec.h"
#include "cluster/wire.h"

namespace clairfs::cluster {

namespace {

bool Printable(std::string_view s) {
  for (char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

template <typename E>
bool GetEnum(wire::Reader& r, E last, E* out) {
  uint8_t v;
  if (!r.Get(&v) || v > static_cast<uint8_t>(last)) return false;
  *out = static_cast<E>(v);
  return true;
}

}  // namespace

std::vector<char> EncodeReport(const NodeReport& n) {
  wire::Writer w = MessageWriter();
  w.PutVarint(static_cast<uint64_t>(n.rank));
  const std::string_view host = std::string_view(n.host).substr(0, kMaxReportHost);
  w.PutVarint(host.size());
  w.PutBytes(host.data(), host.size());
  for (uint64_t v : {n.sequence, n.uptime_ms, n.plan_generation}) w.PutVarint(v);
  w.Put(static_cast<uint8_t>(n.plan));
  for (uint64_t v :
       {n.dataset_bytes, n.backing_bytes, n.backing_reads, n.peer_bytes_in, n.peer_bytes_out}) {
    w.PutVarint(v);
  }
  const size_t tiers = std::min(n.tiers.size(), kMaxReportTiers);
  w.Put(static_cast<uint8_t>(tiers));
  for (size_t t = 0; t < tiers; ++t) {
    const TierReport& tier = n.tiers[t];
    w.Put(static_cast<uint8_t>(tier.kind));
    w.PutVarint(tier.used_bytes);
    w.PutVarint(tier.capacity);
    w.PutVarint(tier.objects);
  }
  return w.Take();
}

std::optional<NodeReport> DecodeReport(std::string_view bytes) {
  wire::Reader r = MessageReader(bytes);
  NodeReport n;
  uint64_t rank, host_size;
  std::string_view host;
  if (!r.GetVarint(&rank) || rank > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return {};
  }
  n.rank = static_cast<int>(rank);
  if (!r.GetVarint(&host_size) || host_size > kMaxReportHost || !r.GetView(host_size, &host) ||
      !Printable(host)) {
    return {};
  }
  n.host.assign(host);
  if (!r.GetVarint(&n.sequence) || !r.GetVarint(&n.uptime_ms) || !r.GetVarint(&n.plan_generation) ||
      !GetEnum(r, PlanState::kPlaced, &n.plan)) {
    return {};
  }
  for (uint64_t* v : {&n.dataset_bytes, &n.backing_bytes, &n.backing_reads, &n.peer_bytes_in,
                      &n.peer_bytes_out}) {
    if (!r.GetVarint(v)) return {};
  }
  uint8_t tiers;
  if (!r.Get(&tiers) || tiers > kMaxReportTiers) return {};
  n.tiers.resize(tiers);
  for (TierReport& t : n.tiers) {
    if (!GetEnum(r, TierKind::kOther, &t.kind) || !r.GetVarint(&t.used_bytes) ||
        !r.GetVarint(&t.capacity) || !r.GetVarint(&t.objects)) {
      return {};
    }
  }
  if (!r.Done()) return {};
  return n;
}

}  // namespace clairfs::cluster
