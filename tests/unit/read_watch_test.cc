#include "cache/prefetch/read_watch.h"

#include <gtest/gtest.h>

#include <string>

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using Clock = ReadWatch::Clock;

ReadWatchOptions Options() {
  ReadWatchOptions o;
  o.no_plan_after = 10s;
  o.check_reads = 10;
  o.order_slack = 100;
  return o;
}

ReadWatch::Read Unplanned(bool have_plan) {
  return {.path = "x/stray.jpg", .have_plan = have_plan, .planned = false};
}

ReadWatch::Read Planned(uint64_t ahead) {
  return {.path = "a/f.jpg", .have_plan = true, .planned = true, .consumed = true, .ahead = ahead};
}

TEST(ReadWatch, ReadsWithNoPlanAreSaidOnceAfterTheGraceAndClearedByAPlan) {
  ReadWatch w(Options());
  const auto t0 = Clock::now();
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(w.Observe(Unplanned(false), t0 + i * 1s));
  auto said = w.Observe(Unplanned(false), t0 + 10s);
  ASSERT_TRUE(said);
  EXPECT_NE(said->find("6 files read in 10 s and no plan is registered"), std::string::npos)
      << *said;
  EXPECT_NE(said->find(".clairfs/manifest"), std::string::npos);
  EXPECT_FALSE(w.Observe(Unplanned(false), t0 + 20s));  // once
  ASSERT_EQ(w.Active().size(), 1u);
  EXPECT_EQ(w.Active()[0].kind, WatchKind::kNoPlan);
  w.PlanInstalled(true, "a/f0.jpg", t0 + 21s);
  EXPECT_TRUE(w.Active().empty());
}

TEST(ReadWatch, NoPlanWarningOff) {
  ReadWatchOptions o = Options();
  o.no_plan_after = 0ms;
  ReadWatch w(o);
  const auto t0 = Clock::now();
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(w.Observe(Unplanned(false), t0 + i * 1s));
  EXPECT_TRUE(w.Active().empty());
}

TEST(ReadWatch, ReadsOutsideThePlanNameTheStrayAndThePlansFirstFile) {
  ReadWatch w(Options());
  const auto t0 = Clock::now();
  w.PlanInstalled(true, "train/n01/a.jpg", t0);
  std::optional<std::string> said;
  for (int i = 0; i < 10; ++i) {
    said = w.Observe(i < 6 ? Unplanned(true) : Planned(0), t0);
    if (i < 9) {
      EXPECT_FALSE(said);
    }
  }
  ASSERT_TRUE(said);
  EXPECT_NE(said->find("6 of the first 10 files read since the plan was registered are not in it"),
            std::string::npos)
      << *said;
  EXPECT_NE(said->find("'x/stray.jpg'"), std::string::npos);
  EXPECT_NE(said->find("'train/n01/a.jpg'"), std::string::npos);
  EXPECT_EQ(w.Active().at(0).kind, WatchKind::kNotInPlan);
  // Judged once: later reads say nothing more, epochs appended keep the verdict.
  EXPECT_FALSE(w.Observe(Unplanned(true), t0));
  w.PlanInstalled(false, "train/n01/a.jpg", t0);
  EXPECT_EQ(w.Active().size(), 1u);
  // A registration of a new stream is judged anew and clears it.
  w.PlanInstalled(true, "train/n01/a.jpg", t0);
  EXPECT_TRUE(w.Active().empty());
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(w.Observe(Planned(i), t0));
  EXPECT_TRUE(w.Active().empty());
}

TEST(ReadWatch, ReadsFarFromThePositionAreAnotherOrder) {
  ReadWatch w(Options());
  const auto t0 = Clock::now();
  w.PlanInstalled(true, "a/f0.jpg", t0);
  std::optional<std::string> said;
  for (int i = 0; i < 10; ++i) said = w.Observe(i % 2 ? Planned(101) : Planned(100), t0);
  ASSERT_TRUE(said);
  EXPECT_NE(said->find("5 of the first 10 planned files"), std::string::npos) << *said;
  EXPECT_NE(said->find("more than 100 reads away"), std::string::npos);
  EXPECT_EQ(w.Active().at(0).kind, WatchKind::kOutOfOrder);
}

TEST(ReadWatch, AReaderWithinTheSlackFollowsThePlan) {
  ReadWatch w(Options());
  const auto t0 = Clock::now();
  w.PlanInstalled(true, "a/f0.jpg", t0);
  // Three of ten beyond the slack (loader workers racing) and a planned file with no position
  // left: under half.
  for (int i = 0; i < 10; ++i) {
    ReadWatch::Read r = Planned(i < 3 ? 500 : 3);
    if (i == 9) r.consumed = false;
    EXPECT_FALSE(w.Observe(r, t0));
  }
  EXPECT_TRUE(w.Active().empty());
}

}  // namespace
}  // namespace clairfs
