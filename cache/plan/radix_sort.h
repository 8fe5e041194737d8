// Sorting (key, id) pairs by key in linear time: a plan's placement orders a million objects
// by (reads, first reference), which std::sort did in about 0.1 s on one core.
//
// Contract: StableSortByKey orders v by .first ascending, and pairs with equal keys keep their
// relative order (a stable sort). Least significant byte first, one counting pass per byte of
// the key that is not the same in every pair, so keys that use few bits (positions below 2^24,
// one read count for every object) cost few passes. Allocates one buffer as large as v.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace clairfs {

template <class Key, class Value>
void StableSortByKey(std::vector<std::pair<Key, Value>>& v) {
  static_assert(std::is_unsigned_v<Key>);
  if (v.size() < 2) return;
  Key all_or = 0, all_and = static_cast<Key>(~Key{0});
  for (const auto& p : v) {
    all_or |= p.first;
    all_and &= p.first;
  }
  const Key varies = all_or ^ all_and;  // the bits that differ somewhere
  std::vector<std::pair<Key, Value>> other(v.size());
  for (unsigned shift = 0; shift < 8 * sizeof(Key); shift += 8) {
    if (((varies >> shift) & 0xFF) == 0) continue;  // one value of this byte: order unchanged
    std::array<size_t, 257> at{};
    for (const auto& p : v) ++at[((p.first >> shift) & 0xFF) + 1];
    for (size_t b = 1; b < at.size(); ++b) at[b] += at[b - 1];
    for (const auto& p : v) other[at[(p.first >> shift) & 0xFF]++] = p;
    v.swap(other);
  }
}

}  // namespace clairfs
