// CoordinatorRing: which node coordinates an object, computed by every node from the object's
// key and the set of live ranks alone, with no table exchanged (consistent hashing).
//
// Each rank owns kPointsPerRank points on a 64-bit hash ring; an object (by the 64-bit hash of
// its key, KeyHash) belongs to the rank of the first point at or after its hash, wrapping
// around. Every rank gets about 1/N of the objects (the spread of the shares with 128 points
// is a few percent: Share), and a rank that joins or leaves moves only the objects of its own
// points, so the other nodes' parts for the other coordinators stay the same.
//
// The coordinator of an object decides which node's tiers hold it (holders.h); it need not
// read it, hold it, or have registered a plan. The ring is not weighted by capacity: capacity
// enters where the holder is chosen, not where the choice is made.
//
// Immutable once built; copyable.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace clairfs::cluster {

// The 64-bit hash of an object key every node uses for coordination and parts (xxh3).
uint64_t KeyHash(std::string_view key);

class CoordinatorRing {
 public:
  static constexpr int kPointsPerRank = 128;

  CoordinatorRing() = default;  // empty: Coordinator() is -1
  // ranks: the live ranks; duplicates and order do not matter.
  explicit CoordinatorRing(std::vector<int> ranks);

  // The rank coordinating an object whose key hashes to h; -1 when the ring is empty.
  int Coordinator(uint64_t h) const;
  // The fraction of the hash space rank coordinates (0 when it is not on the ring).
  double Share(int rank) const;
  // The ranks on the ring, ascending.
  const std::vector<int>& ranks() const { return ranks_; }
  bool operator==(const CoordinatorRing& o) const { return ranks_ == o.ranks_; }

 private:
  std::vector<int> ranks_;
  std::vector<std::pair<uint64_t, int>> points_;  // (position, rank), ascending
};

}  // namespace clairfs::cluster
