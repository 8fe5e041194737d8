// Streams: plans as the union of named streams, consumption per stream (against a reference
// model), the staging window shared by progress, attribution of reads, idle streams removed.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "cache/plan/consumption.h"
#include "cache/plan/merge.h"
#include "cache/plan/place.h"
#include "cache/plan/plan.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/prefetch/staging_window.h"
#include "cache/tiers/ram_tier.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using testing::MemBacking;
using testing::WaitFor;

std::string Name(int i) { return "d/f" + std::to_string(i); }

class StreamPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 40; ++i) backing_.AddFile(Name(i), std::string(10 + i, 'x'));
  }
  std::shared_ptr<Plan> Of(const Plan* base, const std::string& stream,
                           const std::vector<std::vector<int>>& epochs,
                           StreamChange change = StreamChange::kReplace) {
    return testing::PlanOfEpochs(backing_, epochs, Name, base, 1ull << 30, stream, change);
  }
  uint32_t Freq(const Plan& p, int i) { return p.objects[p.Find(Name(i))].freq; }
  MemBacking backing_;
};

TEST_F(StreamPlanTest, StreamsAddUpAndEachChangesAlone) {
  auto a = Of(nullptr, "job-a", {{0, 1, 2}, {2, 1, 0}});
  auto ab = Of(a.get(), "job-b", {{2, 3}});
  ASSERT_EQ(ab->streams.size(), 2u);
  EXPECT_EQ(ab->streams[0].name, "job-a");
  EXPECT_EQ(ab->streams[1].name, "job-b");
  EXPECT_EQ(ab->streams[0].serial, a->streams[0].serial);  // untouched
  EXPECT_EQ(ab->streams[0].sequence.ToVector(), a->streams[0].sequence.ToVector());
  EXPECT_EQ(Freq(*ab, 2), 3u);                          // frequencies add up over streams
  EXPECT_EQ(ab->objects[ab->Find(Name(3))].first, 1u);  // the lowest position in any stream
  EXPECT_EQ(ab->entries(), 8u);
  EXPECT_EQ(ab->positions(), 8u);
  EXPECT_EQ(ab->span(), 6u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ab->Find(Name(i)), a->Find(Name(i)));  // ids kept

  // Appending to job-b keeps its serial; replacing job-a gives it a new one.
  auto appended = Of(ab.get(), "job-b", {{3}}, StreamChange::kAppend);
  EXPECT_EQ(appended->streams[1].serial, ab->streams[1].serial);
  EXPECT_EQ(appended->streams[1].epochs(), 2u);
  auto replaced = Of(appended.get(), "job-a", {{4}});
  EXPECT_NE(replaced->streams[0].serial, ab->streams[0].serial);
  EXPECT_EQ(replaced->streams[1].serial, ab->streams[1].serial);
  EXPECT_EQ(Freq(*replaced, 0), 0u);        // only job-a read it: dead until renumbered
  EXPECT_EQ(replaced->dead_objects(), 2u);  // 0 and 1

  // An empty replacement removes the stream; RemoveStream does the same.
  auto removed = Of(replaced.get(), "job-b", {});
  ASSERT_EQ(removed->streams.size(), 1u);
  EXPECT_EQ(removed->streams[0].name, "job-a");
  auto removed2 = RemoveStream(*replaced, "job-b");
  ASSERT_NE(removed2, nullptr);
  EXPECT_EQ(removed2->streams.size(), 1u);
  EXPECT_EQ(RemoveStream(*replaced, "nobody"), nullptr);
  // Renumbered: only object 4 is live, and job-a's positions follow it.
  EXPECT_EQ(removed2->objects.size(), 1u);
  EXPECT_EQ(removed2->objects[removed2->streams[0].sequence[0]].key, Name(4));
}

