// StableSortByKey against std::stable_sort: random keys of every width, few and many
// distinct values, equal keys (their order kept), constant bytes (skipped passes).
#include "cache/plan/radix_sort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace clairfs {
namespace {

template <class Key>
void Check(std::mt19937_64& rng, size_t n, Key mask, Key fixed) {
  std::vector<std::pair<Key, uint32_t>> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = {static_cast<Key>((rng() & mask) | fixed), uint32_t(rng())};
  auto want = v;
  std::stable_sort(want.begin(), want.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  StableSortByKey(v);
  ASSERT_EQ(v, want) << "n " << n << " mask " << uint64_t(mask);
}

TEST(RadixSortTest, AgreesWithStableSort) {
  std::mt19937_64 rng(5);
  for (size_t n : {0, 1, 2, 3, 100, 5000}) {
    Check<uint64_t>(rng, n, ~uint64_t{0}, 0);
    Check<uint64_t>(rng, n, 0xFFFFFF, uint64_t{0xFFFFFFF7} << 32);  // one count, 24-bit firsts
    Check<uint64_t>(rng, n, 0x3, 0);                                // many equal keys
    Check<uint64_t>(rng, n, 0xF0000000000000F0ull, 0x0100);         // bytes in between constant
    Check<uint32_t>(rng, n, ~uint32_t{0}, 0);
    Check<uint32_t>(rng, n, 0, 42);  // all keys equal: the order is the input's
  }
}

}  // namespace
}  // namespace clairfs
