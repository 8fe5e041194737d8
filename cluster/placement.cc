#include "cluster/placement.h"

#include <algorithm>
#include <numeric>
#include <string_view>

#include "cache/base/object_key.h"

namespace clairfs::cluster {
namespace {

struct Reader {
  int rank;
  uint32_t freq;
  double first;
  uint64_t spread;  // the tie-break after first: the rank rotated by the key's hash
};

struct Agg {
  std::string_view path;
  FileVersion version;
  uint64_t total_freq = 0;
  double first = 2;  // earliest first read over the readers
  std::vector<Reader> readers;
};

std::unordered_map<std::string_view, Agg> Aggregate(const std::vector<const Digest*>& digests) {
  std::unordered_map<std::string_view, Agg> files;
  for (const Digest* d : digests) {
    for (const DigestFile& f : d->files) {
      Agg& a = files[f.path];
      if (a.readers.empty()) {
        a.path = f.path;
        a.version = f.version;
      }
      a.total_freq += f.freq;
      a.first = std::min(a.first, f.first);
      a.readers.push_back({d->rank, f.freq, f.first, 0});
    }
  }
  return files;
}

}  // namespace

ClusterPlacement PlaceCluster(const std::vector<const Digest*>& digests) {
  ClusterPlacement out;
  auto files = Aggregate(digests);
  std::vector<const Agg*> order;
  order.reserve(files.size());
  for (auto& [path, a] : files) order.push_back(&a);
  std::sort(order.begin(), order.end(), [](const Agg* x, const Agg* y) {
    if (x->total_freq != y->total_freq) return x->total_freq > y->total_freq;
    if (x->first != y->first) return x->first < y->first;
    return x->path < y->path;
  });
  std::unordered_map<int, uint64_t> room;
  std::vector<int> ranks;
  for (const Digest* d : digests) {
    room[d->rank] = std::accumulate(d->tier_capacity.begin(), d->tier_capacity.end(), 0ull);
    ranks.push_back(d->rank);
  }
  std::sort(ranks.begin(), ranks.end());
  for (const Agg* a : order) {
    const uint64_t size = ObjectBytes(a->path, a->version);
    ++out.files;
    out.bytes += size;
    std::vector<Reader> readers = a->readers;
    const uint64_t h = HashBytes(a->path.data(), a->path.size());
    for (Reader& rd : readers)
      rd.spread = static_cast<uint64_t>(rd.rank) * 0x9E3779B97F4A7C15ull ^ h;
    std::sort(readers.begin(), readers.end(), [](const Reader& x, const Reader& y) {
      if (x.freq != y.freq) return x.freq > y.freq;
      if (x.first != y.first) return x.first < y.first;
      if (x.spread != y.spread) return x.spread < y.spread;
      return x.rank < y.rank;
    });
    auto fits = [&](int r) { return room[r] >= size; };
    int owner = -1;
    for (const Reader& rd : readers) {
      if (fits(rd.rank)) {
        owner = rd.rank;
        break;
      }
    }
    if (owner < 0) {
      for (int r : ranks) {
        if (fits(r) && (owner < 0 || room[r] > room[owner])) owner = r;
      }
    }
    if (owner < 0) {
      out.predicted_backing_bytes += size * a->total_freq;
      continue;
    }
    room[owner] -= size;
    out.owner.emplace(std::string(a->path), owner);
    ++out.owned_files;
    out.owned_bytes += size;
    out.predicted_backing_bytes += size;
  }
  return out;
}

Digest MakeDigest(const Plan& plan, const PlacementLimits& limits, int rank, uint64_t generation) {
  Digest d;
  d.rank = rank;
  d.generation = generation;
  d.tier_capacity = limits.tier_capacity;
  const uint64_t span = plan.span();
  for (const PlanObject& o : plan.objects) {
    if (o.freq == 0) continue;
    d.files.push_back({std::string(o.key), o.version, o.freq, QuantizeFirst(o.first, span)});
  }
  std::sort(d.files.begin(), d.files.end(),
            [](const DigestFile& a, const DigestFile& b) { return a.path < b.path; });
  return d;
}

LocalPlacement ApplyPlacement(Plan& plan, const PlacementLimits& limits,
                              const ClusterPlacement& placement,
                              const std::vector<const Digest*>& digests, int rank) {
  LocalPlacement out;
  // Cluster-wide first read and version of every file this node owns.
  std::unordered_map<std::string_view, std::pair<double, FileVersion>> owned;
  for (const Digest* d : digests) {
    for (const DigestFile& f : d->files) {
      auto it = placement.owner.find(f.path);
      if (it == placement.owner.end() || it->second != rank) continue;
      auto [pos, fresh] = owned.try_emplace(f.path, f.first, f.version);
      if (!fresh) pos->second.first = std::min(pos->second.first, f.first);
    }
  }
  // Files it owns but does not read join the plan; the path index is rebuilt after all are
  // appended, since appending may move the strings it refers to.
  std::vector<std::pair<std::string_view, FileVersion>> extra;
  for (const auto& [key, first_version] : owned) {
    if (plan.Find(key) == kNoPos) extra.emplace_back(key, first_version.second);
  }
  if (!extra.empty()) {
    std::sort(extra.begin(), extra.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, version] : extra) plan.AddObject(key, version);
    plan.Finalize();
  }

  const size_t ntiers = limits.tier_capacity.size();
  std::vector<uint32_t> mine;
  for (uint32_t id = 0; id < plan.objects.size(); ++id) {
    PlanObject& f = plan.objects[id];
    f.place = kStaging;
    auto it = owned.find(f.key);
    if (it != owned.end() && f.version == it->second.second) {
      mine.push_back(id);
      continue;
    }
    if (f.freq == 0) continue;
    if (f.bytes > limits.staging_capacity) f.place = kDirect;
    auto o = placement.owner.find(f.key);
    if (o != placement.owner.end() && o->second != rank) {
      if (f.place == kStaging) f.place = kPeer;
      ++out.from_peers_files;
      out.from_peers_bytes += f.bytes;
      ++out.from_peer_files[o->second];
    } else {
      ++out.unowned_files;
      out.unowned_bytes += f.bytes;
    }
  }
  auto cluster_first = [&](uint32_t id) { return owned.at(plan.objects[id].key).first; };
  std::sort(mine.begin(), mine.end(), [&](uint32_t a, uint32_t b) {
    const PlanObject& x = plan.objects[a];
    const PlanObject& y = plan.objects[b];
    if (x.freq != y.freq) return x.freq > y.freq;
    if (cluster_first(a) != cluster_first(b)) return cluster_first(a) < cluster_first(b);
    return x.key < y.key;
  });
  plan.tier_order.assign(ntiers, {});
  FillTiers(plan, limits, mine, &out);
  for (uint32_t id : mine) {
    PlanObject& f = plan.objects[id];
    if (f.place == kStaging && f.freq > 0 && f.bytes > limits.staging_capacity) f.place = kDirect;
  }
  for (auto& ids : plan.tier_order) {
    std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
      return cluster_first(a) != cluster_first(b) ? cluster_first(a) < cluster_first(b) : a < b;
    });
  }
  return out;
}

}  // namespace clairfs::cluster