TEST_F(StreamPlanTest, ReplacingStreamsOverDisjointFilesNeverGrowsWithoutBound) {
  std::shared_ptr<Plan> p = Of(nullptr, "keep", {{39}});
  for (int round = 0; round < 30; ++round) {
    std::vector<int> files;
    for (int i = 0; i < 6; ++i) files.push_back((round * 6 + i) % 38);
    p = Of(p.get(), "churn", {files});
    const size_t live = p->objects.size() - p->dead_objects();
    EXPECT_LE(p->objects.size(), 2 * live + 1);
    for (const PlanStream& s : p->streams) {
      for (uint32_t id : s.sequence) ASSERT_LT(id, p->objects.size());
    }
    const PlanStream& keep = p->streams[p->FindStream("keep")];
    EXPECT_EQ(p->objects[keep.sequence[0]].key, Name(39));
  }
}

// The contract of Consumption, written plainly: O(n) per read, for comparison.
struct ModelConsumption {
  std::vector<uint32_t> seq;
  std::vector<bool> consumed;
  uint32_t low = 0, high = 0, lag;
  uint64_t given_up = 0;
  uint32_t Consume(uint32_t id) {
    for (uint32_t p = low; p < seq.size(); ++p) {
      if (seq[p] != id || consumed[p]) continue;
      consumed[p] = true;
      high = std::max(high, p + 1);
      const uint32_t floor = high > lag ? high - lag : 0;
      while (low < seq.size() && (consumed[low] || low < floor)) given_up += !consumed[low++];
      return p;
    }
    return kNoPos;
  }
};

TEST(ConsumptionModel, AgreesWithThePlainContractOnRandomReads) {
  std::mt19937 rng(12);
  for (int round = 0; round < 300; ++round) {
    const uint32_t objects = 1 + rng() % 30;
    const uint32_t lag = 1 + rng() % 40;
    PlanStream s{"s", 1, {}, {}};
    ModelConsumption model;
    model.lag = lag;
    Consumption c(lag);
    // The same stream with its distinct objects counted (as Plan::Finalize does): Reset's walk
    // from the end stops early, and nothing else may differ.
    Consumption counted(lag);
    const int parts = 1 + rng() % 3;  // appended epochs: Reset with keep
    for (int part = 0; part < parts; ++part) {
      const uint32_t n = rng() % 120;
      s.epoch_begin.push_back(static_cast<uint32_t>(s.sequence.size()));
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t id = rng() % objects;
        s.sequence.push_back(id);
        model.seq.push_back(id);
      }
      model.consumed.resize(model.seq.size(), false);
      model.high = model.low;  // the give-up floor restarts with a new plan
      c.Reset(s, objects, part > 0);
      PlanStream with_count = s;
      with_count.distinct =
          static_cast<uint32_t>(std::set<uint32_t>(model.seq.begin(), model.seq.end()).size());
      counted.Reset(with_count, objects, part > 0);
      for (int r = 0; r < 150; ++r) {
        // Mostly near the front, sometimes anything.
        uint32_t id;
        if (rng() % 4 != 0 && model.low < model.seq.size()) {
          const uint32_t ahead = rng() % 8;
          id = model.seq[std::min<size_t>(model.low + ahead, model.seq.size() - 1)];
        } else {
          id = rng() % objects;
        }
        ASSERT_EQ(counted.Reads(id), c.Reads(id)) << "round " << round << " read " << r;
        const uint32_t got = c.Consume(id);
        ASSERT_EQ(counted.Consume(id), got) << "round " << round << " read " << r;
        ASSERT_EQ(got, model.Consume(id)) << "round " << round << " read " << r;
        ASSERT_EQ(c.low(), model.low);
        ASSERT_EQ(c.given_up(), model.given_up);
      }
      for (uint32_t p = 0; p < model.seq.size(); ++p) {
        ASSERT_EQ(c.done(p), p < model.low || model.consumed[p]) << p;
      }
    }
  }
}

