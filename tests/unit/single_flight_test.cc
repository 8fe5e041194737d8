#include "cache/prefetch/single_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

namespace clairfs {
namespace {

using Clock = std::chrono::steady_clock;

TEST(SingleFlight, OneLeaderAndEveryWaiterGetsItsResult) {
  SingleFlight sf;
  constexpr int kThreads = 16;
  std::atomic<int> leaders{0}, fetches{0}, correct{0};
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      sync.arrive_and_wait();
      auto [flight, leader] = sf.Join("k");
      if (leader) {
        ++leaders;
        ++fetches;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        auto b = Blob::Allocate(3, {3, 1});
        std::copy_n("abc", 3, b->mutable_data());
        b->Seal();
        sf.Finish("k", flight, BlobPtr(b));
      }
      auto r = SingleFlight::Wait(*flight, Clock::now() + std::chrono::seconds(5));
      if (r.ok() && std::string(r.value()->data(), 3) == "abc") ++correct;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(leaders.load(), 1);
  EXPECT_EQ(fetches.load(), 1);
  EXPECT_EQ(correct.load(), kThreads);
  EXPECT_EQ(sf.in_flight(), 0u);
}

TEST(SingleFlight, AfterFinishANewFlightStarts) {
  SingleFlight sf;
  auto [f1, l1] = sf.Join("k");
  ASSERT_TRUE(l1);
  sf.Finish("k", f1, Status::Error(Code::kIoError, "boom"));
  auto [f2, l2] = sf.Join("k");
  EXPECT_TRUE(l2);
  EXPECT_NE(f1, f2);
  auto r = SingleFlight::Wait(*f1, Clock::now());
  EXPECT_EQ(r.status().code(), Code::kIoError);
  sf.Finish("k", f2, Status::Error(Code::kIoError, "x"));
}

TEST(SingleFlight, WaitGivesUpAtTheDeadline) {
  SingleFlight sf;
  auto [flight, leader] = sf.Join("slow");
  const auto start = Clock::now();
  auto r = SingleFlight::Wait(*flight, start + std::chrono::milliseconds(50));
  EXPECT_EQ(r.status().code(), Code::kTimedOut);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(50));
  sf.Finish("slow", flight, Status::Error(Code::kUnavailable, "done"));
}

TEST(SingleFlight, WaitersGetTheSourceAndASecondFinishChangesNothing) {
  SingleFlight sf;
  auto [flight, leader] = sf.Join("k");
  ASSERT_TRUE(leader);
  auto b = Blob::Allocate(1, {1, 1});
  b->mutable_data()[0] = 'x';
  b->Seal();
  sf.Finish("k", flight, BlobPtr(b), FetchSource::Tier(1));
  // A late finisher (Stop finishing what it orphaned) must not replace the leader's result.
  sf.Finish("k", flight, Status::Error(Code::kUnavailable, "shutting down"));
  FetchSource source;
  auto r = SingleFlight::Wait(*flight, Clock::now(), &source);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(source, FetchSource::Tier(1));
}

}  // namespace
}  // namespace clairfs
