// The staging tuner wired into the Prefetcher (cache/prefetch/autotune.h): a store whose every
// read takes a few milliseconds, read by two readers as fast as they can, with the real window,
// threads and fetch pool. The tuner's decisions show in progress(), as `stats` shows them.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "cache/prefetch/prefetcher.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using testing::MemBacking;
using testing::WaitFor;

constexpr int kFiles = 4000;
constexpr size_t kSize = 4096;

std::string Name(int i) { return "d/f" + std::to_string(i); }

class PrefetcherTuning : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < kFiles; ++i)
      backing_.AddFile(Name(i), std::string(kSize, char('a' + i % 26)));
    backing_.SetDelay(2ms);  // latency-bound: more threads fetch more
  }
  // No tier: every file is staged. Readers read the epoch in order until stop.
  void Run(const PrefetchOptions& o, const std::function<bool()>& until) {
    prefetcher_ = std::make_unique<Prefetcher>(backing_, std::vector<Tier*>{}, o, &stats_);
    prefetcher_->Start();
    // The window's settings show before the first plan too (stats right after the mount).
    const PrefetchProgress before = prefetcher_->progress();
    EXPECT_GT(before.staging_capacity, 0u);
    EXPECT_EQ(before.staging_threads, o.staging_threads);
    std::vector<int> all(kFiles);
    for (int i = 0; i < kFiles; ++i) all[i] = i;
    prefetcher_->Install(testing::PlanOfEpochs(backing_, {all}, Name));
    std::atomic<int> next{0};
    std::atomic<bool> stop{false};
    std::atomic<int> errors{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
      readers.emplace_back([&] {
        for (int i; !stop && (i = next++) < kFiles;) {
          auto res = prefetcher_->Open(Name(i), backing_.Version(Name(i)));
          if (!res.ok() || !res->blob || res->blob->size() != kSize) ++errors;
        }
      });
    }
    EXPECT_TRUE(WaitFor(until, 15s)) << "threads " << prefetcher_->progress().staging_threads;
    stop = true;
    for (auto& th : readers) th.join();
    EXPECT_EQ(errors, 0);
  }
  void TearDown() override {
    if (prefetcher_) prefetcher_->Stop();
  }
  MemBacking backing_;
  Stats stats_;
  std::unique_ptr<Prefetcher> prefetcher_;
};

TEST_F(PrefetcherTuning, SlowStoreGetsMoreThreadsAndTheWindowStaysWithinItsCap) {
  PrefetchOptions o;
  o.staging_capacity = 1 << 20;  // the cap: the tuner starts at it (a chunk is 4 MiB)
  o.chunk_size = o.record_chunk_size = 64 << 10;
  o.tune_start_capacity = 256 << 10;
  o.staging_threads = 1;
  o.tune_max_threads = 8;
  o.tune_period = 20ms;
  o.demand_threads = 2;
  std::atomic<uint64_t> most_bytes{0};
  Run(o, [&] {
    const PrefetchProgress p = prefetcher_->progress();
    most_bytes = std::max<uint64_t>(most_bytes, p.staging_bytes);
    EXPECT_LE(p.staging_capacity, o.staging_capacity);
    EXPECT_LE(p.staging_bytes, p.staging_capacity);
    return p.staging_threads > 1;
  });
  const PrefetchProgress p = prefetcher_->progress();
  EXPECT_GT(p.staging_threads, 1);
  EXPECT_LE(p.staging_threads, 8);
  EXPECT_GE(p.staging_capacity, 256u << 10);
  EXPECT_NE(p.tuner_state, TunerState::kStatic);
  EXPECT_GT(most_bytes.load(), 0u);
}

TEST_F(PrefetcherTuning, StaticSettingsStayAsConfigured) {
  PrefetchOptions o;
  o.staging_capacity = 1 << 20;
  o.chunk_size = o.record_chunk_size = 64 << 10;
  o.staging_threads = 3;
  o.tune_staging_threads = o.tune_staging_capacity = false;
  o.tune_period = 20ms;
  // Until a good part of the epoch was read: long enough for a tuner to have acted.
  Run(o, [&] { return prefetcher_->progress().position >= kFiles / 4; });
  const PrefetchProgress p = prefetcher_->progress();
  EXPECT_EQ(p.staging_threads, 3);
  EXPECT_EQ(p.staging_capacity, 1u << 20);
  EXPECT_EQ(p.tuner_state, TunerState::kStatic);
}

}  // namespace
}  // namespace clairfs