TEST_F(StreamPlanTest, TheWindowAdvancesTheStreamThatLeadsItsReadersLeast) {
  auto p = Of(Of(nullptr, "a", {{0, 1, 2, 3, 4, 5}}).get(), "b", {{10, 11, 12, 13, 14, 15}});
  PlaceObjects(*p, {{}, {}, 1000});  // everything staged
  std::vector<Consumption> cs(2);
  for (size_t s = 0; s < 2; ++s) cs[s].Reset(p->streams[s], p->objects.size(), false);
  StagingWindow window(1000);
  window.Reset(*p, cs);
  StagingWindow::Job job;
  std::vector<std::string> order;
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(window.Next(*p, cs, nullptr, &job), StagingWindow::Step::kFetch);
    window.Attach(job.id, std::make_shared<Flight>());
    order.push_back(job.key);
  }
  EXPECT_EQ(order,
            (std::vector<std::string>{Name(0), Name(10), Name(1), Name(11), Name(2), Name(12)}));
  // Stream a's readers consume 0..2: a now leads least, so its next objects come first.
  for (int i = 0; i < 3; ++i) {
    const uint32_t id = p->Find(Name(i));
    const uint32_t pos = cs[0].Consume(id);
    EXPECT_EQ(pos, static_cast<uint32_t>(i));
    EXPECT_TRUE(window.Take(id, 0, pos).freed);
    window.Follow(0, cs[0]);
  }
  ASSERT_EQ(window.Next(*p, cs, nullptr, &job), StagingWindow::Step::kFetch);
  EXPECT_EQ(job.key, Name(3));
  window.Attach(job.id, std::make_shared<Flight>());
  ASSERT_EQ(window.Next(*p, cs, nullptr, &job), StagingWindow::Step::kFetch);
  EXPECT_EQ(job.key, Name(4));
}

class StreamPrefetcherTest : public StreamPlanTest {
 protected:
  void Make(std::chrono::milliseconds idle) {
    ram_ = std::make_unique<RamTier>("ram", 1 << 20);
    PrefetchOptions o;
    o.staging_capacity = 1 << 20;
    o.staging_threads = 1;
    o.tier_threads = {1};
    o.demand_threads = 1;
    o.fetch_timeout = 5000ms;
    o.stream_idle = idle;
    prefetcher_ =
        std::make_unique<Prefetcher>(backing_, std::vector<Tier*>{ram_.get()}, o, &stats_);
  }
  StreamProgress Progress(const std::string& name) {
    for (const StreamProgress& s : prefetcher_->progress().streams) {
      if (s.name == name) return s;
    }
    return {};
  }
  void Open(int i) {
    auto r = prefetcher_->Open(Name(i), backing_.Version(Name(i)));
    ASSERT_TRUE(r.ok());
    ASSERT_NE(r->blob, nullptr);
    EXPECT_EQ(r->blob->size(), 10u + i);
  }
  void TearDown() override {
    if (prefetcher_) prefetcher_->Stop();
  }
  Stats stats_;
  std::unique_ptr<RamTier> ram_;
  std::unique_ptr<Prefetcher> prefetcher_;
};

TEST_F(StreamPrefetcherTest, ReadsAreCountedForTheStreamWhoseOrderTheyFollow) {
  Make(0ms);
  auto a = Of(nullptr, "a", {{0, 1, 2, 3}, {2, 0, 3, 1}});
  prefetcher_->Install(Of(a.get(), "b", {{3, 1, 0, 2}, {0, 1, 2, 3}}));
  prefetcher_->Start();
  for (int i : {0, 1, 2, 3}) Open(i);  // job a's first epoch
  EXPECT_EQ(Progress("a").position, 4u);
  EXPECT_EQ(Progress("a").epoch, 1u);
  EXPECT_EQ(Progress("b").position, 0u);
  // Job b's first epoch. Each read is nearer b's progress than a's, but the last: 2 is next
  // in both, and the stream that read last gets it.
  for (int i : {3, 1, 0, 2}) Open(i);
  EXPECT_EQ(Progress("b").position, 4u);
  EXPECT_EQ(Progress("a").position, 4u);
  const PrefetchProgress p = prefetcher_->progress();
  EXPECT_EQ(p.position, 8u);
  EXPECT_EQ(p.positions, 16u);
  EXPECT_EQ(p.epoch, 1u);
  // Another registration of b keeps a's progress; a replacement of b restarts b only.
  prefetcher_->Install(Of(prefetcher_->plan().get(), "b", {{0, 1}}));
  EXPECT_EQ(Progress("a").position, 4u);
  EXPECT_EQ(Progress("b").position, 0u);
  // Epochs appended to a keep its progress.
  prefetcher_->Install(Of(prefetcher_->plan().get(), "a", {{0}}, StreamChange::kAppend));
  EXPECT_EQ(Progress("a").position, 4u);
  EXPECT_EQ(Progress("a").epochs, 3u);
}

