#include "cluster/placement.h"

#include <algorithm>
#include <numeric>
#include <string_view>

namespace clairfs::cluster {
namespace {

struct Reader {
  int rank;
  uint32_t freq;
  double first;
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
      a.readers.push_back({d->rank, f.freq, f.first});
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
  std::unordered_map<int, uint64_t> max_size;
  std::vector<int> ranks;
  for (const Digest* d : digests) {
    room[d->rank] = std::accumulate(d->tier_capacity.begin(), d->tier_capacity.end(), 0ull);
    max_size[d->rank] = d->max_file_size;
    ranks.push_back(d->rank);
  }
  std::sort(ranks.begin(), ranks.end());
  for (const Agg* a : order) {
    const uint64_t size = a->version.size;
    ++out.files;
    out.bytes += size;
    std::vector<Reader> readers = a->readers;
    std::sort(readers.begin(), readers.end(), [](const Reader& x, const Reader& y) {
      if (x.freq != y.freq) return x.freq > y.freq;
      if (x.first != y.first) return x.first < y.first;
      return x.rank < y.rank;
    });
    auto fits = [&](int r) { return room[r] >= size && size <= max_size[r]; };
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
  d.max_file_size = limits.max_file_size;
  const double n = std::max<size_t>(1, plan.sequence.size());
  for (const PlanFile& f : plan.files) {
    if (f.freq == 0) continue;
    d.files.push_back({f.path, f.version, f.freq, f.first / n});
  }
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
  std::vector<PlanFile> extra;
  for (const auto& [path, first_version] : owned) {
    if (plan.Find(path) == kNoPos) extra.push_back({std::string(path), first_version.second});
  }
  if (!extra.empty()) {
    std::sort(extra.begin(), extra.end(),
              [](const PlanFile& a, const PlanFile& b) { return a.path < b.path; });
    for (PlanFile& f : extra) plan.files.push_back(std::move(f));
    plan.Finalize();
  }

  const size_t ntiers = limits.tier_capacity.size();
  std::vector<uint32_t> mine;
  for (uint32_t id = 0; id < plan.files.size(); ++id) {
    PlanFile& f = plan.files[id];
    f.place = kStaging;
    auto it = owned.find(f.path);
    if (it != owned.end() && f.version == it->second.second) {
      mine.push_back(id);
      continue;
    }
    if (f.freq == 0) continue;
    if (f.version.size > limits.max_file_size || f.version.size > limits.staging_capacity) {
      f.place = kDirect;
    }
    auto o = placement.owner.find(f.path);
    if (o != placement.owner.end() && o->second != rank) {
      if (f.place == kStaging) f.place = kPeer;
      ++out.from_peers_files;
      out.from_peers_bytes += f.version.size;
      ++out.from_peer_files[o->second];
    } else {
      ++out.unowned_files;
      out.unowned_bytes += f.version.size;
    }
  }
  auto cluster_first = [&](uint32_t id) { return owned.at(plan.files[id].path).first; };
  std::sort(mine.begin(), mine.end(), [&](uint32_t a, uint32_t b) {
    const PlanFile& x = plan.files[a];
    const PlanFile& y = plan.files[b];
    if (x.freq != y.freq) return x.freq > y.freq;
    if (cluster_first(a) != cluster_first(b)) return cluster_first(a) < cluster_first(b);
    return x.path < y.path;
  });
  std::vector<uint64_t> used(ntiers, 0);
  plan.tier_order.assign(ntiers, {});
  for (uint32_t id : mine) {
    PlanFile& f = plan.files[id];
    for (size_t t = 0; t < ntiers; ++t) {
      if (used[t] + f.version.size <= limits.tier_capacity[t]) {
        used[t] += f.version.size;
        f.place = Placement::Tier(t);
        plan.tier_order[t].push_back(id);
        ++out.owned_files;
        out.owned_bytes += f.version.size;
        break;
      }
    }
    if (f.place == kStaging && f.freq > 0 &&
        (f.version.size > limits.max_file_size || f.version.size > limits.staging_capacity)) {
      f.place = kDirect;
    }
  }
  for (auto& ids : plan.tier_order) {
    std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
      return cluster_first(a) != cluster_first(b) ? cluster_first(a) < cluster_first(b) : a < b;
    });
  }
  return out;
}

}  // namespace clairfs::cluster
