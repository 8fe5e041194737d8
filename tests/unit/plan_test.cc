#include "cache/plan/plan.h"

#include <gtest/gtest.h>

#include "cache/plan/merge.h"
#include "cache/plan/place.h"
#include "cache/plan/resolve.h"
#include "cache/plan/summary.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using testing::BuildPlan;
using testing::MemBacking;

ParsedManifest Parse(std::string_view text) {
  ManifestParser p;
  p.Feed(text);
  return std::move(p).Finish();
}

class PlanTest : public ::testing::Test {
 protected:
  PlanTest() : resolver_(backing_, {"/data/set", "/mnt/set"}) {
    backing_.AddFile("a/1", std::string(10, 'a'));
    backing_.AddFile("a/2", std::string(20, 'b'));
    backing_.AddFile("b/3", std::string(30, 'c'));
    backing_.AddFile("#hash", "h");
    backing_.AddSymlink("link", "a/1");
    backing_.AddSymlink("dirlink", "b");
    backing_.AddSymlink("abslink", "/data/set/a/2");
    backing_.AddSymlink("out", "../../etc/passwd");
    backing_.AddSymlink("absout", "/etc/passwd");
    backing_.AddSymlink("b/up", "../a/1");
    backing_.AddSymlink("loop", "loop");
    backing_.AddFifo("fifo");
  }
  Result<std::shared_ptr<Plan>> Build(std::string_view text, const Plan* base = nullptr) {
    return BuildPlan(Parse(text), resolver_, base,
                     base ? StreamChange::kAppend : StreamChange::kReplace, chunk_size_);
  }
  MemBacking backing_;
  PathResolver resolver_;
  uint64_t chunk_size_ = 1ull << 30;
};

TEST_F(PlanTest, SymlinksAndAliasesResolveToOneCanonicalFile) {
  auto plan = Build("a/1\nlink\n./a/1\n/mnt/set/a/1\nb/up\nabslink\ndirlink/3\n./#hash\n");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const Plan& p = *plan.value();
  ASSERT_EQ(p.objects.size(), 4u);
  EXPECT_EQ(p.objects[0].key, "a/1");
  EXPECT_EQ(p.objects[0].freq, 5u);
  EXPECT_EQ(p.objects[1].key, "a/2");
  EXPECT_EQ(p.objects[2].key, "b/3");
  EXPECT_EQ(p.objects[3].key, "#hash");
  EXPECT_EQ(p.Find("b/3"), 2u);
  EXPECT_EQ(p.Find("link"), kNoPos);
  EXPECT_EQ(p.total_bytes(), 61u);
}

TEST_F(PlanTest, HostilePathsAreRejectedWithLines) {
  struct Case {
    const char* line;
    const char* reason;
  } cases[] = {{"../x", "out of the dataset"},
               {"/etc/passwd", "outside the dataset"},
               {"out", "out of the dataset"},
               {"absout", "out of the dataset"},
               {"a/../../x", "out of the dataset"},
               {"missing", "no such file"},
               {"a", "is a directory"},
               {"fifo", "not a regular file"},
               {"loop", "symbolic links"},
               {"a/1/x", "not a directory"}};
  for (const auto& c : cases) {
    auto plan = Build(std::string("a/1\nb/3\n") + c.line + "\na/2\n");
    ASSERT_FALSE(plan.ok()) << c.line;
    EXPECT_EQ(plan.status().code(), Code::kInvalidArgument);
    EXPECT_NE(plan.status().message().find("line 3: "), std::string::npos)
        << c.line << ": " << plan.status().message();
    EXPECT_NE(plan.status().message().find(c.reason), std::string::npos)
        << c.line << ": " << plan.status().message();
  }
}