// What StatAhead stats next: each stream's coming positions not done yet, from a little
// behind its furthest read, the node's `ahead` shared by the streams.
TEST_F(StreamPrefetcherTest, UpcomingFollowsEachStreamsFurthestRead) {
  Make(0ms);
  std::vector<int> order(40);
  for (int i = 0; i < 40; ++i) order[i] = i;
  prefetcher_->Install(Of(nullptr, "a", {order, order}));
  prefetcher_->Start();
  for (int i = 0; i < 10; ++i) Open(i);
  Open(12);  // out of order: position 12 is done, 10 and 11 are not
  const auto upcoming = [&](uint32_t ahead, UpcomingQuery query = {}) {
    query.ahead = ahead;
    UpcomingFiles files;
    prefetcher_->Upcoming(query, &files);
    EXPECT_EQ(files.ids.size(), files.paths.size());
    return files;
  };
  UpcomingFiles files = upcoming(40);  // one stream: 40 positions from max(low 10, 13 - 10)
  std::vector<std::string> want;
  for (int pos = 10; pos < 50; ++pos) {
    if (pos != 12) want.push_back(Name(pos % 40));
  }
  EXPECT_EQ(files.paths, want);
  EXPECT_EQ(files.skipped, 0u);
  EXPECT_NE(files.plan, 0u);
  for (size_t i = 0; i < files.ids.size(); ++i) {  // each id names its path in that plan
    EXPECT_EQ(prefetcher_->plan()->objects[files.ids[i]].path(), files.paths[i]);
  }

  // What skip vouches for is left out, counted, and asked with the plan's number.
  UpcomingQuery skip_even;
  const uint64_t plan = files.plan;
  const auto& objects = prefetcher_->plan()->objects;
  skip_even.skip = [&](uint64_t p, uint32_t id) {
    EXPECT_EQ(p, plan);
    return objects[id].path() == Name(14) || objects[id].path() == Name(15);
  };
  UpcomingFiles skipped = upcoming(40, skip_even);
  EXPECT_EQ(skipped.skipped, 2u);
  EXPECT_EQ(skipped.paths.size(), want.size() - 2);
  EXPECT_EQ(std::count(skipped.paths.begin(), skipped.paths.end(), Name(14)), 0);

  // Two streams share it, each at least Prefetcher::kMinUpcoming positions; a new plan has a
  // new number.
  prefetcher_->Install(Of(prefetcher_->plan().get(), "b", {{39, 38, 37}}));
  files = upcoming(40);
  EXPECT_NE(files.plan, plan);
  const std::vector<std::string>& paths = files.paths;
  ASSERT_EQ(paths.size(), Prefetcher::kMinUpcoming - 1 + 3);
  EXPECT_EQ(paths.front(), Name(10));
  EXPECT_EQ(paths[Prefetcher::kMinUpcoming - 2], Name(41 % 40));
  EXPECT_EQ(std::vector<std::string>(paths.end() - 3, paths.end()),
            (std::vector<std::string>{Name(39), Name(38), Name(37)}));
}

