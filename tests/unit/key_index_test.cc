// KeyIndex against std::unordered_map: random inserts (also FindOrInsert), finds and erases (LIFO
// and arbitrary), through growth, with keys whose hashes collide in small tables.
#include "cache/manifest/key_index.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace clairfs {
namespace {

TEST(KeyIndexTest, AgreesWithAMapThroughInsertsErasesAndGrowth) {
  std::mt19937 rng(3);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> keys;  // id -> key
    const auto key_of = [&](uint32_t id) { return std::string_view(keys[id]); };
    KeyIndex index;
    index.Reset(rng() % 4);
    std::unordered_map<std::string, uint32_t> model;
    for (int op = 0; op < 3000; ++op) {
      const std::string key = "k" + std::to_string(rng() % 400);
      const int what = rng() % 10;
      if (what == 0) {  // FindOrInsert: adds the key only when it is absent
        bool made = false;
        const uint32_t got = index.FindOrInsert(key, key_of, [&] {
          made = true;
          keys.push_back(key);
          return static_cast<uint32_t>(keys.size() - 1);
        });
        auto [it, fresh] = model.try_emplace(key, got);
        ASSERT_EQ(made, fresh) << key;
        ASSERT_EQ(got, it->second) << key;
      } else if (what < 5) {
        keys.push_back(key);
        const uint32_t id = static_cast<uint32_t>(keys.size() - 1);
        const uint32_t got = index.Insert(id, key_of);
        auto [it, fresh] = model.try_emplace(key, id);
        ASSERT_EQ(got, it->second) << key;
      } else if (what < 8) {
        auto it = model.find(key);
        ASSERT_EQ(index.Find(key, key_of), it == model.end() ? KeyIndex::kNone : it->second);
      } else {
        ASSERT_EQ(index.Erase(key, key_of), model.erase(key) == 1) << key;
      }
      ASSERT_EQ(index.size(), model.size());
    }
    for (const auto& [key, id] : model) ASSERT_EQ(index.Find(key, key_of), id);
  }
}

// Slots keep 32 bits of a key's hash and compare keys only when those match: two keys whose
// 32 bits are equal (found by a birthday search) must still be told apart by their bytes.
TEST(KeyIndexTest, KeysWithEqualHashBitsStayDistinct) {
  const auto bits = [](const std::string& k) {
    const uint64_t h = HashBytes(k.data(), k.size());
    return static_cast<uint32_t>(h ^ (h >> 32));
  };
  std::unordered_map<uint32_t, std::string> seen;
  std::vector<std::string> keys;
  for (uint64_t i = 0; keys.empty(); ++i) {
    std::string k = "train/n" + std::to_string(i) + ".JPEG";
    auto [it, fresh] = seen.try_emplace(bits(k), k);
    if (!fresh) keys = {it->second, k};
  }
  ASSERT_NE(keys[0], keys[1]);
  ASSERT_EQ(bits(keys[0]), bits(keys[1]));
  const auto key_of = [&](uint32_t id) { return std::string_view(keys[id]); };
  KeyIndex index;
  index.Reset(0);
  EXPECT_EQ(index.Insert(0, key_of), 0u);
  EXPECT_EQ(index.Find(keys[1], key_of), KeyIndex::kNone);
  EXPECT_EQ(index.Insert(1, key_of), 1u);
  EXPECT_EQ(index.size(), 2u);
  for (int i = 0; i < 100; ++i) {  // through growth, which places keys by the stored bits
    keys.push_back("other" + std::to_string(i));
    index.Insert(static_cast<uint32_t>(keys.size() - 1), key_of);
  }
  EXPECT_EQ(index.Find(keys[0], key_of), 0u);
  EXPECT_EQ(index.Find(keys[1], key_of), 1u);
  EXPECT_TRUE(index.Erase(keys[0], key_of));
  EXPECT_EQ(index.Find(keys[0], key_of), KeyIndex::kNone);
  EXPECT_EQ(index.Find(keys[1], key_of), 1u);
}

}  // namespace
}  // namespace clairfs
