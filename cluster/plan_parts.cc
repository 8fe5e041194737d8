// kPart and kAssign on the wire: formats and contracts in plan_parts.h.
#include "cluster/plan_parts.h"

#include <unordered_map>
#include <unordered_set>

#include "cluster/message_codec.h"
#include "cluster/wire.h"

namespace clairfs::cluster {
namespace {
// The smallest encoded entries: a part's (hash, one-byte bytes and freq, first) and an
// assignment's (one-byte holder).
constexpr size_t kMinPartEntry = 8 + 1 + 1 + 4;
constexpr size_t kMinAssignEntry = 1;
}  // namespace

CoordinatorTotals& CoordinatorTotals::operator+=(const CoordinatorTotals& o) {
  objects += o.objects;
  bytes += o.bytes;
  held_objects += o.held_objects;
  held_bytes += o.held_bytes;
  predicted_backing_bytes += o.predicted_backing_bytes;
  return *this;
}

uint32_t QuantizeFirst32(uint64_t position, uint64_t span) {
  if (span == 0 || position >= span) return 0xFFFFFFFFu;
  return static_cast<uint32_t>((static_cast<unsigned __int128>(position) << 32) / span);
}

std::vector<PartEntry> ApplyDelta(const std::vector<PartEntry>& before,
                                  const std::vector<uint64_t>& removed,
                                  const std::vector<PartEntry>& added) {
  const std::unordered_set<uint64_t> gone(removed.begin(), removed.end());
  std::vector<PartEntry> out;
  out.reserve(before.size() + added.size());
  for (const PartEntry& e : before) {
    if (!gone.count(e.key_hash)) out.push_back(e);
  }
  out.insert(out.end(), added.begin(), added.end());
  return out;
}

bool MakeDelta(const std::vector<PartEntry>& before, const std::vector<PartEntry>& after,
               std::vector<uint64_t>* removed, std::vector<PartEntry>* added) {
  std::unordered_map<uint64_t, const PartEntry*> now;
  for (const PartEntry& e : after) now.emplace(e.key_hash, &e);
  removed->clear();
  added->clear();
  std::unordered_set<uint64_t> kept;
  for (const PartEntry& e : before) {
    auto it = now.find(e.key_hash);
    if (it == now.end() || !(*it->second == e)) {
      removed->push_back(e.key_hash);
    } else {
      kept.insert(e.key_hash);
    }
  }
  for (const PartEntry& e : after) {
    if (!kept.count(e.key_hash)) added->push_back(e);
  }
  // About 8 bytes per removed entry and 16 per entry sent, against 16 per entry of after.
  return 8 * removed->size() + 16 * added->size() < 16 * after.size();
}

std::vector<char> EncodePart(const Part& p) {
  wire::Writer w = MessageWriter();
  w.PutVarint(p.seq);
  w.PutVarint(p.base);
  w.PutVarint(p.generation);
  w.PutVarint(p.budget);
  w.PutVarint(p.removed.size());
  for (uint64_t h : p.removed) w.Put(h);
  w.PutVarint(p.entries.size());
  for (const PartEntry& e : p.entries) {
    w.Put(e.key_hash);
    w.PutVarint(e.bytes);
    w.PutVarint((uint64_t{e.freq} << 1) | (e.held ? 1 : 0));
    w.Put(e.first);
  }
  return w.Take();
}

std::optional<Part> DecodePart(std::string_view bytes, std::string* error) {
  wire::Reader r = MessageReader(bytes);
  Part p;
  uint64_t n;
  if (!r.GetVarint(&p.seq) || !r.GetVarint(&p.base) || !r.GetVarint(&p.generation) ||
      !r.GetVarint(&p.budget)) {
    *error = "truncated part header";
    return std::nullopt;
  }
  uint64_t gone;
  if (!r.GetVarint(&gone) || gone > r.left() / sizeof(uint64_t)) {
    *error = "bad removed count in a part";
    return std::nullopt;
  }
  if (gone > 0 && p.base == 0) {
    *error = "a whole part that removes entries";
    return std::nullopt;
  }
  p.removed.resize(gone);
  for (uint64_t& h : p.removed) r.Get(&h);
  if (!r.GetVarint(&n)) {
    *error = "truncated part header";
    return std::nullopt;
  }
  if (n > r.left() / kMinPartEntry) {
    *error = "part count " + std::to_string(n) + " exceeds its bytes";
    return std::nullopt;
  }
  p.entries.resize(n);
  for (PartEntry& e : p.entries) {
    uint64_t freq;
    if (!r.Get(&e.key_hash) || !r.GetVarint(&e.bytes) || !r.GetVarint(&freq) || !r.Get(&e.first)) {
      *error = "truncated part entry";
      return std::nullopt;
    }
    e.held = (freq & 1) != 0;
    freq >>= 1;
    if (freq > 0xFFFFFFFFu) {
      *error = "part entry with freq " + std::to_string(freq);
      return std::nullopt;
    }
    if (freq == 0 && !e.held) {  // only an object the node holds may be named unread
      *error = "part entry with freq 0 that the node does not hold";
      return std::nullopt;
    }
    e.freq = static_cast<uint32_t>(freq);
  }
  if (!r.Done()) {
    *error = "trailing bytes after the part";
    return std::nullopt;
  }
  return p;
}

std::vector<char> EncodeAssignment(const Assignment& a, int receiver) {
  wire::Writer w = MessageWriter();
  w.PutVarint(a.seq);
  const CoordinatorTotals& t = a.totals;
  for (uint64_t v : {t.objects, t.bytes, t.held_objects, t.held_bytes, t.predicted_backing_bytes})
    w.PutVarint(v);
  w.PutVarint(a.holder.size());
  size_t k = 0;
  for (int h : a.holder) {
    w.PutVarint(static_cast<uint64_t>(h + 1));
    if (h == receiver) w.Put(k < a.first.size() ? a.first[k++] : 0u);
  }
  return w.Take();
}

std::optional<Assignment> DecodeAssignment(std::string_view bytes, int receiver, int ranks,
                                           std::string* error) {
  wire::Reader r = MessageReader(bytes);
  Assignment a;
  CoordinatorTotals& t = a.totals;
  uint64_t n;
  if (!r.GetVarint(&a.seq) || !r.GetVarint(&t.objects) || !r.GetVarint(&t.bytes) ||
      !r.GetVarint(&t.held_objects) || !r.GetVarint(&t.held_bytes) ||
      !r.GetVarint(&t.predicted_backing_bytes) || !r.GetVarint(&n)) {
    *error = "truncated assignment header";
    return std::nullopt;
  }
  if (n > r.left() / kMinAssignEntry) {
    *error = "assignment count " + std::to_string(n) + " exceeds its bytes";
    return std::nullopt;
  }
  a.holder.resize(n);
  for (int& h : a.holder) {
    uint64_t v;
    if (!r.GetVarint(&v) || v > static_cast<uint64_t>(ranks)) {
      *error = "bad holder in an assignment";
      return std::nullopt;
    }
    h = static_cast<int>(v) - 1;
    if (h == receiver) {
      uint32_t first;
      if (!r.Get(&first)) {
        *error = "truncated assignment entry";
        return std::nullopt;
      }
      a.first.push_back(first);
    }
  }
  if (!r.Done()) {
    *error = "trailing bytes after the assignment";
    return std::nullopt;
  }
  return a;
}

}  // namespace clairfs::cluster
