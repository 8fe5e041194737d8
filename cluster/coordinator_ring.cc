#include "cluster/coordinator_ring.h"

#include <algorithm>

#include "cache/base/object.h"

namespace clairfs::cluster {
namespace {
// splitmix64's finalizer: spreads (rank, point) over the ring.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t KeyHash(std::string_view key) { return HashBytes(key.data(), key.size()); }

CoordinatorRing::CoordinatorRing(std::vector<int> ranks) : ranks_(std::move(ranks)) {
  std::sort(ranks_.begin(), ranks_.end());
  ranks_.erase(std::unique(ranks_.begin(), ranks_.end()), ranks_.end());
  points_.reserve(ranks_.size() * kPointsPerRank);
  for (int r : ranks_) {
    for (int i = 0; i < kPointsPerRank; ++i) {
      points_.emplace_back(Mix((static_cast<uint64_t>(r) << 32) | static_cast<uint32_t>(i)), r);
    }
  }
  std::sort(points_.begin(), points_.end());
}

int CoordinatorRing::Coordinator(uint64_t h) const {
  if (points_.empty()) return -1;
  auto it = std::lower_bound(points_.begin(), points_.end(), std::make_pair(h, -1));
  return it == points_.end() ? points_.front().second : it->second;
}

double CoordinatorRing::Share(int rank) const {
  if (points_.empty()) return 0;
  // A point owns the arc from its predecessor (exclusive) up to itself.
  long double owned = 0;
  for (size_t i = 0; i < points_.size(); ++i) {
    if (points_[i].second != rank) continue;
    const uint64_t prev = i == 0 ? points_.back().first : points_[i - 1].first;
    owned += static_cast<long double>(points_[i].first - prev);  // wraps for i == 0
  }
  if (points_.size() == static_cast<size_t>(kPointsPerRank)) return 1.0;  // one rank
  return static_cast<double>(owned / 18446744073709551616.0L);
}

}  // namespace clairfs::cluster
