// PageVersions: the rules that keep a read() in no-open mode from getting pages of two versions
// (fs/page_versions.h). Times are given, so the grace is tested without waiting.
#include "fs/page_versions.h"

#include <gtest/gtest.h>

namespace clairfs {
namespace {

using Verdict = PageVersions::Verdict;
constexpr int64_t kGrace = 100;

FileVersion V(int64_t ctime) {
  FileVersion v;
  v.size = 4096;
  v.mtime_ns = ctime;
  v.ctime_ns = ctime;
  v.ino = 7;
  return v;
}

TEST(PageVersions, OneVersionIsServedFreely) {
  PageVersions p(kGrace);
  EXPECT_EQ(p.Serve(1, V(1), 0), Verdict::kServe);
  EXPECT_EQ(p.Serve(1, V(1), 1), Verdict::kServe);
  EXPECT_EQ(p.Serve(2, V(2), 1), Verdict::kServe);  // nodes are apart
  EXPECT_EQ(p.size(), 2u);
}

TEST(PageVersions, AnotherVersionWaitsForADropAndTheGrace) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), 0), Verdict::kServe);
  // The kernel may hold pages of version 1: version 2 is refused, the first refusal asks for
  // the drop, the others while it runs do not.
  EXPECT_EQ(p.Serve(1, V(2), 10), Verdict::kRefuseDrop);
  const uint64_t ticket = p.DropBegin(1);
  EXPECT_EQ(p.Serve(1, V(2), 11), Verdict::kRefuse);
  p.DropDone(1, ticket, 20);
  // Dropped, but a read() that held old pages may still be copying them: the grace.
  EXPECT_EQ(p.Serve(1, V(2), 20 + kGrace - 1), Verdict::kRefuse);
  EXPECT_EQ(p.Serve(1, V(2), 20 + kGrace), Verdict::kServe);
  // Now the pages are of version 2; version 1 (a reader still bound to it) is the other one.
  EXPECT_EQ(p.Serve(1, V(1), 500), Verdict::kRefuseDrop);
  EXPECT_EQ(p.Serve(1, V(2), 501), Verdict::kServe);
}

TEST(PageVersions, ADropBegunBeforeTheLastServedPageClearsNothing) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), 0), Verdict::kServe);
  const uint64_t early = p.DropBegin(1);
  ASSERT_EQ(p.Serve(1, V(1), 5), Verdict::kServe);  // a page served while the drop ran
  p.DropDone(1, early, 6);
  // That page may have been put in after the drop passed it: still held.
  EXPECT_EQ(p.Serve(1, V(2), 1000), Verdict::kRefuseDrop);
  const uint64_t later = p.DropBegin(1);
  p.DropDone(1, later, 1001);
  EXPECT_EQ(p.Serve(1, V(2), 1001 + kGrace), Verdict::kServe);
}

TEST(PageVersions, TheGraceCountsFromTheFirstDropThatClearedThePages) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), 0), Verdict::kServe);
  const uint64_t a = p.DropBegin(1);
  p.DropDone(1, a, 10);
  // Drops that follow (the backing watch drops at every write) do not push the grace back.
  const uint64_t b = p.DropBegin(1);
  p.DropDone(1, b, 10 + kGrace - 5);
  EXPECT_EQ(p.Serve(1, V(2), 10 + kGrace), Verdict::kServe);
}

TEST(PageVersions, AForgottenNodeHoldsNoPages) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), 0), Verdict::kServe);
  p.Forget(1);
  EXPECT_EQ(p.size(), 0u);
  EXPECT_EQ(p.Serve(1, V(2), 1), Verdict::kServe);
  // A drop of a node never served records nothing.
  p.DropDone(3, p.DropBegin(3), 2);
  EXPECT_EQ(p.size(), 1u);
}

}  // namespace
}  // namespace clairfs