// Paths resolve as the kernel's lookup does: "." and ".." only after a directory, a trailing
// slash requires one, empty components vanish, ".." after a symlink is physical.
TEST_F(PlanTest, PathsResolveAsTheKernelDoes) {
  const char* accepted[] = {"./a/1",
                            "a//1",
                            "a/./1",
                            ".//a/1",
                            "b/../a/1",
                            "a/../a/1",
                            "dirlink/../a/1",
                            "dirlink/3",
                            "dirlink//3",
                            "/mnt/set//a/1",
                            "/data/set/./a/../a/1",
                            "b/up",
                            "./#hash"};
  for (const char* path : accepted) {
    auto plan = Build(std::string(path) + "\n");
    ASSERT_TRUE(plan.ok()) << path << ": " << plan.status().message();
  }
  const char* not_a_directory[] = {"a/1/",      "a/1/.",   "a/1/..",   "a/1/../2",
                                   "a/1//",     "link/",   "link/.",   "link/..",
                                   "b/up/../3", "a/1/./.", "./#hash/", "abslink/../1"};
  for (const char* path : not_a_directory) {
    auto plan = Build(std::string("a/2\n") + path + "\n");
    ASSERT_FALSE(plan.ok()) << path;
    const std::string written = path[2] == '#' ? path + 2 : path;  // "./#x" is "#x"
    EXPECT_NE(plan.status().message().find("line 2: '" + written + "': not a directory"),
              std::string::npos)
        << path << ": " << plan.status().message();
  }
  for (const char* path : {"a/", "a/.", "dirlink/", "dirlink/.", ".", "./", "/mnt/set/"}) {
    auto plan = Build(std::string(path) + "\n");
    ASSERT_FALSE(plan.ok()) << path;
    EXPECT_NE(plan.status().message().find("is a directory"), std::string::npos)
        << path << ": " << plan.status().message();
  }
  auto plan = Build("a/" + std::string(256, 'n') + "\n");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("file name too long"), std::string::npos);
}

TEST_F(PlanTest, ReportsEscapeTheUsersBytes) {
  auto plan = Build("a/1\nbad\x1b]0;owned\x07\\\xff\n");
  ASSERT_FALSE(plan.ok());
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find("line 2: 'bad\\x1b]0;owned\\x07\\\\\\xff'"), std::string::npos) << m;
  for (char c : m) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << m;
}

TEST_F(PlanTest, ErrorsAreSortedAndCounted) {
  auto plan = Build("missing1\n\na/1\nmissing2\n");
  ASSERT_FALSE(plan.ok());
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find("3 errors"), std::string::npos) << m;
  EXPECT_LT(m.find("line 1:"), m.find("line 2:"));
  EXPECT_LT(m.find("line 2:"), m.find("line 4:"));
}

