// Randomized stress of the prefetcher: 64 reader threads and a pusher (Adopt) while
// the plan is replaced or appended to every second, over a RAM and a RocksDB SSD tier small
// enough to fill and evict, and a backing store with random small delays and failing files.
//
// Checked: every byte served equals the file's content; no open waits past its deadline (and
// no thread hangs: the run has a watchdog); RSS stays within the tier capacities, the window
// and a margin; no descriptor leaks; after the last plan each tier holds only what that plan
// assigns to it or a faster tier.
//
// CLAIRFS_STRESS_SECONDS sets the duration (default 30 s, 20 s in a sanitizer build);
// CLAIRFS_STRESS_SEED replays a run (the seed is printed).
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/plan/merge.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ram_tier.h"
#include "cache/tiers/ssd_tier.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define CLAIRFS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define CLAIRFS_SANITIZED 1
#endif
#endif

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

#ifdef CLAIRFS_SANITIZED
constexpr int kDefaultSeconds = 20;
constexpr uint64_t kRssMargin = 1024ull << 20;  // shadow memory and allocator quarantine
constexpr auto kFetchTimeout = 10s;
#else
constexpr int kDefaultSeconds = 30;
constexpr uint64_t kRssMargin = 128ull << 20;  // RocksDB memtables, block cache, threads
constexpr auto kFetchTimeout = 3s;
#endif

constexpr int kFiles = 600;
constexpr int kReaders = 64;
constexpr uint64_t kRam = 512 << 10;
constexpr uint64_t kSsd = 1 << 20;
constexpr uint64_t kStaging = 256 << 10;
constexpr uint64_t kChunk = 8 << 10;  // files larger than this (two thirds) are chunked

std::string Name(int i) { return "d" + std::to_string(i % 7) + "/f" + std::to_string(i); }
// Bytes that differ per file and per offset, so a byte from another file or place shows.
std::string Content(uint64_t seed, int i) {
  std::mt19937_64 rng(seed * 1'000'003 + i);
  const size_t size = 1 + rng() % (24 << 10);
  std::string s(size, '\0');
  for (size_t k = 0; k < size; ++k) s[k] = static_cast<char>(rng());
  return s;
}
bool Fails(int i) { return i % 97 == 13; }  // the odd file whose reads fail

// MemBacking with a random small delay on every read and EIO for the failing files.
class JitterBacking final : public Backing {
 public:
  explicit JitterBacking(uint64_t seed) : seed_(seed) {}
  testing::MemBacking& mem() { return mem_; }
  Status Lstat(const std::string& path, struct stat* st) const override {
    return mem_.Lstat(path, st);
  }
  Result<std::string> ReadLink(const std::string& path) const override {
    return mem_.ReadLink(path);
  }
  Result<BlobPtr> Read(const std::string& path, ByteRange range) const override {
    thread_local std::mt19937 rng(
        static_cast<uint32_t>(seed_ ^ std::hash<std::thread::id>()(std::this_thread::get_id())));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    if (failing_.count(path)) return Status::FromErrno(EIO, path);
    return mem_.Read(path, range);
  }
  void AddFailing(const std::string& path) { failing_.insert(path); }

 private:
  const uint64_t seed_;
  testing::MemBacking mem_;
  std::set<std::string> failing_;  // set before any read
};

uint64_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

int OpenFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

int Seconds() {
  const char* s = std::getenv("CLAIRFS_STRESS_SECONDS");
  return s && std::atoi(s) > 0 ? std::atoi(s) : kDefaultSeconds;
}

uint64_t Seed() {
  const char* s = std::getenv("CLAIRFS_STRESS_SEED");
  return s ? std::strtoull(s, nullptr, 10) : std::random_device()();
}

