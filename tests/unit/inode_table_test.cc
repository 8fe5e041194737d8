#include "fs/inode_table.h"

#include <gtest/gtest.h>

namespace clairfs {
namespace {

TEST(InodeTable, SameObjectSameIdUntilForgotten) {
  InodeTable t;
  const uint64_t a = t.Acquire("d/a", 1, 100);
  EXPECT_GE(a, InodeTable::kFirstDynamicId);
  EXPECT_EQ(t.Acquire("d/a", 1, 100), a);
  EXPECT_EQ(t.Acquire("d/hardlink", 1, 100), a);  // hard link: one node, first path kept
  std::string p;
  ASSERT_TRUE(t.Path(a, &p));
  EXPECT_EQ(p, "d/a");
  t.Forget(a, 2);
  EXPECT_TRUE(t.Path(a, &p));
  t.Forget(a, 1);
  EXPECT_FALSE(t.Path(a, &p));
  EXPECT_NE(t.Acquire("d/a", 1, 100), a);  // a new id after the kernel forgot the old one
}

TEST(InodeTable, RootIsPermanent) {
  InodeTable t;
  std::string p = "x";
  ASSERT_TRUE(t.Path(InodeTable::kRootId, &p));
  EXPECT_EQ(p, "");
  t.Forget(InodeTable::kRootId, 100);
  EXPECT_TRUE(t.Path(InodeTable::kRootId, &p));
}

TEST(InodeTable, OpenVersionSwap) {
  InodeTable t;
  const uint64_t a = t.Acquire("a", 1, 5);
  EXPECT_EQ(t.SwapOpenVersion(a, {10, 1}), FileVersion{});
  EXPECT_EQ(t.SwapOpenVersion(a, {11, 2}), (FileVersion{10, 1}));
}

TEST(InodeTable, ManyFilesNoDescriptors) {
  InodeTable t;
  for (uint64_t i = 0; i < 100000; ++i) t.Acquire("f" + std::to_string(i), 1, i + 10);
  EXPECT_EQ(t.size(), 100001u);
}

}  // namespace
}  // namespace clairfs
