// PageVersions: the rules that keep a read() in no-open mode from getting pages of two versions
// (fs/core/page_versions.h). Times are given, so the grace is tested without waiting.
#include "fs/core/page_versions.h"

#include <gtest/gtest.h>

namespace clairfs {
namespace {

using Verdict = PageVersions::Verdict;
constexpr int64_t kGrace = 100;
constexpr uint32_t kA = 10, kB = 11, kC = 12;  // reader threads

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
  EXPECT_EQ(p.Serve(1, V(1), kA, true, 0), Verdict::kServe);
  EXPECT_EQ(p.Serve(1, V(1), kB, false, 1), Verdict::kServe);
  EXPECT_EQ(p.Serve(2, V(2), kA, false, 1), Verdict::kServe);  // nodes are apart
  EXPECT_EQ(p.size(), 2u);
}

TEST(PageVersions, AnotherVersionWaitsForADropAndTheGrace) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), kA, true, 0), Verdict::kServe);
  // The kernel may hold pages of version 1: a READ of version 2 in the middle of a read() is
  // refused; the first refusal asks for the drop, the others while it runs do not.
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 10), Verdict::kRefuseDrop);
  const uint64_t ticket = p.DropBegin(1);
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 11), Verdict::kRefuse);
  p.DropDone(1, ticket, 20);
  // Dropped, but a read() that held old pages may still be copying them: the grace.
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 20 + kGrace - 1), Verdict::kRefuse);
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 20 + kGrace), Verdict::kServe);
  // Now the pages are of version 2; version 1 (a reader still bound to it) is the other one.
  EXPECT_EQ(p.Serve(1, V(1), kB, false, 500), Verdict::kRefuseDrop);
  EXPECT_EQ(p.Serve(1, V(2), kB, false, 501), Verdict::kServe);
}

TEST(PageVersions, AReadOfTheFirstPageAloneIsServedAtOnce) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), kA, true, 0), Verdict::kServe);
  p.DropDone(1, p.DropBegin(1), 10);  // the backing watch saw the change
  // Not the first page alone (a readahead, or the middle of a read()): within the grace a
  // read() that copied old pages may get these pages next.
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 13), Verdict::kRefuse);
  // The first page alone: no read() that copied old pages needs it; its thread began after
  // the switch and is served from then on.
  EXPECT_EQ(p.Serve(1, V(2), kA, true, 14), Verdict::kServe);
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 15), Verdict::kServe);
  // Another thread in the middle of a read() is not, until the grace has passed since the
  // switch.
  EXPECT_EQ(p.Serve(1, V(2), kB, false, 16), Verdict::kRefuse);
  EXPECT_EQ(p.Serve(1, V(2), kB, false, 14 + kGrace), Verdict::kServe);
}

TEST(PageVersions, PagesPastTheFirstWaitWhileAThreadBegunBeforeTheSwitchReads) {
  // The pages a thread begun after the switch asks for go to the page cache, where another
  // thread's read() that copied old pages before the drop takes its next ones: within the
  // grace they are served only when no such thread read the node lately (within the grace
  // before the switch, or since).
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), kA, true, 0), Verdict::kServe);
  ASSERT_EQ(p.Serve(1, V(1), kB, false, 150), Verdict::kServe);
  p.DropDone(1, p.DropBegin(1), 160);
  EXPECT_EQ(p.Serve(1, V(2), kC, true, 200), Verdict::kServe);    // the switch
  EXPECT_EQ(p.Serve(1, V(2), kC, false, 201), Verdict::kRefuse);  // kB may hold old pages
  // kB reads the first page: its read() began after the switch. kA was last seen more than
  // the grace before it.
  EXPECT_EQ(p.Serve(1, V(2), kB, true, 202), Verdict::kServe);
  EXPECT_EQ(p.Serve(1, V(2), kC, false, 203), Verdict::kServe);
  EXPECT_EQ(p.Serve(1, V(2), kB, false, 204), Verdict::kServe);
  // A thread begun before the switch asks for a middle page (refused): from then on, not
  // even the threads begun after it get more than the first page, until the grace passed.
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 205), Verdict::kRefuse);
  EXPECT_EQ(p.Serve(1, V(2), kC, false, 206), Verdict::kRefuse);
  EXPECT_EQ(p.Serve(1, V(2), kC, true, 207), Verdict::kServe);
  EXPECT_EQ(p.Serve(1, V(2), kC, false, 200 + kGrace), Verdict::kServe);
}

