// KeyIndex against std::unordered_map: random inserts (also FindOrInsert), finds and erases (LIFO and arbitrary),
// through growth, with keys whose hashes collide in small tables.
#include "cache/key_index.h"

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

}  // namespace
}  // namespace clairfs
