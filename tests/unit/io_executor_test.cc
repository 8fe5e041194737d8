#include "cache/backing/io_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Blocks the calls that wait on it until Open(); stands in for a stuck system call.
class Gate {
 public:
  void Wait() {
    std::unique_lock lock(mu_);
    entered_ += 1;
    entered_cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits (bounded) until n calls are blocked in Wait().
  bool WaitEntered(int n) {
    std::unique_lock lock(mu_);
    return entered_cv_.wait_for(lock, 10s, [&] { return entered_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable entered_cv_;
  bool open_ = false;
  int entered_ = 0;
};

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit = 10s) {
  const auto end = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

std::chrono::milliseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

Result<int> Blocked(const std::shared_ptr<Gate>& gate, int value) {
  gate->Wait();
  return value;
}

TEST(IoExecutor, ReturnsTheResultAndTheError) {
  IoExecutor io({});
  auto r = io.Run<int>("a", [](IoProgress&) -> Result<int> { return 42; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 42);
  auto e = io.Run<int>(
      "a", [](IoProgress&) -> Result<int> { return Status::Error(Code::kNotFound, "gone"); });
  EXPECT_EQ(e.status().code(), Code::kNotFound);
  auto x = io.Run<int>("a", [](IoProgress&) -> Result<int> { throw std::runtime_error("boom"); });
  EXPECT_EQ(x.status().code(), Code::kIoError);
  EXPECT_NE(x.status().message().find("boom"), std::string::npos);
}

TEST(IoExecutor, ManyCallersGetTheirOwnResults) {
  IoExecutor io({.timeout = 10s, .max_threads = 4});
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const int want = t * 1000 + i;
        auto r =
            io.Run<int>(std::to_string(want), [want](IoProgress&) -> Result<int> { return want; });
        if (!r.ok() || r.value() != want) wrong.fetch_add(1);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(io.threads(), 4);
}

TEST(IoExecutor, StuckCallTimesOutAndOnlyItsKeyFailsFast) {
  Stats stats;
  IoExecutor io({.timeout = 300ms, .max_threads = 8}, &stats);
  auto gate = std::make_shared<Gate>();
  auto dropped = std::make_shared<std::atomic<bool>>(false);
  // The stuck call's result owns something whose destruction the test can see.
  struct Marker {
    std::shared_ptr<std::atomic<bool>> flag;
    explicit Marker(std::shared_ptr<std::atomic<bool>> f) : flag(std::move(f)) {}
    Marker(Marker&& o) noexcept = default;
    ~Marker() {
      if (flag) flag->store(true);
    }
  };
  auto start = Clock::now();
  auto r = io.Run<Marker>("stuck", [gate, dropped](IoProgress&) -> Result<Marker> {
    gate->Wait();
    return Marker(dropped);
  });
  const auto took = Since(start);
  EXPECT_EQ(r.status().code(), Code::kTimedOut);
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 2300ms);
  EXPECT_EQ(io.stuck_threads(), 1);

  // The same key fails at once; another key is served while the first call is stuck.
  start = Clock::now();
  auto again = io.Run<int>("stuck", [](IoProgress&) -> Result<int> { return 1; });
  EXPECT_EQ(again.status().code(), Code::kTimedOut);
  EXPECT_LT(Since(start), 150ms);
  auto other = io.Run<int>("other", [](IoProgress&) -> Result<int> { return 7; });
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other.value(), 7);
  EXPECT_EQ(stats.errors.backing_timeout.load(), 2u);

  // When the stuck call returns, its result is dropped on the I/O thread and the key recovers.
  gate->Open();
  EXPECT_TRUE(WaitFor([&] { return io.stuck_threads() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return dropped->load(); }));
  auto later = io.Run<int>("stuck", [](IoProgress&) -> Result<int> { return 3; });
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later.value(), 3);
}

TEST(IoExecutor, ProgressExtendsTheDeadline) {
  IoExecutor io({.timeout = 300ms, .max_threads = 2});
  // Ten steps of 100 ms each: one second in all, each step well within the timeout.
  auto r = io.Run<int>("long", [](IoProgress& progress) -> Result<int> {
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(100ms);  // one step of simulated I/O
      progress.Touch();
    }
    return 10;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), 10);
}

TEST(IoExecutor, AllThreadsStuckFailsFastUntilOneReturns) {
  Stats stats;
  IoExecutor io({.timeout = 200ms, .max_threads = 2}, &stats);
  auto gate = std::make_shared<Gate>();
  std::vector<std::thread> callers;
  for (const char* key : {"k1", "k2"}) {
    callers.emplace_back([&io, gate, key] {
      auto r = io.Run<int>(key, [gate](IoProgress&) { return Blocked(gate, 1); });
      EXPECT_EQ(r.status().code(), Code::kTimedOut);
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(io.stuck_threads(), 2);
  EXPECT_EQ(io.threads(), 2);  // bounded: no thread was added for the stuck ones

  const auto start = Clock::now();
  auto r = io.Run<int>("k3", [](IoProgress&) -> Result<int> { return 3; });
  EXPECT_EQ(r.status().code(), Code::kTimedOut);
  EXPECT_NE(r.status().message().find("stalled"), std::string::npos);
  EXPECT_LT(Since(start), 150ms);
  EXPECT_EQ(stats.errors.backing_timeout.load(), 3u);

  gate->Open();
  EXPECT_TRUE(WaitFor([&] { return io.stuck_threads() == 0; }));
  auto ok = io.Run<int>("k3", [](IoProgress&) -> Result<int> { return 3; });
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(IoExecutor, QueuedCallTimesOutWhenNoThreadFreesUp) {
  IoExecutor io({.timeout = 200ms, .max_threads = 1});
  auto gate = std::make_shared<Gate>();
  std::thread first([&io, gate] {
    auto r = io.Run<int>("first", [gate](IoProgress&) { return Blocked(gate, 1); });
    EXPECT_EQ(r.status().code(), Code::kTimedOut);
  });
  ASSERT_TRUE(gate->WaitEntered(1));
  std::atomic<bool> ran{false};
  auto r = io.Run<int>("second", [&ran](IoProgress&) -> Result<int> {
    ran = true;
    return 2;
  });
  EXPECT_EQ(r.status().code(), Code::kTimedOut);
  EXPECT_NE(r.status().message().find("no I/O thread"), std::string::npos);
  first.join();
  gate->Open();
  EXPECT_TRUE(WaitFor([&] { return io.stuck_threads() == 0; }));
  EXPECT_FALSE(ran.load());  // a call whose caller left is never started
}

TEST(IoExecutor, StopAndDestructionDoNotWaitForAStuckCall) {
  auto gate = std::make_shared<Gate>();
  auto io = std::make_unique<IoExecutor>(IoOptions{.timeout = 60s, .max_threads = 4});
  // Warm an idle thread too, so Stop() has one to join and one to leave.
  ASSERT_TRUE(io->Run<int>("warm", [](IoProgress&) -> Result<int> { return 0; }).ok());
  Status waiter_status;
  std::thread waiter([&] {
    auto r = io->Run<int>("stuck", [gate](IoProgress&) { return Blocked(gate, 1); });
    waiter_status = r.status();
  });
  ASSERT_TRUE(gate->WaitEntered(1));
  auto start = Clock::now();
  io->Stop();
  waiter.join();
  EXPECT_LT(Since(start), 1000ms);
  EXPECT_EQ(waiter_status.code(), Code::kUnavailable);
  EXPECT_EQ(io->Run<int>("x", [](IoProgress&) -> Result<int> { return 0; }).status().code(),
            Code::kUnavailable);
  start = Clock::now();
  io.reset();  // the stuck thread keeps the executor's state alive by itself
  EXPECT_LT(Since(start), 1000ms);
  gate->Open();  // it returns into state it owns; under ASan a use-after-free would show here
  auto io2 = std::make_unique<IoExecutor>(IoOptions{.timeout = 60s, .max_threads = 1});
  ASSERT_TRUE(io2->Run<int>("y", [](IoProgress&) -> Result<int> { return 1; }).ok());
}

TEST(IoExecutor, PostRunsLaterWithoutWaitingAndSurvivesStop) {
  auto gate = std::make_shared<Gate>();
  auto ran = std::make_shared<std::atomic<int>>(0);
  auto io = std::make_unique<IoExecutor>(IoOptions{.timeout = 60s, .max_threads = 1});
  // A post that blocks (a close() on a stalled store) does not hold its poster.
  auto start = Clock::now();
  io->Post([gate, ran] {
    gate->Wait();
    ++*ran;
  });
  EXPECT_LT(Since(start), 500ms);
  ASSERT_TRUE(gate->WaitEntered(1));
  // The only thread is busy: a second post queues; a Poster outlives the executor.
  const IoExecutor::Poster post = io->poster();
  post([ran] { ++*ran; });
  EXPECT_EQ(ran->load(), 0);
  // Stop() neither waits for the running post nor drops the queued one: it runs detached.
  start = Clock::now();
  io->Stop();
  io.reset();
  EXPECT_LT(Since(start), 1000ms);
  EXPECT_TRUE(WaitFor([&] { return ran->load() == 1; }));
  // After Stop(), a post runs on a thread of its own: the caller goes on at once.
  auto gate2 = std::make_shared<Gate>();
  start = Clock::now();
  post([gate2, ran] {
    gate2->Wait();
    ++*ran;
  });
  EXPECT_LT(Since(start), 500ms);
  ASSERT_TRUE(gate2->WaitEntered(1));
  gate2->Open();
  gate->Open();
  EXPECT_TRUE(WaitFor([&] { return ran->load() == 3; }));
}

// A normal stop leaves no thread behind: a busy thread whose call ends within the grace, and
// the posted calls still queued, are waited for and joined (a daemon's exit then finds no
// thread holding the executor's state).
TEST(IoExecutor, StopJoinsThreadsThatEndWithinTheGrace) {
  auto gate = std::make_shared<Gate>();
  auto ran = std::make_shared<std::atomic<int>>(0);
  IoExecutor io(IoOptions{.timeout = 60s, .max_threads = 1});
  io.Post([gate, ran] {
    gate->Wait();
    ++*ran;
  });
  ASSERT_TRUE(gate->WaitEntered(1));
  io.Post([ran] { ++*ran; });  // queued behind the busy thread: run by Stop's runner
  gate->Open();                // the running call ends now, well within the grace
  const auto start = Clock::now();
  io.Stop();
  EXPECT_LT(Since(start), IoExecutor::kStopGrace + 500ms);
  EXPECT_EQ(ran->load(), 2);
  EXPECT_EQ(io.threads(), 0);
}

TEST(IoExecutor, AStalledStoreCostsLaterCallsOnlyTheStalledTimeout) {
  IoExecutor io({.timeout = 2s, .max_threads = 8, .stalled_timeout = 100ms});
  auto gate = std::make_shared<Gate>();
  // One stuck file among answering ones is not a stalled store.
  auto start = Clock::now();
  auto first = io.Run<int>("a", [gate](IoProgress&) { return Blocked(gate, 1); });
  EXPECT_EQ(first.status().code(), Code::kTimedOut);
  EXPECT_GE(Since(start), 2s);
  EXPECT_TRUE(io.stalled());
  // Every call on another key now waits only the short deadline...
  start = Clock::now();
  auto second = io.Run<int>("b", [gate](IoProgress&) { return Blocked(gate, 2); });
  EXPECT_EQ(second.status().code(), Code::kTimedOut);
  EXPECT_LT(Since(start), 1500ms);
  // ...until any call returns: the store answers again, and the full deadline is back.
  auto quick = io.Run<int>("c", [](IoProgress&) -> Result<int> { return 3; });
  EXPECT_TRUE(quick.ok()) << quick.status().ToString();
  EXPECT_FALSE(io.stalled());
  gate->Open();
  EXPECT_TRUE(WaitFor([&] { return io.stuck_threads() == 0; }));
  auto g2 = std::make_shared<Gate>();
  std::thread opener([g2] {
    g2->WaitEntered(1);
    std::this_thread::sleep_for(300ms);  // longer than stalled_timeout, well within timeout
    g2->Open();
  });
  auto slow = io.Run<int>("d", [g2](IoProgress&) { return Blocked(g2, 4); });
  opener.join();
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_EQ(slow.value(), 4);
}

}  // namespace
}  // namespace clairfs