TEST(PageVersions, TheLatestReadersAreKeptWhateverTheirNumber) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), 1, true, 0), Verdict::kServe);
  p.DropDone(1, p.DropBegin(1), 10);
  ASSERT_EQ(p.Serve(1, V(2), 1, true, 200), Verdict::kServe);  // the switch
  // More threads than are remembered read the first page after it, then one in the middle.
  for (uint32_t pid = 2; pid < 10; ++pid) {
    EXPECT_EQ(p.Serve(1, V(2), pid, true, 200 + pid), Verdict::kServe);
  }
  EXPECT_EQ(p.Serve(1, V(2), 1, false, 220), Verdict::kServe);
  EXPECT_EQ(p.Serve(1, V(2), 42, false, 221), Verdict::kRefuse);
  for (uint32_t pid = 2; pid < 10; ++pid) {
    EXPECT_EQ(p.Serve(1, V(2), pid, true, 222 + pid), Verdict::kServe);
  }
  EXPECT_EQ(p.Serve(1, V(2), 1, false, 240), Verdict::kRefuse);  // 42 is still remembered
}

TEST(PageVersions, TheFirstReadOfAReadDropsTheOthers) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), kA, true, 0), Verdict::kServe);
  // Not dropped yet: the caller drops every page but this READ's, then asks again.
  EXPECT_EQ(p.Serve(1, V(2), kB, true, 10), Verdict::kDropOthers);
  p.DropDone(1, p.DropBegin(1), 11);
  EXPECT_EQ(p.Serve(1, V(2), kB, true, 11), Verdict::kServe);
  // Another thread in the middle of a read() within the grace: refused.
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 12), Verdict::kRefuse);
}

TEST(PageVersions, ADropBegunBeforeTheLastServedPageClearsNothing) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), kA, true, 0), Verdict::kServe);
  const uint64_t early = p.DropBegin(1);
  ASSERT_EQ(p.Serve(1, V(1), kA, false, 5), Verdict::kServe);  // served while the drop ran
  p.DropDone(1, early, 6);
  // That page may have been put in after the drop passed it: still held.
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 1000), Verdict::kRefuseDrop);
  p.DropDone(1, p.DropBegin(1), 1001);
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 1001 + kGrace), Verdict::kServe);
}

TEST(PageVersions, TheGraceCountsFromTheFirstDropThatClearedThePages) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), kA, true, 0), Verdict::kServe);
  p.DropDone(1, p.DropBegin(1), 10);
  // Drops that follow (the backing watch drops at every write) do not push the grace back.
  p.DropDone(1, p.DropBegin(1), 10 + kGrace - 5);
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 10 + kGrace), Verdict::kServe);
}

TEST(PageVersions, AForgottenNodeHoldsNoPages) {
  PageVersions p(kGrace);
  ASSERT_EQ(p.Serve(1, V(1), kA, true, 0), Verdict::kServe);
  p.Forget(1);
  EXPECT_EQ(p.size(), 0u);
  EXPECT_EQ(p.Serve(1, V(2), kA, false, 1), Verdict::kServe);
  // A drop of a node never served records nothing.
  p.DropDone(3, p.DropBegin(3), 2);
  EXPECT_EQ(p.size(), 1u);
}

}  // namespace
}  // namespace clairfs
