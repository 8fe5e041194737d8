// Objects and chunks end to end in memory: keys, the grid, range entries in the manifest, the
// plan's positions, consumption that gives up skipped positions, the staging window following
// it, and chunk reads through a real Prefetcher over a MemBacking and a RamTier.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "cache/base/object_key.h"
#include "cache/manifest/manifest.h"
#include "cache/plan/consumption.h"
#include "cache/plan/merge.h"
#include "cache/plan/place.h"
#include "cache/plan/plan.h"
#include "cache/plan/summary.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/prefetch/staging_window.h"
#include "cache/tiers/ram_tier.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using namespace std::chrono_literals;
using testing::BuildPlan;
using testing::MemBacking;
using testing::WaitFor;

std::string Key(std::string_view path, uint64_t off, uint64_t len) {
  return ObjectKey(path, {off, len});
}

TEST(ObjectKey, WholeFilesAreTheirPathChunksNameTheirRange) {
  EXPECT_EQ(ObjectKey("a/b c", ByteRange::Whole()), "a/b c");
  const std::string k = Key("a/b c", 4096, 100);
  EXPECT_EQ(k, std::string("a/b c\0"
                           "4096+100",
                           14));
  auto ref = ParseObjectKey(k);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->path, "a/b c");
  EXPECT_EQ(ref->range, (ByteRange{4096, 100}));
  EXPECT_EQ(KeyPath(k), "a/b c");
  EXPECT_EQ(DisplayKey(k), "a/b c[4096+100]");
  EXPECT_EQ(ObjectBytes(k, {999'999, 1}), 100u);
  EXPECT_EQ(ObjectBytes("a/b c", {999'999, 1}), 999'999u);
  // Keys from the network are parsed strictly.
  for (std::string bad : {"0+0", "01+2", "1+02", "+5", "5+", "x+1", "1-2", "",
                          "18446744073709551615+1", "18446744073709551616+1"}) {
    EXPECT_FALSE(ParseObjectKey(std::string("p\0", 2) + bad)) << bad;
    EXPECT_EQ(ObjectBytes(std::string("p\0", 2) + bad, {10, 1}), 0u) << bad;
  }
}

TEST(ChunkGrid, CutsLargeFilesOnAFixedGrid) {
  const ChunkGrid grid(4);
  std::vector<ByteRange> got;
  auto collect = [&](uint64_t size, ByteRange r) {
    got.clear();
    grid.ForEach(size, r, [&](ByteRange c) { got.push_back(c); });
    return got;
  };
  EXPECT_EQ(collect(4, ByteRange::Whole()), (std::vector<ByteRange>{ByteRange::Whole()}));
  EXPECT_EQ(collect(3, {1, 1}), (std::vector<ByteRange>{ByteRange::Whole()}));
  EXPECT_EQ(collect(10, ByteRange::Whole()), (std::vector<ByteRange>{{0, 4}, {4, 4}, {8, 2}}));
  EXPECT_EQ(collect(10, {3, 3}), (std::vector<ByteRange>{{0, 4}, {4, 4}}));
  EXPECT_EQ(collect(10, {4, 4}), (std::vector<ByteRange>{{4, 4}}));
  EXPECT_EQ(collect(10, {9, 1}), (std::vector<ByteRange>{{8, 2}}));
}

ParsedManifest Parse(std::string_view text) {
  ManifestParser p;
  p.Feed(text);
  return std::move(p).Finish();
}

TEST(RangeEntries, ParseWithSpacesTabsAndDuplicates) {
  auto m = Parse("a b/c d\t10+20\na b/c d\t10+20\na b/c d\nx\t1+2\t3+4\n#epoch\tnote\n./#h\t0+1\n");
  ASSERT_TRUE(m.ok()) << m.errors[0].message;
  ASSERT_EQ(m.paths.size(), 3u);
  EXPECT_EQ(m.paths[0], "a b/c d");
  EXPECT_EQ(m.paths[1], "x\t1+2");  // the last TAB separates the range
  EXPECT_EQ(m.paths[2], "#h");
  ASSERT_EQ(m.sequence.size(), 5u);
  EXPECT_EQ(m.sequence[0], m.sequence[1]);  // one target, read twice
  EXPECT_NE(m.sequence[0], m.sequence[2]);  // the whole file is another target
  EXPECT_EQ(m.targets[m.sequence[0]].range, (ByteRange{10, 20}));
  EXPECT_TRUE(m.targets[m.sequence[2]].range.whole());
  EXPECT_EQ(m.targets[m.sequence[3]].range, (ByteRange{3, 4}));
  EXPECT_EQ(m.epoch_begin, (std::vector<uint32_t>{0, 4}));
}

TEST(RangeEntries, HostileRangesAreRefusedWithTheirLine) {
  const char* bad[] = {"f\t-1+5",
                       "f\t0+0",
                       "f\t18446744073709551615+1",
                       "f\t1+18446744073709551616",
                       "f\t01+2",
                       "f\t1-2",
                       "f\t+5",
                       "f\t5+",
                       "f\ta+b",
                       "f\t",
                       "tab\tpath",
                       "\t0+1",
                       "f\t1+2 "};
  for (const char* line : bad) {
    auto m = Parse(std::string("ok\n") + line + "\n");
    ASSERT_FALSE(m.ok()) << line;
    EXPECT_EQ(m.error_count, 1u) << line;
    EXPECT_EQ(m.errors[0].line, 2u) << line << ": " << m.errors[0].message;
  }
}

TEST(RangeEntries, PeekThenFeedGivesTheSameText) {
  ManifestParser p;
  p.Feed("a\t0+1\nb\t2+");
  EXPECT_EQ(p.Peek().targets.size(), 1u);  // "b\t2+" ends the text: malformed, no target
  p.Feed("3\na\t0+1\n");
  auto m = std::move(p).Finish();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m.targets.size(), 2u);
  EXPECT_EQ(m.sequence.ToVector(), (std::vector<uint32_t>{0, 1, 0}));
  EXPECT_EQ(m.targets[1].range, (ByteRange{2, 3}));
}

class ChunkPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backing_.AddFile("big", std::string(10, 'b'));
    backing_.AddFile("small", std::string(3, 's'));
  }
  Result<std::shared_ptr<Plan>> Build(std::string_view text, const Plan* base = nullptr) {
    PathResolver resolver(backing_, {});
    return BuildPlan(Parse(text), resolver, base,
                     base ? StreamChange::kAppend : StreamChange::kReplace, 4);
  }
  MemBacking backing_;
};

TEST_F(ChunkPlanTest, EntriesBecomeThePositionsOfTheirChunks) {
  auto plan = Build("#epoch\nbig\nsmall\tbad\n");
  ASSERT_FALSE(plan.ok());
  plan = Build("#epoch\nbig\nsmall\t1+1\n#epoch\nbig\t3+3\nsmall\nbig\t9+1\n");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const Plan& p = *plan.value();
  const uint32_t c0 = p.Find(Key("big", 0, 4)), c1 = p.Find(Key("big", 4, 4)),
                 c2 = p.Find(Key("big", 8, 2)), s = p.Find("small");
  ASSERT_NE(c0, kNoPos);
  ASSERT_NE(c1, kNoPos);
  ASSERT_NE(c2, kNoPos);
  ASSERT_NE(s, kNoPos);  // a range of a file no larger than a chunk reads the whole file
  const PlanStream& st = p.streams[0];
  EXPECT_EQ(st.sequence.ToVector(), (std::vector<uint32_t>{c0, c1, c2, s, c0, c1, s, c2}));
  EXPECT_EQ(st.epoch_begin, (std::vector<uint32_t>{0, 4}));
  EXPECT_EQ(p.entries(), 5u);
  EXPECT_EQ(p.range_entries(), 3u);
  EXPECT_EQ(p.objects[c0].freq, 2u);
  EXPECT_EQ(p.objects[c2].bytes, 2u);
  EXPECT_EQ(p.objects[s].bytes, 3u);
  ASSERT_NE(p.ChunkedFile("big"), nullptr);
  EXPECT_EQ(p.ChunkedFile("big")->version.size, 10u);
  EXPECT_EQ(p.ChunkedFile("big")->chunk, 4u);
  EXPECT_EQ(p.ChunkedFile("small"), nullptr);
  EXPECT_EQ(p.files(), 2u);
  const PlanSummary sum = Summarize(p, {{}, {}, 100});
  EXPECT_EQ(sum.files, 2u);
  EXPECT_EQ(sum.chunked_files, 1u);
  EXPECT_EQ(sum.objects, 4u);
  EXPECT_EQ(sum.chunks, 3u);
  EXPECT_EQ(sum.bytes, 13u);
  EXPECT_EQ(sum.positions, 8u);
  EXPECT_EQ(sum.range_entries, 3u);
}

TEST_F(ChunkPlanTest, RangesPastTheEndAreRefusedWithLineNumbers) {
  auto plan = Build("big\t0+10\nbig\t5+6\nsmall\t3+1\nmissing\t0+1\nbig\t10+1\n");
  ASSERT_FALSE(plan.ok());
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find("4 errors"), std::string::npos) << m;
  EXPECT_NE(m.find("line 2: 'big': range 5+6 ends past the end of the file (size 10)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("line 3: 'small': range 3+1"), std::string::npos) << m;
  EXPECT_NE(m.find("line 4: 'missing'"), std::string::npos) << m;
  EXPECT_NE(m.find("line 5: 'big': range 10+1"), std::string::npos) << m;
}

TEST_F(ChunkPlanTest, AnAppendedPlanKeepsEachFileGrid) {
  auto base = Build("big\n");
  ASSERT_TRUE(base.ok());
  PathResolver resolver(backing_, {});
  auto appended = BuildPlan(Parse("big\n"), resolver, base.value().get(), StreamChange::kAppend, 8);
  ASSERT_TRUE(appended.ok());
  EXPECT_EQ(appended.value()->ChunkedFile("big")->chunk, 4u);
  EXPECT_EQ(appended.value()->objects.size(), 3u);
  EXPECT_EQ(appended.value()->positions(), 6u);
}

TEST_F(ChunkPlanTest, FilesReadAsRecordsGetTheRecordGrid) {
  backing_.AddFile("shard", std::string(20, 'r'));
  backing_.AddFile("whole", std::string(9, 'w'));
  PathResolver resolver(backing_, {});
  // big is read whole (grid 8), shard as records (grid 3); small fits any grid.
  auto plan = BuildPlan(Parse("big\nshard\t4+5\nshard\nsmall\t0+1\nwhole\n"), resolver, nullptr,
                        StreamChange::kReplace, 8, 3);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const Plan& p = *plan.value();
  EXPECT_EQ(p.ChunkedFile("big")->chunk, 8u);
  EXPECT_EQ(p.ChunkedFile("shard")->chunk, 3u);
  EXPECT_EQ(p.ChunkedFile("whole")->chunk, 8u);
  EXPECT_NE(p.Find(Key("shard", 3, 3)), kNoPos);
  EXPECT_NE(p.Find(Key("shard", 18, 2)), kNoPos);
  EXPECT_NE(p.Find(Key("big", 8, 2)), kNoPos);
  EXPECT_NE(p.Find("small"), kNoPos);
  EXPECT_EQ(p.positions(), 2 + 2 + 7 + 1 + 2u);
  // Appending ranges of a file the base holds whole keeps it whole; of a chunked file keeps
  // its grid.
  auto appended = BuildPlan(Parse("small\t1+1\nbig\t0+1\n"), resolver, plan.value().get(),
                            StreamChange::kAppend, 8, 3);
  ASSERT_TRUE(appended.ok());
  EXPECT_EQ(appended.value()->ChunkedFile("big")->chunk, 8u);
  EXPECT_EQ(appended.value()->ChunkedFile("small"), nullptr);
  EXPECT_EQ(appended.value()->objects.size(), p.objects.size());
}

// A plan of n distinct objects read once each, in order.
std::shared_ptr<Plan> Line(int n) {
  auto p = std::make_shared<Plan>();
  PlanStream s{"default", 1, {}, {}};
  for (int i = 0; i < n; ++i) {
    p->AddObject("f" + std::to_string(i), {10, 1});
    s.sequence.push_back(i);
  }
  s.epoch_begin = {0};
  p->streams.push_back(std::move(s));
  p->Finalize();
  return p;
}

TEST(ConsumptionLag, PositionsFarBehindTheFurthestReadAreGivenUp) {
  auto plan = Line(10);
  Consumption c(3);
  c.Reset(plan->streams[0], plan->objects.size(), false);
  EXPECT_EQ(c.Consume(1), 1u);  // out of order, within the lag: nothing given up
  EXPECT_EQ(c.low(), 0u);
  EXPECT_EQ(c.Consume(5), 5u);  // 0..2 are more than 3 behind position 5
  EXPECT_EQ(c.low(), 3u);
  EXPECT_EQ(c.given_up(), 2u);  // 0 and 2 (1 was consumed)
  EXPECT_TRUE(c.done(0));
  EXPECT_EQ(c.Consume(0), kNoPos);  // a late reader of a given-up position consumes nothing
  EXPECT_EQ(c.Consume(3), 3u);
  EXPECT_EQ(c.Consume(4), 4u);
  EXPECT_EQ(c.low(), 6u);
}

TEST(ConsumptionLag, TheWindowDropsEntriesWhoseOccurrencesWereGivenUp) {
  auto plan = Line(10);
  PlaceObjects(*plan, {{}, {}, 1000});
  std::vector<Consumption> cs(1, Consumption(3));
  Consumption& c = cs[0];
  c.Reset(plan->streams[0], plan->objects.size(), false);
  StagingWindow window(30);  // three objects of 10 bytes
  window.Reset(*plan, cs);
  StagingWindow::Job job;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(window.Next(*plan, cs, nullptr, &job), StagingWindow::Step::kFetch);
    window.Attach(job.id, std::make_shared<Flight>());
  }
  EXPECT_EQ(window.Next(*plan, cs, nullptr, &job), StagingWindow::Step::kFull);
  // Readers skip 0 and 1 (the page cache answered them, say) and read 4: the window must not
  // stay full of entries nobody will consume.
  const uint32_t pos = c.Consume(4);
  EXPECT_EQ(pos, 4u);
  EXPECT_EQ(c.low(), 2u);
  EXPECT_TRUE(window.Follow(0, c));
  EXPECT_EQ(window.bytes(), 10u);  // object 2 is still ahead of the low-water mark
  EXPECT_EQ(window.Next(*plan, cs, nullptr, &job), StagingWindow::Step::kFetch);
  EXPECT_EQ(job.key, "f3");
}

TEST(ChunkReads, ServeExactBytesFromTheTierAndNeverReadTheBackingStoreAgain) {
  MemBacking backing;
  std::string data(10'000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + i / 97);
  backing.AddFile("big", data);
  backing.AddFile("other", std::string(9'000, 'o'));
  RamTier ram("ram", 1 << 20);
  Stats stats;
  PrefetchOptions o;
  o.staging_capacity = 1 << 20;
  o.chunk_size = 4096;
  o.record_chunk_size = 4096;
  o.tier_threads = {2};
  o.fetch_timeout = 5000ms;
  Prefetcher prefetcher(backing, {&ram}, o, &stats);
  ManifestParser parser;
  parser.Feed("#epoch\nbig\t5000+3500\n#epoch\nbig\t5000+3500\n");
  PathResolver resolver(backing, {});
  auto plan = BuildPlan(std::move(parser).Finish(), resolver, nullptr, StreamChange::kReplace,
                        o.chunk_size);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  prefetcher.Install(plan.value());
  prefetcher.Start();
  const FileVersion v = backing.Version("big");
  ASSERT_TRUE(WaitFor([&] { return stats.fetched_objects.load() == 2; }));
  const uint64_t reads = backing.reads();

  auto open = prefetcher.Open("big", v);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->source, OpenResult::Source::kChunked);
  EXPECT_EQ(prefetcher.Open("other", backing.Version("other"))->source,
            OpenResult::Source::kDirect);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (uint64_t off : {5000u, 8191u, 8192u}) {
      auto r = prefetcher.ReadChunk("big", v, off, true);
      ASSERT_TRUE(r.ok()) << r.status().message();
      ASSERT_TRUE(r->blob) << off;
      EXPECT_EQ(r->source, OpenResult::Source::kTier);
      const ByteRange c = r->range;
      EXPECT_EQ(c.offset, off / 4096 * 4096);
      EXPECT_EQ(std::string(r->blob->data(), r->blob->size()), data.substr(c.offset, c.length));
    }
  }
  EXPECT_EQ(backing.reads(), reads) << "cached chunks never touch the backing store";
  // A chunk the plan does not name: 0..4095 (5000+3500 covers chunks 1 and 2).
  auto unplanned = prefetcher.ReadChunk("big", v, 100, true);
  ASSERT_TRUE(unplanned.ok());
  EXPECT_FALSE(unplanned->blob);
  EXPECT_EQ(unplanned->range, (ByteRange{0, 4096}));
  EXPECT_EQ(stats.unplanned_chunk_reads.load(), 1u);
  // A changed file is never served from the cache.
  FileVersion changed = v;
  changed.mtime_ns += 1;
  auto stale = prefetcher.Open("big", changed);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->source, OpenResult::Source::kDirect);
  auto stale_chunk = prefetcher.ReadChunk("big", changed, 5000, true);
  ASSERT_TRUE(stale_chunk.ok());
  EXPECT_FALSE(stale_chunk->blob);
  prefetcher.Stop();
}

}  // namespace
}  // namespace clairfs