TEST_F(PlanTest, AppendKeepsBaseFileIdsAndEpochs) {
  auto base = Build("#epoch\na/1\na/2\n");
  ASSERT_TRUE(base.ok());
  auto plan = Build("#epoch\nb/3\na/1\n#epoch\na/2\n", base.value().get());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan.value()->streams.size(), 1u);
  const PlanStream& p = plan.value()->streams[0];
  EXPECT_EQ(p.serial, base.value()->streams[0].serial);  // the same stream, extended
  EXPECT_EQ(p.epochs(), 3u);
  EXPECT_EQ(p.epoch_begin, (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(p.sequence.ToVector(), (std::vector<uint32_t>{0, 1, 2, 0, 1}));
  EXPECT_EQ(plan.value()->objects[0].freq, 2u);
  EXPECT_EQ(p.EpochOf(3), 1u);
  EXPECT_EQ(p.EpochOf(4), 2u);
  EXPECT_EQ(p.EpochOf(5), 3u);
}

// The parser's index of its paths becomes the plan's index when the plan's objects are the
// manifest's files in order; otherwise (a path written another way, a range, a file larger
// than a chunk, a base) it is not used. Either way every key is found under its own id.
TEST_F(PlanTest, ParsersIndexServesThePlanOnlyWhenItsKeysAreTheFiles) {
  struct Case {
    const char* text;
    bool files_as_written, taken;
    const Plan* base = nullptr;
  };
  auto base = Build("a/1\n");
  ASSERT_TRUE(base.ok());
  const Case cases[] = {
      {"#epoch\na/2\na/1\nb/3\n#epoch\nb/3\na/1\na/2\n", true, true},
      {"a/1\n./a/2\n", false, false},                   // not canonical as written
      {"a/1\na/2\t0+5\n", true, false},                 // a range: two targets of a/2 would differ
      {"a/1\nb/3\n", true, false, base.value().get()},  // a base's objects come first
  };
  for (const Case& c : cases) {
    ManifestParser parser;
    parser.Feed(c.text);
    const ParsedManifest& parsed = parser.Peek();
    auto resolved = ResolveManifest(parsed, resolver_);
    ASSERT_TRUE(resolved.ok()) << c.text << resolved.status().message();
    EXPECT_EQ(resolved.value()->files_as_written, c.files_as_written) << c.text;
    KeyIndex index = std::move(parser).TakePathIndex();
    const size_t indexed = index.size();
    auto plan = MergePlan(c.base, resolved.value(), StreamChange::kAppend, chunk_size_, 0,
                          c.files_as_written ? &index : nullptr);
    ASSERT_TRUE(plan.ok()) << c.text;
    EXPECT_EQ(index.size() == 0 && indexed > 0, c.taken) << c.text;
    const Plan& p = *plan.value();
    for (uint32_t id = 0; id < p.objects.size(); ++id) EXPECT_EQ(p.Find(p.objects[id].key), id);
    EXPECT_EQ(p.Find("a/9"), kNoPos);
  }
  // A file larger than its chunk is chunks, not one object: the index is not the plan's.
  chunk_size_ = 16;
  ManifestParser parser;
  parser.Feed("a/1\nb/3\n");
  auto resolved = ResolveManifest(parser.Peek(), resolver_);
  ASSERT_TRUE(resolved.ok());
  KeyIndex index = std::move(parser).TakePathIndex();
  auto plan = MergePlan(nullptr, resolved.value(), StreamChange::kReplace, chunk_size_, 0, &index);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(plan.value()->objects.size(), 3u);  // a/1, b/3's two chunks
  for (uint32_t id = 0; id < plan.value()->objects.size(); ++id) {
    EXPECT_EQ(plan.value()->Find(plan.value()->objects[id].key), id);
  }
}

TEST_F(PlanTest, InvalidAppendLeavesBaseUntouched) {
  auto base = Build("a/1\n");
  ASSERT_TRUE(base.ok());
  EXPECT_FALSE(Build("missing\n", base.value().get()).ok());
  EXPECT_EQ(base.value()->streams[0].sequence.size(), 1u);
}

// Keys view the manifests' paths: a plan keeps a manifest's arena when most of its files are
// new, and copies the keys of a few new files instead of pinning a big manifest's paths. Keys
// stay valid after the manifests are gone (AddressSanitizer checks the reads).
TEST(PlanKeys, ArenasAdoptedOrCopied) {
  MemBacking backing;
  std::string big, small = "#stream b\n";
  for (int i = 0; i < 1000; ++i) {
    backing.AddFile("d/f" + std::to_string(i), "x");
    big += "d/f" + std::to_string(i) + "\n";
    if (i < 990) small += "d/f" + std::to_string(i) + "\n";
  }
  for (int i = 0; i < 10; ++i) {
    backing.AddFile("new/g" + std::to_string(i), "yy");
    small += "new/g" + std::to_string(i) + "\n";
  }
  PathResolver resolver(backing, {});
  std::shared_ptr<Plan> first;
  {
    auto plan = BuildPlan(Parse(big), resolver, nullptr, StreamChange::kReplace, 1ull << 30);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    first = plan.value();
  }
  // The parser's arena (and the one of rewritten paths) are the plan's.
  ASSERT_EQ(first->arenas.size(), 2u);
  EXPECT_GE(first->arenas[0]->bytes(), 1000u * 5);
  auto second = BuildPlan(Parse(small), resolver, first.get(), StreamChange::kReplace, 1ull << 30);
  ASSERT_TRUE(second.ok()) << second.status().message();
  const Plan& p = *second.value();
  // Base's arenas, plus one of its own holding only the ten new keys.
  ASSERT_EQ(p.arenas.size(), 3u);
  EXPECT_EQ(p.arenas[2]->bytes(), 10u * std::string("new/g0").size());
  first.reset();
  ASSERT_EQ(p.objects.size(), 1010u);
  EXPECT_EQ(p.objects[999].key, "d/f999");
  EXPECT_EQ(p.objects[1009].key, "new/g9");
  EXPECT_EQ(p.Find("new/g3"), 1003u);
  EXPECT_EQ(p.objects[1003].freq, 1u);
  EXPECT_EQ(p.objects[5].freq, 2u);
}

TEST(PlanBatches, ResolutionAcrossBatchesIsInManifestOrder) {
  MemBacking backing;
  constexpr int kFiles = 70'000;  // more than one resolution batch (65,536 paths)
  std::string text;
  for (int i = 0; i < kFiles; ++i) {
    backing.AddFile("d" + std::to_string(i % 97) + "/f" + std::to_string(i), "x");
    text += "d" + std::to_string(i % 97) + "/f" + std::to_string(i) + "\n";
  }
  backing.AddSymlink("alias", "d3/f3");
  text += "alias\n";  // line 70,001: the same file as line 4, across the batch boundary
  PathResolver resolver(backing, {});
  auto plan = BuildPlan(Parse(text), resolver, nullptr, StreamChange::kReplace, 1ull << 30);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan.value()->objects.size(), static_cast<size_t>(kFiles));
  for (int i = 0; i < kFiles; i += 9'999) {
    EXPECT_EQ(plan.value()->objects[i].key,
              "d" + std::to_string(i % 97) + "/f" + std::to_string(i));
  }
  const PositionList& seq = plan.value()->streams[0].sequence;
  EXPECT_EQ(seq[seq.size() - 1], 3u);
  EXPECT_EQ(plan.value()->objects[3].freq, 2u);

  std::string bad = text + "missing-after\n";
  bad.insert(0, "missing-before\n");  // line 1; the other error is on line 70,003
  auto rejected = BuildPlan(Parse(bad), resolver, nullptr, StreamChange::kReplace, 1ull << 30);
  ASSERT_FALSE(rejected.ok());
  const std::string& m = rejected.status().message();
  EXPECT_NE(m.find("2 errors"), std::string::npos) << m;
  EXPECT_LT(m.find("line 1: 'missing-before'"), m.find("line 70003: 'missing-after'")) << m;
}