TEST(PrefetcherStress, ReadersAcrossPlanChangesGetExactBytesWithoutHangsOrLeaks) {
  const uint64_t seed = Seed();
  const int seconds = Seconds();
  std::printf("stress: seed %llu, %d s (CLAIRFS_STRESS_SEED / CLAIRFS_STRESS_SECONDS)\n",
              static_cast<unsigned long long>(seed), seconds);
  std::fflush(stdout);

  JitterBacking backing(seed);
  std::vector<std::string> contents;
  for (int i = 0; i < kFiles; ++i) {
    contents.push_back(Content(seed, i));
    backing.mem().AddFile(Name(i), contents.back());
    if (Fails(i)) backing.AddFailing(Name(i));
  }
  std::vector<FileVersion> versions;
  for (int i = 0; i < kFiles; ++i) versions.push_back(backing.mem().Version(Name(i)));

  const int fds_before = OpenFds();
  const uint64_t rss_before = RssBytes();
  const uint64_t budget = rss_before + kRam + kSsd + kStaging + kRssMargin;
  uint64_t rss_peak = 0;

  testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  Stats stats;
  std::atomic<uint64_t> opens{0}, served{0}, wrong{0}, bad_errors{0}, timeouts{0}, late{0};
  std::atomic<int64_t> longest_ms{0};
  std::shared_ptr<const Plan> last_plan;
  {
    RamTier ram("ram", kRam);
    auto ssd = SsdTier::Open("ssd", dir.path(), kSsd);
    ASSERT_TRUE(ssd.ok()) << ssd.status().message();
    PrefetchOptions o;
    o.staging_capacity = kStaging;
    o.staging_threads = 2;
    o.tier_threads = {2, 2};
    o.demand_threads = 4;
    o.fetch_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kFetchTimeout);
    o.chunk_size = kChunk;  // the largest files are read in chunks
    Prefetcher prefetcher(backing, {&ram, ssd.value().get()}, o, &stats);

    std::mt19937_64 plan_rng(seed);
    // A random subset in random orders: 1-3 epochs, each a shuffle (files may repeat), as
    // stream `stream` of base (replaced, or extended by append).
    auto random_plan = [&](const Plan* base, const std::string& stream, bool append) {
      std::vector<int> subset;
      const double keep = std::uniform_real_distribution<>(0.05, 1.0)(plan_rng);
      for (int i = 0; i < kFiles; ++i) {
        if (std::bernoulli_distribution(keep)(plan_rng)) subset.push_back(i);
      }
      if (subset.empty()) subset.push_back(0);
      std::vector<std::vector<int>> epochs(1 + plan_rng() % 3, subset);
      for (auto& e : epochs) std::shuffle(e.begin(), e.end(), plan_rng);
      return testing::PlanOfEpochs(backing, epochs, Name, base, kChunk, stream,
                                   append ? StreamChange::kAppend : StreamChange::kReplace);
    };
    prefetcher.Install(random_plan(nullptr, "a", false));
    prefetcher.Start();

    std::atomic<bool> done{false};
    auto reader = [&](int r) {
      std::mt19937 rng(static_cast<uint32_t>(seed + 7919 * r));
      while (!done.load()) {
        // Mostly what the plan reads next (several readers share the front), sometimes any file.
        int i = static_cast<int>(rng() % kFiles);
        if (rng() % 5 != 0) {
          auto plan = prefetcher.plan();
          const PrefetchProgress progress = prefetcher.progress();
          if (plan && !plan->objects.empty() && !plan->streams.empty()) {
            // What some stream reads next; past the end of its access string: any planned
            // object, as a next epoch would.
            const PlanStream& s = plan->streams[rng() % plan->streams.size()];
            uint64_t pos = rng() % 64;
            for (const StreamProgress& sp : progress.streams) {
              if (sp.name == s.name) pos += sp.position;
            }
            const std::string_view path = pos < s.sequence.size()
                                              ? plan->objects[s.sequence[pos]].path()
                                              : plan->objects[rng() % plan->objects.size()].path();
            i = std::stoi(std::string(path.substr(path.find("/f") + 2)));
          }
        }
        const auto start = Clock::now();
        auto res = prefetcher.Open(Name(i), versions[i]);
        const auto took = Clock::now() - start;
        opens.fetch_add(1);
        const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
        int64_t prev = longest_ms.load();
        while (ms > prev && !longest_ms.compare_exchange_weak(prev, ms)) {
        }
        if (took > kFetchTimeout + 1s) late.fetch_add(1);
        if (!res.ok()) {
          const Code c = res.status().code();
          if (c == Code::kTimedOut) {
            timeouts.fetch_add(1);
          } else if (!(c == Code::kIoError && Fails(i))) {
            bad_errors.fetch_add(1);
            std::fprintf(stderr, "open %s: %s\n", Name(i).c_str(), res.status().ToString().c_str());
          }
          continue;
        }
        if (res->source == OpenResult::Source::kChunked) {
          // Chunk by chunk, as a reader of a big file does; each chunk's bytes must be exact.
          for (uint64_t off = 0; off < contents[i].size(); off += kChunk) {
            auto chunk = prefetcher.ReadChunk(Name(i), versions[i], off, rng() % 4 != 0);
            if (!chunk.ok()) {
              const Code c = chunk.status().code();
              if (c == Code::kTimedOut) {
                timeouts.fetch_add(1);
              } else if (!(c == Code::kIoError && Fails(i))) {
                bad_errors.fetch_add(1);
              }
              break;
            }
            if (!chunk->blob) continue;  // not planned: read directly by the caller
            served.fetch_add(1);
            const ByteRange r = chunk->range;
            if (Fails(i) || r.offset != off ||
                std::string_view(chunk->blob->data(), chunk->blob->size()) !=
                    std::string_view(contents[i]).substr(r.offset, r.length)) {
              wrong.fetch_add(1);
            }
          }
          continue;
        }
        if (!res->blob) continue;  // read directly by the caller
        served.fetch_add(1);
        if (Fails(i) || std::string_view(res->blob->data(), res->blob->size()) != contents[i]) {
          wrong.fetch_add(1);
        }
      }
    };
    // A peer pushing files (right bytes, as a peer would) into whatever the plan places.
    auto pusher = [&] {
      std::mt19937 rng(static_cast<uint32_t>(seed + 17));
      while (!done.load()) {
        const int i = static_cast<int>(rng() % kFiles);
        if (Fails(i)) continue;
        // A whole file, or one chunk of a chunked one.
        const uint64_t size = contents[i].size();
        const ByteRange r =
            size <= kChunk ? ByteRange::Whole()
                           : ChunkGrid(kChunk).Chunk(size, rng() % ((size + kChunk - 1) / kChunk));
        auto blob = backing.mem().Read(Name(i), r);
        if (blob.ok()) prefetcher.Adopt(ObjectKey(Name(i), r), blob.value());
        std::this_thread::sleep_for(1ms);
      }
    };
    std::vector<std::thread> threads;
    for (int r = 0; r < kReaders; ++r) threads.emplace_back(reader, r);
    threads.emplace_back(pusher);

    // The planner: a new plan every second, replacing (random epochs and subsets) or appending.
    const auto end = Clock::now() + std::chrono::seconds(seconds);
    int installs = 0, appends = 0;
    while (Clock::now() < end) {
      std::this_thread::sleep_for(1s);  // the pace of the test, not a synchronisation
      rss_peak = std::max(rss_peak, RssBytes());
      // One of three streams (jobs) replaced, extended or removed; the others stay.
      auto current = prefetcher.plan();
      const std::string stream(1, static_cast<char>('a' + plan_rng() % 3));
      const int at = current ? current->FindStream(stream) : -1;
      const bool append = at >= 0 && current->streams[at].epochs() < 6 && plan_rng() % 3 == 0;
      std::shared_ptr<Plan> next;
      if (current && plan_rng() % 8 == 0 && current->streams.size() > 1) {
        next = RemoveStream(*current, stream);
        if (!next) continue;
      } else {
        next = random_plan(current.get(), stream, append);
      }
      ASSERT_NE(next, nullptr);
      prefetcher.Install(next);
      ++installs;
      appends += append;
    }
    done.store(true);
    // Watchdog: every reader must come back within its deadline; a hang fails the run.
    std::atomic<bool> joined{false};
    std::thread watchdog([&] {
      const auto limit = Clock::now() + kFetchTimeout * 3 + 10s;
      while (!joined.load()) {
        if (Clock::now() > limit) {
          std::fprintf(stderr, "FAILED: readers hang (seed %llu)\n",
                       static_cast<unsigned long long>(seed));
          std::_Exit(1);
        }
        std::this_thread::sleep_for(10ms);
      }
    });
    for (auto& t : threads) t.join();
    joined.store(true);
    watchdog.join();
    rss_peak = std::max(rss_peak, RssBytes());
    const auto stop_start = Clock::now();
    prefetcher.Stop();
    EXPECT_LT(Clock::now() - stop_start, kFetchTimeout + 2s) << "Stop took too long";
    last_plan = prefetcher.plan();
    // After the last plan, each tier holds only what it assigns there or to a faster tier.
    std::vector<Tier*> tiers = {&ram, ssd.value().get()};
    for (size_t t = 0; t < tiers.size(); ++t) {
      uint64_t misplaced = 0;
      tiers[t]->RetainOnly([&](std::string_view key, const FileVersion& v) {
        const uint32_t id = last_plan->Find(key);
        if (id == kNoPos || !last_plan->objects[id].place.InTierAtOrAbove(t) ||
            last_plan->objects[id].version != v) {
          ++misplaced;
        }
        return true;
      });
      EXPECT_EQ(misplaced, 0u) << tiers[t]->name();
      EXPECT_LE(tiers[t]->used_bytes(), tiers[t]->capacity());
    }
    std::printf(
        "stress: %d plans (%d appends), %llu opens, %llu served, %llu timeouts, longest %lld ms, "
        "backing reads %llu, tier fills %llu+%llu, rss %llu -> peak %llu MiB (budget %llu)\n",
        installs, appends, static_cast<unsigned long long>(opens.load()),
        static_cast<unsigned long long>(served.load()),
        static_cast<unsigned long long>(timeouts.load()), static_cast<long long>(longest_ms.load()),
        static_cast<unsigned long long>(stats.backing_reads.load()),
        static_cast<unsigned long long>(stats.tier_fetched[0].load()),
        static_cast<unsigned long long>(stats.tier_fetched[1].load()),
        static_cast<unsigned long long>(rss_before >> 20),
        static_cast<unsigned long long>(rss_peak >> 20),
        static_cast<unsigned long long>(budget >> 20));
  }
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(bad_errors.load(), 0u);
  EXPECT_EQ(late.load(), 0u) << "an open waited past its deadline";
  EXPECT_GT(served.load(), 0u);
  EXPECT_LE(rss_peak, budget);
  EXPECT_EQ(OpenFds(), fds_before) << "descriptors leaked";
}

}  // namespace
}  // namespace clairfs
