#include "cluster/holders.h"

#include <algorithm>
#include <numeric>

namespace clairfs::cluster {
namespace {

// One read of one object: which part and entry it came from.
struct Read {
  uint64_t key_hash;
  uint32_t part;   // index into the parts given
  uint32_t entry;  // index into that part's entries
};

}  // namespace

std::vector<Part> MakeParts(const Plan& plan, const CoordinatorRing& ring, uint64_t capacity,
                            uint64_t generation, int ranks) {
  std::vector<Part> parts(ranks);
  for (Part& p : parts) p.generation = generation;
  const uint64_t span = plan.span();
  for (const PlanObject& o : plan.objects) {
    if (o.freq == 0 && !o.held) continue;  // neither read nor held here
    const uint64_t h = KeyHash(o.key);
    const int c = ring.Coordinator(h);
    if (c < 0 || c >= ranks) continue;
    const uint32_t first = o.freq == 0 ? 0xFFFFFFFFu : QuantizeFirst32(o.first, span);
    parts[c].entries.push_back({h, o.bytes, o.freq, first, o.held});
  }
  // The budgets: capacity over the coordinators by the bytes read at each, weighted by how
  // often (holders.h). What the node holds and does not read counts as held (its budget keeps
  // it) and weighs nothing in the split of the rest.
  std::vector<uint64_t> demand(ranks, 0), held(ranks, 0);
  std::vector<long double> weight(ranks, 0);
  uint64_t bytes = 0, held_bytes = 0;
  long double total = 0;
  for (int c = 0; c < ranks; ++c) {
    for (const PartEntry& e : parts[c].entries) {
      demand[c] += e.bytes;
      if (e.held) held[c] += e.bytes;
      weight[c] += static_cast<long double>(e.bytes) * e.freq;
    }
    bytes += demand[c];
    held_bytes += held[c];
    total += weight[c];
  }
  // What the node holds already it keeps (it is placed first: DecideHolders); the rest of its
  // capacity is what the split gives out, so that a restarted node is not given more than it
  // has room for and does not drop what it holds for objects another node could take.
  const uint64_t free = capacity > held_bytes ? capacity - held_bytes : 0;
  for (int c = 0; c < ranks; ++c) {
    if (bytes <= capacity) {
      parts[c].budget = demand[c];
      continue;
    }
    const long double share = static_cast<long double>(free) * weight[c] / total;
    parts[c].budget =
        std::min<uint64_t>(demand[c], held[c] + static_cast<uint64_t>(share * kBudgetSlack));
  }
  return parts;
}

Decision DecideHolders(const std::vector<ReaderPart>& parts, int coordinator, int ranks) {
  Decision out;
  // The last tie-break: ranks in turn from the coordinator's, so that the odd objects of
  // different coordinators go to different nodes.
  auto turn = [&](int r) { return ((r - coordinator) % ranks + ranks) % ranks; };
  out.assignments.resize(parts.size());
  std::vector<Read> reads;
  for (uint32_t p = 0; p < parts.size(); ++p) {
    const Part& part = *parts[p].part;
    out.assignments[p].seq = part.seq;
    out.assignments[p].holder.assign(part.entries.size(), kNoHolder);
    for (uint32_t e = 0; e < part.entries.size(); ++e) {
      reads.push_back({part.entries[e].key_hash, p, e});
    }
  }
  // Group the reads by object; within an object, by part index (the same on every node for the
  // same parts, as parts are given by rank).
  std::sort(reads.begin(), reads.end(), [](const Read& a, const Read& b) {
    return a.key_hash != b.key_hash ? a.key_hash < b.key_hash : a.part < b.part;
  });
  struct Object {
    uint64_t key_hash, bytes = 0, total_freq = 0;
    uint32_t first = 0xFFFFFFFFu;
    uint32_t begin = 0, end = 0;  // its reads
    bool held = false;            // a reader holds it already
  };
  std::vector<Object> objects;
  for (uint32_t i = 0; i < reads.size();) {
    Object o{reads[i].key_hash};
    o.begin = i;
    for (; i < reads.size() && reads[i].key_hash == o.key_hash; ++i) {
      // An entry of freq 0 is a holder that does not read it (DecodePart: held only).

      const PartEntry& e = parts[reads[i].part].part->entries[reads[i].entry];
      o.bytes = std::max(o.bytes, e.bytes);
      o.total_freq += e.freq;
      o.first = std::min(o.first, e.first);
      o.held = o.held || e.held;
    }
    o.end = i;
    // Held by nodes that do not read it, read by none: no holder, not counted; its holders
    // drop it.
    if (o.total_freq > 0) objects.push_back(o);
  }
  // Objects a reader holds already go first, so that their holders' budgets keep them before
  // any other object takes the room (a restarted cluster reads again only what no node held).
  std::sort(objects.begin(), objects.end(), [](const Object& a, const Object& b) {
    if (a.held != b.held) return a.held;
    if (a.total_freq != b.total_freq) return a.total_freq > b.total_freq;
    if (a.first != b.first) return a.first < b.first;
    return a.key_hash < b.key_hash;
  });
  std::vector<uint64_t> budget(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) budget[p] = parts[p].part->budget;
  std::vector<uint32_t> candidates;
  for (const Object& o : objects) {
    ++out.totals.objects;
    out.totals.bytes += o.bytes;
    candidates.clear();
    for (uint32_t i = o.begin; i < o.end; ++i) candidates.push_back(i);
    auto entry = [&](uint32_t i) -> const PartEntry& {
      return parts[reads[i].part].part->entries[reads[i].entry];
    };
    auto freq = [&](uint32_t i) { return entry(i).freq; };
    std::sort(candidates.begin(), candidates.end(), [&](uint32_t a, uint32_t b) {
      if (entry(a).held != entry(b).held) return entry(a).held;
      if (freq(a) != freq(b)) return freq(a) > freq(b);
      const uint64_t la = budget[reads[a].part], lb = budget[reads[b].part];
      if (la != lb) return la > lb;
      return turn(parts[reads[a].part].rank) < turn(parts[reads[b].part].rank);
    });
    int holder = kNoHolder;
    for (uint32_t i : candidates) {
      uint64_t& left = budget[reads[i].part];
      if (left > 0) {  // the last object may overshoot: see holders.h
        left = left > o.bytes ? left - o.bytes : 0;
        holder = parts[reads[i].part].rank;
        break;
      }
    }
    if (holder == kNoHolder) {
      out.totals.predicted_backing_bytes += o.bytes * o.total_freq;
      continue;
    }
    ++out.totals.held_objects;
    out.totals.held_bytes += o.bytes;
    out.totals.predicted_backing_bytes += o.bytes;
    for (uint32_t i = o.begin; i < o.end; ++i) {
      out.assignments[reads[i].part].holder[reads[i].entry] = holder;
    }
  }
  // The holder's entries carry the object's cluster-wide first read, in entry order.
  std::vector<uint32_t> first_of(reads.size());
  for (const Object& o : objects) {
    for (uint32_t i = o.begin; i < o.end; ++i) first_of[i] = o.first;
  }
  std::vector<std::vector<uint32_t>> first_by_entry(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    first_by_entry[p].resize(parts[p].part->entries.size());
  }
  for (uint32_t i = 0; i < reads.size(); ++i) {
    first_by_entry[reads[i].part][reads[i].entry] = first_of[i];
  }
  for (size_t p = 0; p < parts.size(); ++p) {
    Assignment& a = out.assignments[p];
    a.totals = out.totals;
    for (size_t e = 0; e < a.holder.size(); ++e) {
      if (a.holder[e] == parts[p].rank) a.first.push_back(first_by_entry[p][e]);
    }
  }
  return out;
}

void FillTiers(Plan& plan, const PlacementLimits& limits, const std::vector<uint32_t>& ordered,
               LocalPlacement* out) {
  std::vector<uint64_t> used(limits.tier_capacity.size(), 0);
  for (uint32_t id : ordered) {
    PlanObject& f = plan.objects[id];
    for (size_t t = 0; t < used.size(); ++t) {
      if (used[t] + f.bytes <= limits.tier_capacity[t]) {
        used[t] += f.bytes;
        f.place = Placement::Tier(t);
        plan.tier_order[t].push_back(id);
        ++out->owned_files;
        out->owned_bytes += f.bytes;
        break;
      }
    }
  }
}

LocalPlacement ApplyHolderList(Plan& plan, const PlacementLimits& limits,
                               const std::vector<int>& holder, const std::vector<uint32_t>& first,
                               int rank) {
  LocalPlacement out;
  const size_t ntiers = limits.tier_capacity.size();
  std::vector<uint32_t> mine, spare;
  // An object read here and not held here: from its holder, or from the backing store.
  auto elsewhere = [&](uint32_t id) {
    PlanObject& f = plan.objects[id];
    if (f.freq == 0) return;  // not read here
    if (f.bytes > limits.staging_capacity) f.place = kDirect;
    if (holder[id] != kNoHolder) {
      if (f.place == kStaging) f.place = kPeer;
      ++out.from_peers_files;
      out.from_peers_bytes += f.bytes;
      ++out.from_peer_files[holder[id]];
    } else {
      ++out.unowned_files;
      out.unowned_bytes += f.bytes;
    }
  };
  for (uint32_t id = 0; id < plan.objects.size(); ++id) {
    PlanObject& f = plan.objects[id];
    f.place = kStaging;
    if (holder[id] == rank && (f.freq > 0 || f.held)) {
      mine.push_back(id);
    } else if (f.held) {
      spare.push_back(id);  // decided below, once the room left is known
    } else {
      elsewhere(id);
    }
  }
  std::sort(mine.begin(), mine.end(), [&](uint32_t a, uint32_t b) {
    const PlanObject& x = plan.objects[a];
    const PlanObject& y = plan.objects[b];
    if (x.freq != y.freq) return x.freq > y.freq;
    if (first[a] != first[b]) return first[a] < first[b];
    return x.key < y.key;
  });
  plan.tier_order.assign(ntiers, {});
  // Given more than the tiers hold (the budgets' slack): what they hold already is kept first,
  // so that no object on disk is dropped and read again for one given anew.
  const uint64_t room =
      std::accumulate(limits.tier_capacity.begin(), limits.tier_capacity.end(), uint64_t{0});
  uint64_t given = 0;
  for (uint32_t id : mine) given += plan.objects[id].bytes;
  std::vector<uint32_t> kept = mine;
  if (given > room) {
    std::vector<uint32_t> by_keep = mine;
    std::stable_partition(by_keep.begin(), by_keep.end(),
                          [&](uint32_t id) { return plan.objects[id].held; });
    std::vector<bool> keep(plan.objects.size(), false);
    uint64_t taken = 0;
    for (uint32_t id : by_keep) {
      if (taken + plan.objects[id].bytes > room) continue;
      taken += plan.objects[id].bytes;
      keep[id] = true;
    }
    kept.clear();
    for (uint32_t id : mine) {  // in the frequency order above
      if (keep[id]) kept.push_back(id);
    }
  }
  FillTiers(plan, limits, kept, &out);
  for (uint32_t id : kept) {
    const PlanObject& f = plan.objects[id];
    if (f.freq > 0 || !f.place.InTier()) continue;
    ++out.kept_unread_files;
    out.kept_unread_bytes += f.bytes;
  }
  for (uint32_t id : mine) {
    PlanObject& f = plan.objects[id];
    if (f.place.InTier()) continue;
    if (f.freq == 0) continue;  // held for peers and no room: dropped, not read here
    // Given beyond this node's capacity (the budgets' slack): read like an unheld object.
    if (f.bytes > limits.staging_capacity) f.place = kDirect;
    ++out.unowned_files;
    out.unowned_bytes += f.bytes;
  }
  // What the tiers hold and the placement gives another node or none stays in the room left,
  // read here first (most read, then earliest), then the rest: no read to keep it, and a
  // later placement (a restart) finds it.
  std::vector<uint64_t> used(ntiers, 0);
  for (size_t t = 0; t < ntiers; ++t) {
    for (uint32_t id : plan.tier_order[t]) used[t] += plan.objects[id].bytes;
  }
  std::sort(spare.begin(), spare.end(), [&](uint32_t a, uint32_t b) {
    const PlanObject& x = plan.objects[a];
    const PlanObject& y = plan.objects[b];
    if (x.freq != y.freq) return x.freq > y.freq;
    if (x.first != y.first) return x.first < y.first;
    return x.key < y.key;
  });
  for (uint32_t id : spare) {
    PlanObject& f = plan.objects[id];
    size_t t = 0;
    while (t < ntiers && used[t] + f.bytes > limits.tier_capacity[t]) ++t;
    if (t == ntiers) {
      elsewhere(id);
      continue;
    }
    used[t] += f.bytes;
    f.place = Placement::Tier(t);
    plan.tier_order[t].push_back(id);
    ++out.owned_files;
    out.owned_bytes += f.bytes;
    ++out.spare_files;
    out.spare_bytes += f.bytes;
  }
  for (auto& ids : plan.tier_order) {
    std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
      return first[a] != first[b] ? first[a] < first[b] : a < b;
    });
  }
  return out;
}

}  // namespace clairfs::cluster