// Placement on hand-checkable cases: sizes in bytes, frequencies from the access string.
class PlacementTest : public ::testing::Test {
 protected:
  // files: sizes; sequence: file ids in read order.
  std::shared_ptr<Plan> Make(std::vector<uint64_t> sizes, std::vector<uint32_t> sequence) {
    auto p = std::make_shared<Plan>();
    for (size_t i = 0; i < sizes.size(); ++i) {
      p->AddObject("f" + std::to_string(i), {sizes[i], 1});
    }
    p->streams.push_back({"default", 1, PositionList::Of(sequence), {0}});
    p->Finalize();
    return p;
  }
};

TEST_F(PlacementTest, FrequencyThenFirstReferenceFillsFastestTierFirst) {
  // freq: f0=1 f1=3 f2=2 f3=2 f4=1; first: f0=0 f1=1 f2=2 f3=4 f4=5
  auto p = Make({10, 10, 10, 10, 10}, {0, 1, 2, 1, 3, 4, 2, 3, 1});
  PlaceObjects(*p, {{"ram", "ssd"}, {20, 20}, 100});
  // By priority: f1 (3), f2 (2, first 2), f3 (2, first 4), f0 (1, first 0), f4 (1, first 5).
  EXPECT_EQ(p->objects[1].place, Placement::Tier(0));
  EXPECT_EQ(p->objects[2].place, Placement::Tier(0));
  EXPECT_EQ(p->objects[3].place, Placement::Tier(1));
  EXPECT_EQ(p->objects[0].place, Placement::Tier(1));
  EXPECT_EQ(p->objects[4].place, kStaging);
  // Inside a tier: first-reference order.
  EXPECT_EQ(p->tier_order[0], (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(p->tier_order[1], (std::vector<uint32_t>{0, 3}));
}

TEST_F(PlacementTest, FileLargerThanATierGoesToTheNextAndSmallerOnesStillFill) {
  // f0 is hottest but larger than the RAM tier; f1 and f2 still fit there.
  auto p = Make({50, 10, 10, 60}, {0, 0, 1, 2, 3});
  PlaceObjects(*p, {{"ram", "ssd"}, {25, 55}, 40});
  EXPECT_EQ(p->objects[0].place, Placement::Tier(1));
  EXPECT_EQ(p->objects[1].place, Placement::Tier(0));
  EXPECT_EQ(p->objects[2].place, Placement::Tier(0));
  EXPECT_EQ(p->objects[3].place, kDirect);  // fits no tier and is larger than the window
}

TEST_F(PlacementTest, SummaryPredictsBackingTraffic) {
  auto p = Make({10, 20, 30}, {0, 1, 2, 0, 1, 2});
  PlacementLimits limits{{"ram"}, {25}, 100};
  PlaceObjects(*p, limits);
  const PlanSummary s = Summarize(*p, limits);
  EXPECT_EQ(s.files, 3u);
  EXPECT_EQ(s.bytes, 60u);
  EXPECT_EQ(s.positions, 6u);
  ASSERT_EQ(s.tiers.size(), 1u);
  EXPECT_EQ(s.tiers[0].objects + s.staging.objects, 3u);
  // f0 (first 0) then f1 fit in 25? 10+20=30 > 25: f0 in RAM, f1 staged, f2 staged.
  EXPECT_EQ(s.tiers[0].bytes, 10u);
  EXPECT_EQ(s.predicted_backing_bytes, 10u + 2 * 20u + 2 * 30u);
}

// A stream long enough to be counted in two halves on two threads: every object's reads,
// first reference and the stream's distinct objects as a plain count gives them.
TEST(PlanFinalize, CountsLongStreamsExactly) {
  Plan plan;
  const uint32_t objects = 5000;
  for (uint32_t i = 0; i < objects; ++i) {
    plan.AddObject("f" + std::to_string(i), FileVersion{1, 0, 0, i + 1});
  }
  PlanStream big{"big", 1, {}, {}};
  const size_t len = (size_t{1} << 23) + 12345;  // past the two-thread threshold
  // Object 0 only in the second half; object 1 never; the rest spread pseudo-randomly.
  uint64_t x = 88172645463325252ull;
  big.sequence.Extend(len, [&](size_t p) -> uint32_t {
    if (p == len - 7) return 0;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return 2 + static_cast<uint32_t>(x % (objects - 2));
  });
  big.entries = len;
  PlanStream small{"small", 2, PositionList::Of({1, 3, 3}), {0}, 3};
  plan.streams = {big, small};
  plan.Finalize();
  std::vector<uint32_t> freq(objects, 0), first(objects, kNoPos);
  for (const PlanStream* s : {&big, &small}) {
    uint32_t p = 0;
    for (uint32_t id : s->sequence) {
      ++freq[id];
      first[id] = std::min(first[id], p++);
    }
  }
  for (uint32_t i = 0; i < objects; ++i) {
    ASSERT_EQ(plan.objects[i].freq, freq[i]) << i;
    ASSERT_EQ(plan.objects[i].first, first[i]) << i;
  }
  EXPECT_EQ(plan.objects[0].first, len - 7);
  EXPECT_EQ(plan.objects[1].freq, 1u);
  EXPECT_EQ(plan.streams[0].distinct, objects - 1);
  EXPECT_EQ(plan.streams[1].distinct, 2u);
  EXPECT_EQ(plan.dead_objects(), 0u);
  EXPECT_EQ(plan.positions(), len + 3);
}

}  // namespace
}  // namespace clairfs
