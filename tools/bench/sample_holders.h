// The node that holds each dataset index under clairfs.locality.LocalitySampler: keyed by the
// nodes' names (consistent hashing on a ring) or, with no names, numbered (splitmix64 mod N).
// The same function as python/clairfs/locality.py's holders and NodeRing, bit for bit
// (tests/python/test_locality.py checks the cluster simulator's assignment against it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace clairfs::bench {

inline uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a (64 bits) of a name's bytes: the key its points on the ring are drawn from.
inline uint64_t NameKey(const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

class SampleHolders {
 public:
  static constexpr uint64_t kVnodes = 4096;  // points per node: locality.py's VNODES

  // names empty: `nodes` numbered nodes. Otherwise names[p] is node p (nodes is its size;
  // names distinct): node s has the points SplitMix64(NameKey(s) + v * 0x9E3779B97F4A7C15),
  // v < kVnodes, equal points ordered by name.
  SampleHolders(int nodes, const std::vector<std::string>& names) : nodes_(nodes) {
    if (names.empty()) return;
    std::vector<std::pair<std::string, uint32_t>> canon;  // names sorted (bytewise), place
    for (uint32_t p = 0; p < names.size(); ++p) canon.emplace_back(names[p], p);
    std::sort(canon.begin(), canon.end());
    std::vector<std::pair<uint64_t, uint32_t>> ring;  // (point, index in canon)
    ring.reserve(canon.size() * kVnodes);
    for (uint32_t c = 0; c < canon.size(); ++c) {
      const uint64_t key = NameKey(canon[c].first);
      for (uint64_t v = 0; v < kVnodes; ++v)
        ring.emplace_back(SplitMix64(key + v * 0x9E3779B97F4A7C15ull), c);
    }
    std::sort(ring.begin(), ring.end());
    points_.reserve(ring.size());
    owner_.reserve(ring.size());
    for (const auto& [point, c] : ring) {
      points_.push_back(point);
      owner_.push_back(canon[c].second);
    }
  }

  // The node (0 .. nodes - 1) that holds dataset index i.
  uint32_t operator()(uint64_t i) const {
    const uint64_t h = SplitMix64(i);
    if (points_.empty()) return static_cast<uint32_t>(h % static_cast<uint64_t>(nodes_));
    auto at = std::lower_bound(points_.begin(), points_.end(), h);
    if (at == points_.end()) at = points_.begin();
    return owner_[at - points_.begin()];
  }

 private:
  int nodes_;
  std::vector<uint64_t> points_;  // the ring, ascending
  std::vector<uint32_t> owner_;   // the node of each point
};

}  // namespace clairfs::bench