// Signposts: where the readers are when the page cache answered every read before (nothing
// consumed). A post is the first position at or after each point of a grid (per / 8) in the
// second half of the stretch whose file the stretch does not read earlier; a sighted post
// moves the stretch there and consumes nothing.
TEST_F(StreamPrefetcherTest, SignpostsMoveTheStretchAndConsumeNothing) {
  Make(0ms);
  std::vector<int> first(40), second(40);
  for (int i = 0; i < 40; ++i) first[i] = i;
  second = {20, 5};  // position 40 reads file 20, read at 20 too; 41 reads 5, read at 5
  for (int i = 0; i < 40; ++i) {
    if (i != 20 && i != 5) second.push_back(i);
  }
  prefetcher_->Install(Of(nullptr, "a", {first, second}));
  prefetcher_->Start();
  const uint64_t serial = prefetcher_->plan()->streams[0].serial;
  const auto positions = [](const std::vector<Signpost>& posts) {
    std::vector<std::pair<uint32_t, bool>> out;
    for (const Signpost& p : posts) {
      if (!p.spare) out.emplace_back(p.pos, p.last);
    }
    return out;
  };
  const auto spares = [](const std::vector<Signpost>& posts) {
    std::vector<uint32_t> out;
    for (const Signpost& p : posts) {
      if (p.spare) out.push_back(p.pos);
      EXPECT_TRUE(!p.spare || p.last);
    }
    return out;
  };
  // per 32: the stretch is positions 0-31, posts from 16 every 4; the last quarter waits.
  UpcomingQuery query;
  query.ahead = 32;
  query.posts = true;
  UpcomingFiles files;
  prefetcher_->Upcoming(query, &files);
  std::vector<std::string> paths = files.paths;
  std::vector<Signpost> posts = files.posts;
  ASSERT_EQ(paths.size(), 32u);
  EXPECT_EQ(positions(posts), (std::vector<std::pair<uint32_t, bool>>{
                                  {16, false}, {20, false}, {24, true}, {28, true}}));
  // Spares: the last quarter's other positions whose file is first read there.
  EXPECT_EQ(spares(posts), (std::vector<uint32_t>{25, 26, 27, 29, 30, 31}));
  EXPECT_EQ(posts[1].path, Name(20));
  EXPECT_EQ(posts[1].serial, serial);

  // A reader reached 20: the stretch is 12-43. 40 reads file 20 again (read at 20, not done):
  // no post; 41 reads file 5, which the stretch does not read before: a post.
  ASSERT_TRUE(prefetcher_->Sighted(posts[1]));
  files = {};
  prefetcher_->Upcoming(query, &files);
  paths = files.paths;
  posts = files.posts;
  ASSERT_EQ(paths.size(), 32u);
  EXPECT_EQ(paths.front(), Name(12));
  EXPECT_EQ(positions(posts), (std::vector<std::pair<uint32_t, bool>>{
                                  {28, false}, {32, false}, {36, true}, {41, true}}));
  EXPECT_EQ(spares(posts), (std::vector<uint32_t>{37, 38, 39, 42, 43}));  // 40: file 20 again
  std::erase_if(posts, [](const Signpost& p) { return p.spare; });
  EXPECT_EQ(posts[3].path, Name(5));
  EXPECT_EQ(Progress("a").position, 0u);  // nothing consumed, nothing given up
  EXPECT_EQ(Progress("a").given_up, 0u);

  // Stale posts change nothing: behind the furthest sighted, of a replaced stream, or behind
  // the reads the daemon saw.
  EXPECT_FALSE(prefetcher_->Sighted(Signpost{Name(16), serial, 16, false}));
  EXPECT_FALSE(prefetcher_->Sighted(Signpost{Name(30), serial + 1000, 30, false}));
  for (int i = 0; i < 30; ++i) Open(i);
  EXPECT_FALSE(prefetcher_->Sighted(posts[0]));  // 28: consumed since
  EXPECT_TRUE(prefetcher_->Sighted(posts[1]));   // 32: ahead of the reads
}

TEST_F(StreamPrefetcherTest, AnIdleStreamIsRemovedAndTheOthersStay) {
  Make(300ms);
  auto a = Of(nullptr, "alive", {{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3, 4, 5, 6, 7}});
  prefetcher_->Install(Of(a.get(), "dead", {{8, 9}}));
  prefetcher_->Start();
  const uint64_t alive_serial = prefetcher_->plan()->streams[0].serial;
  // The live job keeps reading (each read renews it); the dead one never reads.
  int next = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        Open(next++ % 8);
        return prefetcher_->plan()->FindStream("dead") < 0;
      },
      10s));
  const auto plan = prefetcher_->plan();
  ASSERT_EQ(plan->streams.size(), 1u);
  EXPECT_EQ(plan->streams[0].name, "alive");
  EXPECT_EQ(plan->streams[0].serial, alive_serial);
  EXPECT_GT(Progress("alive").position, 0u);               // its progress was kept
  EXPECT_EQ(plan->objects[plan->Find(Name(9))].freq, 0u);  // no stream reads its files
}

}  // namespace
}  // namespace clairfs
