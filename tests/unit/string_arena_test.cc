#include "cache/base/string_arena.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace clairfs {
namespace {

TEST(StringArena, StringsKeepTheirAddressesAndBytes) {
  StringArena a;
  std::vector<std::string> want;
  std::vector<std::string_view> got;
  for (int i = 0; i < 50'000; ++i) {  // several chunks
    want.push_back("dir" + std::to_string(i % 97) + "/file-" + std::to_string(i) + ".jpeg");
    got.push_back(a.Add(want.back()));
  }
  want.push_back(std::string(3 * StringArena::kChunk, 'x'));  // longer than a chunk
  got.push_back(a.Add(want.back()));
  want.push_back("");
  got.push_back(a.Add(""));
  want.push_back("after");
  got.push_back(a.Add("after"));
  size_t bytes = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << i;
    bytes += want[i].size();
  }
  EXPECT_EQ(a.bytes(), bytes);
  EXPECT_GE(a.capacity_bytes(), bytes);
  EXPECT_LE(a.capacity_bytes(), bytes + 8 * StringArena::kChunk);
}

TEST(StringArena, RollbackForgetsOnlyWhatCameAfterTheMark) {
  StringArena a;
  const std::string_view kept = a.Add("kept");
  const StringArena::Mark m = a.mark();
  for (int i = 0; i < 20'000; ++i) a.Add("temporary string number " + std::to_string(i));
  a.Rollback(m);
  EXPECT_EQ(a.bytes(), 4u);
  EXPECT_EQ(kept, "kept");
  const std::string_view next = a.Add("next");
  EXPECT_EQ(next.data(), kept.data() + 4);  // the space after the mark is used again
  EXPECT_EQ(kept, "kept");
  EXPECT_EQ(next, "next");
}

}  // namespace
}  // namespace clairfs
