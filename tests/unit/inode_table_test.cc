#include "fs/core/inode_table.h"

#include <gtest/gtest.h>

namespace clairfs {
namespace {

constexpr mode_t kReg = S_IFREG;
constexpr mode_t kDir = S_IFDIR;

TEST(InodeTable, SameObjectSameIdUntilForgotten) {
  InodeTable t;
  const uint64_t a = t.Acquire("d/a", 1, 100, kReg | 0644);
  EXPECT_GE(a, InodeTable::kFirstDynamicId);
  EXPECT_EQ(t.Acquire("d/a", 1, 100, kReg), a);
  std::string p;
  ASSERT_TRUE(t.Path(a, &p));
  EXPECT_EQ(p, "d/a");
  t.Forget(a, 1);
  EXPECT_TRUE(t.Path(a, &p));
  t.Forget(a, 1);
  EXPECT_FALSE(t.Path(a, &p));
  EXPECT_NE(t.Acquire("d/a", 1, 100, kReg), a);  // a new id after the kernel forgot the old one
}

TEST(InodeTable, NodeInfoNamesOnlyItsObject) {
  InodeTable t;
  const uint64_t a = t.Acquire("d/a", 7, 100, kReg | 0600);
  InodeTable::NodeInfo n;
  ASSERT_TRUE(t.Get(a, &n));
  EXPECT_EQ(n.path, "d/a");
  struct stat st {};
  st.st_dev = 7;
  st.st_ino = 100;
  st.st_mode = S_IFREG | 0755;  // permission bits are not identity
  EXPECT_TRUE(n.Names(st));
  st.st_ino = 101;
  EXPECT_FALSE(n.Names(st));
  st.st_ino = 100;
  st.st_dev = 8;
  EXPECT_FALSE(n.Names(st));
  st.st_dev = 7;
  st.st_mode = S_IFIFO | 0644;
  EXPECT_FALSE(n.Names(st));
}

TEST(InodeTable, HardLinkSharesOnlyWhenTheCallerCheckedIt) {
  InodeTable t;
  const uint64_t a = t.Acquire("d/a", 1, 100, kReg);
  uint64_t id = 0;
  InodeTable::NodeInfo known;
  ASSERT_TRUE(t.Keyed(1, 100, &id, &known));
  EXPECT_EQ(id, a);
  EXPECT_EQ(known.path, "d/a");
  // The caller found "d/a" still naming (1, 100): a real hard link shares the node, which
  // keeps its first path.
  EXPECT_EQ(t.Acquire("d/link", 1, 100, kReg, a), a);
  std::string p;
  ASSERT_TRUE(t.Path(a, &p));
  EXPECT_EQ(p, "d/a");
  t.Forget(a, 2);
  EXPECT_FALSE(t.Path(a, &p));
}

TEST(InodeTable, ReusedInodeNumberGetsANewNode) {
  InodeTable t;
  const uint64_t old_node = t.Acquire("old", 1, 100, kReg);
  // "old" was deleted and (1, 100) reused by "new": the caller did not vouch for the link.
  const uint64_t fresh = t.Acquire("new", 1, 100, kReg);
  EXPECT_NE(fresh, old_node);
  InodeTable::NodeInfo n;
  ASSERT_TRUE(t.Get(fresh, &n));
  EXPECT_EQ(n.path, "new");
  // The old node stays for the kernel's references, with its identity, but no longer keys.
  ASSERT_TRUE(t.Get(old_node, &n));
  EXPECT_EQ(n.path, "old");
  uint64_t id = 0;
  ASSERT_TRUE(t.Keyed(1, 100, &id, &n));
  EXPECT_EQ(id, fresh);
  EXPECT_EQ(t.Acquire("new", 1, 100, kReg), fresh);
  // Forgetting the superseded node leaves the new node's key alone.
  t.Forget(old_node, 1);
  EXPECT_FALSE(t.Get(old_node, &n));
  ASSERT_TRUE(t.Keyed(1, 100, &id, &n));
  EXPECT_EQ(id, fresh);
  EXPECT_EQ(t.Acquire("new", 1, 100, kReg), fresh);
  t.Forget(fresh, 3);
  EXPECT_FALSE(t.Keyed(1, 100, &id, &n));
  EXPECT_EQ(t.size(), 1u);  // the root only
}

TEST(InodeTable, StaleLinkClaimIsIgnored) {
  InodeTable t;
  const uint64_t a = t.Acquire("a", 1, 100, kReg);
  const uint64_t b = t.Acquire("b", 1, 100, kReg);  // supersedes a as the key's node
  ASSERT_NE(a, b);
  // A lookup that checked a's path before b took the key must not share a.
  const uint64_t c = t.Acquire("c", 1, 100, kReg, a);
  EXPECT_NE(c, a);
  EXPECT_NE(c, b);
}

TEST(InodeTable, SamePathOtherTypeIsANewNode) {
  InodeTable t;
  const uint64_t f = t.Acquire("x", 1, 100, kReg);
  const uint64_t d = t.Acquire("x", 1, 100, kDir);  // the inode number came back as a directory
  EXPECT_NE(f, d);
  InodeTable::NodeInfo n;
  ASSERT_TRUE(t.Get(d, &n));
  EXPECT_EQ(n.type, kDir);
  // Even a caller's link claim does not share a node of another type.
  EXPECT_NE(t.Acquire("y", 1, 100, kReg, d), d);
}

TEST(InodeTable, SameNumberOnAnotherDeviceIsAnotherObject) {
  InodeTable t;
  const uint64_t a = t.Acquire("a", 1, 100, kReg);
  const uint64_t b = t.Acquire("b", 2, 100, kReg);
  EXPECT_NE(a, b);
  EXPECT_EQ(t.Acquire("a", 1, 100, kReg), a);
  EXPECT_EQ(t.Acquire("b", 2, 100, kReg), b);
}

TEST(InodeTable, RootIsPermanent) {
  InodeTable t;
  std::string p = "x";
  ASSERT_TRUE(t.Path(InodeTable::kRootId, &p));
  EXPECT_EQ(p, "");
  EXPECT_EQ(t.Acquire("", 1, 2, kDir), InodeTable::kRootId);
  t.Forget(InodeTable::kRootId, 100);
  EXPECT_TRUE(t.Path(InodeTable::kRootId, &p));
  InodeTable::NodeInfo n;
  ASSERT_TRUE(t.Get(InodeTable::kRootId, &n));
  EXPECT_EQ(n.type, kDir);
}

TEST(InodeTable, SeenVersions) {
  InodeTable t;
  const uint64_t a = t.Acquire("a", 1, 5, kReg);
  const FileVersion v1{10, 1, 2, 5}, v2{10, 1, 3, 5};  // same size and mtime, new ctime
  t.Report(a, v1);
  InodeTable::Seen seen = t.SwapOpen(a, v1);
  EXPECT_EQ(seen.reported, v1);
  EXPECT_EQ(seen.opened, FileVersion{});
  seen = t.SwapOpen(a, v2);
  EXPECT_EQ(seen.reported, v1);
  EXPECT_EQ(seen.opened, v1);
  t.Report(a, v1);  // a getattr answered before the open raced past it
  seen = t.SwapOpen(a, v2);
  EXPECT_EQ(seen.reported, v1);
  EXPECT_EQ(seen.opened, v2);
  EXPECT_EQ(t.SwapOpen(12345, v1).opened, FileVersion{});  // unknown id
}

// A handle opened at v1 that reads after an open of v2 (which dropped the page cache) puts v1
// pages back: the open after it must learn so (older_pages) and not keep the cache.
TEST(InodeTable, OlderPagesAfterAnOverriddenHandleRead) {
  InodeTable t;
  const uint64_t a = t.Acquire("a", 1, 5, kReg);
  const FileVersion v1{10, 1, 2, 5}, v2{10, 1, 3, 5};
  const uint64_t before = t.OpenedVersionChanges();
  t.SwapOpen(a, v1);
  const uint64_t at_v1 = t.OpenedVersionChanges();
  EXPECT_EQ(at_v1, before + 1);  // {} -> v1
  t.SwapOpen(a, v1);
  EXPECT_EQ(t.OpenedVersionChanges(), at_v1);  // the same version again is no change
  EXPECT_FALSE(t.ServedOlder(a, v1));          // a read of the current version marks nothing
  EXPECT_FALSE(t.SeenOf(a).older_pages);
  t.SwapOpen(a, v2);
  EXPECT_EQ(t.OpenedVersionChanges(), at_v1 + 1);
  EXPECT_TRUE(t.ServedOlder(a, v1));  // the v1 handle read after the v2 open
  EXPECT_TRUE(t.SeenOf(a).older_pages);
  InodeTable::Seen seen = t.SwapOpen(a, v2);  // the next open sees it, and clears it
  EXPECT_TRUE(seen.older_pages);
  EXPECT_EQ(seen.opened, v2);
  EXPECT_FALSE(t.SeenOf(a).older_pages);
  EXPECT_FALSE(t.ServedOlder(12345, v1));  // unknown id: nothing
}

TEST(InodeTable, ManyFilesNoDescriptors) {
  InodeTable t;
  for (uint64_t i = 0; i < 100000; ++i) t.Acquire("f" + std::to_string(i), 1, i + 10, kReg);
  EXPECT_EQ(t.size(), 100001u);
}

// What fs/fresh/revalidate.h relies on: the newest node of a path, what the kernel was shown of it,
// the nodes held.
TEST(InodeTable, ByPathShownAndHeld) {
  InodeTable t;
  uint64_t id = 0;
  ASSERT_TRUE(t.ByPath("", &id));
  EXPECT_EQ(id, InodeTable::kRootId);
  EXPECT_FALSE(t.ByPath("d/a", &id));
  const uint64_t a = t.Acquire("d/a", 1, 100, kReg);
  ASSERT_TRUE(t.ByPath("d/a", &id));
  EXPECT_EQ(id, a);
  InodeTable::Shown shown;
  ASSERT_TRUE(t.ShownOf(a, &shown));
  EXPECT_FALSE(shown.known);  // no reply with attributes yet
  struct stat st {};
  st.st_mode = kReg | 0640;
  st.st_uid = 7;
  st.st_size = 5;
  st.st_ino = 100;
  t.Report(a, st);
  ASSERT_TRUE(t.ShownOf(a, &shown));
  EXPECT_TRUE(shown.known);
  EXPECT_EQ(shown.mode, kReg | 0640);
  EXPECT_EQ(shown.uid, 7u);
  EXPECT_EQ(shown.seen.reported, VersionOf(st));
  t.Revalidated(a, nullptr, true);
  ASSERT_TRUE(t.ShownOf(a, &shown));
  EXPECT_TRUE(shown.gone);
  t.Report(a, st);  // the kernel asked again: compared again
  ASSERT_TRUE(t.ShownOf(a, &shown));
  EXPECT_FALSE(shown.gone);
  // A reply of another ctime alone (a rewrite that put size and mtime back, a chmod): the
  // kernel keeps its pages, so the version they are of stays recorded; the mode is new.
  struct stat same = st;
  same.st_ctim.tv_sec += 5;
  same.st_mode = kReg | 0600;
  t.Report(a, same);
  ASSERT_TRUE(t.ShownOf(a, &shown));
  EXPECT_EQ(shown.seen.reported, VersionOf(st));
  EXPECT_EQ(shown.mode, kReg | 0600);
  // Another size or mtime: the kernel drops the pages, and the new version is recorded.
  struct stat grown = same;
  grown.st_size = 6;
  t.Report(a, grown);
  ASSERT_TRUE(t.ShownOf(a, &shown));
  EXPECT_EQ(shown.seen.reported, VersionOf(grown));
  t.Report(a, st);  // back to the first (size 5): recorded
  // A new object at the path (the inode number reused) supersedes a in the path index.
  const uint64_t b = t.Acquire("d/b", 1, 200, kReg);
  t.Forget(b, 1);
  const uint64_t a2 = t.Acquire("d/a", 1, 200, kReg);
  EXPECT_NE(a2, a);
  ASSERT_TRUE(t.ByPath("d/a", &id));
  EXPECT_EQ(id, a2);
  std::vector<uint64_t> held;
  t.HeldIds(&held);
  EXPECT_EQ(held, (std::vector<uint64_t>{InodeTable::kRootId, a, a2}));
  t.Forget(a, 1);  // the superseded node goes: the path still leads to a2
  ASSERT_TRUE(t.ByPath("d/a", &id));
  EXPECT_EQ(id, a2);
  t.Forget(a2, 1);
  EXPECT_FALSE(t.ByPath("d/a", &id));
  EXPECT_FALSE(t.ByPath("d/b", &id));
}

}  // namespace
}  // namespace clairfs
