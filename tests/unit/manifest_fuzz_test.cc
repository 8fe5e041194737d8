// The manifest fuzzer: generated texts, valid ones mutated and random ones, fed in random
// chunks through ManifestParser + BuildPlan and through Registrar with a real Prefetcher,
// each compared with a reference model written here (its own parser and a plain resolver
// over the same node map, sharing no code with cache/). Fixed seeds (CLAIRFS_FUZZ_SEED replays
// another), a bounded time (fuzz_budget.h).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>

#include "cache/base/log.h"
#include "cache/manifest/compact_manifest.h"
#include "cache/plan/merge.h"
#include "cache/plan/plan.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ram_tier.h"
#include "control/registrar.h"
#include "tests/unit/compact_encode.h"
#include "tests/unit/fuzz_budget.h"
#include "tests/unit/manifest_model.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

// The positions of the default stream (empty when the plan has none).
const PositionList& Positions(const Plan& p) {
  static const PositionList kNone;
  const int s = p.FindStream(kDefaultStream);
  return s < 0 ? kNone : p.streams[s].sequence;
}

using testing::BuildPlan;
using testing::MemBacking;
using namespace manifest_model;  // NOLINT: the model the test compares with

// ---- Generation ----

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool Chance(int percent) { return Pick(100) < static_cast<size_t>(percent); }
  template <typename T>
  const T& Of(const std::vector<T>& v) {
    return v[Pick(v.size())];
  }

  std::string ValidPath() {
    static const std::vector<std::string> kValid = {"a",
                                                    "b/c",
                                                    "b/d",
                                                    "./a",
                                                    "b//c",
                                                    "l_a",
                                                    "l_b/c",
                                                    "b/l_up",
                                                    "l_abs",
                                                    "/data/set/a",
                                                    "/mnt/set/b/d",
                                                    "./#h",
                                                    "e f",
                                                    "dir/sub/g",
                                                    "l_mnt/g",
                                                    "b/../a",
                                                    "dir/sub/../../a",
                                                    "b/l_dotdot/a",
                                                    "l_chain",
                                                    "caf\xc3\xa9",
                                                    "dir/sub/l_top/c",
                                                    "./b/./c"};
    return Of(kValid);
  }
  // Paths built from components: dots, slashes, symlinks in and out of the tree, FIFOs,
  // directories, over-long names.
  std::string ComposedPath() {
    static const std::vector<std::string> kParts = {
        "a",     "b",     "c",        "d",      "dir",     "sub",        "g",
        ".",     "..",    "l_a",      "l_b",    "l_up",    "l_dotdot",   "l_abs",
        "l_mnt", "l_out", "l_absout", "l_loop", "l_ping",  "l_dangling", "l_fifo",
        "fifo",  "empty", "#h",       "e f",    "missing", "l_top",      "l_chain"};
    std::string p;
    const int lead = static_cast<int>(Pick(6));
    if (lead == 0) p = "/data/set/";
    if (lead == 1) p = "/mnt/set/";
    if (lead == 2) p = "./";
    if (lead == 3 && Chance(30)) p = "/data/setx/";
    const size_t n = 1 + Pick(5);
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) p += Chance(15) ? "//" : "/";
      p += Chance(3) ? std::string(256, 'n') : Of(kParts);
    }
    if (Chance(15)) p += "/";
    if (Chance(5)) p += "/.";
    return p;
  }
  std::string RandomBytes() {
    static const std::string kBytes =
        std::string("ab./#\r\t \xff\xef\xbb\xbf\x1b\\", 15) + std::string(1, '\0');
    std::string s;
    const size_t n = Pick(12);
    for (size_t i = 0; i < n; ++i) s += Chance(10) ? static_cast<char>(Pick(256)) : Of2(kBytes);
    return s;
  }
  char Of2(const std::string& s) { return s[Pick(s.size())]; }

  // A range suffix: mostly inside every file of the tree (13 bytes or more), else hostile.
  std::string Range() {
    if (Chance(70)) return "\t" + std::to_string(Pick(6)) + "+" + std::to_string(1 + Pick(7));
    static const std::vector<std::string> kHostile = {"\t0+0",
                                                      "\t-1+5",
                                                      "\t01+2",
                                                      "\t1+02",
                                                      "\t+5",
                                                      "\t5+",
                                                      "\ta+b",
                                                      "\t",
                                                      "\t1-2",
                                                      "\t18446744073709551615+1",
                                                      "\t1+18446744073709551616",
                                                      "\t0+99999",
                                                      "\t40+1",
                                                      "\t3+4 ",
                                                      "\t 3+4",
                                                      "\t3+4\t"};
    return Of(kHostile);
  }

  // One line, without its '\n'.
  std::string AnyLine(size_t entries_so_far) {
    switch (Pick(18)) {
      case 16:
        return ValidPath() + Range();
      case 17:
        return ComposedPath() + Range();
      case 0:
        return "#epoch";
      case 1:
        return Chance(50) ? "#epoch 7" : "#epochal comment";
      case 2:
        return "# comment " + RandomBytes();
      case 3:
        return "#end " + std::to_string(Chance(50) ? entries_so_far : Pick(5));
      case 4:
        return Chance(50) ? "#begin" : "#end";
      case 5:
        return "";
      case 6:
        return ValidPath() + "\r";
      case 7:
        return "\xef\xbb\xbf" + ValidPath();
      case 8:
        return Chance(50) ? std::string("a\0b", 3) : std::string(4096 + Pick(3) - 1, 'x');
      case 9:
        return RandomBytes();
      case 10:
      case 11:
      case 12:
        return ComposedPath();
      default:
        return ValidPath();
    }
  }

  // A valid text (epochs, comments, maybe #begin/#end), then 0-3 mutations.
  std::string Text() {
    std::vector<std::string> lines;
    size_t entries = 0;
    const bool framed = Chance(30);
    if (framed) lines.push_back("#begin");
    const size_t epochs = 1 + Pick(4);
    for (size_t e = 0; e < epochs; ++e) {
      if (e > 0 || Chance(50)) lines.push_back(Chance(80) ? "#epoch" : "#epoch " + RandomBytes());
      const size_t n = 1 + Pick(6);
      for (size_t i = 0; i < n; ++i) {
        if (Chance(10)) lines.push_back("# note");
        lines.push_back(Chance(20) ? ValidPath() + Range() : ValidPath());
        ++entries;
      }
    }
    if (framed || Chance(10)) lines.push_back("#end " + std::to_string(entries));
    const size_t mutations = Chance(25) ? 0 : 1 + Pick(3);
    for (size_t m = 0; m < mutations; ++m) {
      const size_t at = Pick(lines.size() + 1);
      switch (Pick(4)) {
        case 0:  // insert
          lines.insert(lines.begin() + static_cast<long>(at), AnyLine(entries));
          break;
        case 1:  // replace
          if (at < lines.size()) lines[at] = AnyLine(entries);
          break;
        case 2:  // delete
          if (at < lines.size()) lines.erase(lines.begin() + static_cast<long>(at));
          break;
        default:  // swap
          if (at + 1 < lines.size()) std::swap(lines[at], lines[at + 1]);
      }
    }
    std::string text;
    const bool crlf = Chance(10);  // as Windows editors write it
    for (const auto& l : lines) text += l + (crlf ? "\r\n" : "\n");
    if (Chance(5)) text = "\xEF\xBB\xBF" + text;
    if (Chance(10) && !text.empty()) text.resize(Pick(text.size()));  // cut off anywhere
    if (Chance(5) && !text.empty()) text[Pick(text.size())] = static_cast<char>(Pick(256));
    if (Chance(10) && !text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }
  std::string RandomText() {
    std::string text;
    const size_t n = Pick(10);
    for (size_t i = 0; i < n; ++i) text += AnyLine(i) + "\n";
    if (Chance(20)) text += RandomBytes();
    return text;
  }
  // Write sizes: 1 byte to the whole text.
  std::vector<std::string_view> Chunks(std::string_view text) {
    std::vector<std::string_view> out;
    const size_t max = Chance(30) ? 3 : Chance(50) ? 64 : text.size() + 1;
    while (!text.empty()) {
      const size_t n = 1 + Pick(std::min(max, text.size()));
      out.push_back(text.substr(0, n));
      text.remove_prefix(n);
    }
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

uint64_t FirstReportedLine(const std::string& report) {
  const size_t at = report.find("\nline ");
  return at == std::string::npos ? 0 : std::stoull(report.substr(at + 6));
}

class ManifestFuzz : public ::testing::Test {
 protected:
  ManifestFuzz() : tree_(Tree()) {
    SetLogLevel(LogLevel::kError);  // every rejection is logged: 20,000 warnings
    for (const auto& [path, node] : tree_) {
      if (path.empty()) continue;
      switch (node.kind) {
        case Kind::kFile:
          backing_.AddFile(path, "contents of " + path);
          break;
        case Kind::kDir:
          backing_.AddDir(path);
          break;
        case Kind::kLink:
          backing_.AddSymlink(path, node.target);
          break;
        case Kind::kFifo:
          backing_.AddFifo(path);
          break;
      }
    }
  }
  std::map<std::string, Node> tree_;
  MemBacking backing_;
};

// 22,000 inputs through each path on an idle machine (the aim: at least 20,000), fewer
// when the time budget of tests/unit/fuzz_budget.h runs out first (a loaded machine, a
// sanitizer build). The ThreadSanitizer build looks for races, which single-threaded parsing has
// none of, at ~20x the cost: a tenth.
#if defined(__SANITIZE_THREAD__)
constexpr int kInputs = 2'200;
#else
constexpr int kInputs = 22'000;
#endif

TEST_F(ManifestFuzz, ParserAndPlanAgreeWithTheModel) {
  const testing::FuzzBudget budget(0xC1A1F5, kInputs);
  PathResolver resolver(backing_, kAliases);
  Gen gen(budget.seed());
  int inputs = 0, accepted = 0, compact_checked = 0;
  for (int i = 0; budget.More(i); ++i) {
    const std::string text = gen.Chance(70) ? gen.Text() : gen.RandomText();
    ManifestParser parser;
    for (std::string_view chunk : gen.Chunks(text)) {
      parser.Feed(chunk);
      if (gen.Chance(10)) (void)parser.Peek();  // a close() of a dup mid-text
    }
    auto plan = BuildPlan(std::move(parser).Finish(), resolver, nullptr, StreamChange::kReplace,
                          1ull << 30);
    const ModelResult want = Model(tree_, text);
    ++inputs;
    ASSERT_EQ(plan.ok(), want.ok) << "input " << i << ": " << ::testing::PrintToString(text) << "\n"
                                  << (plan.ok() ? "" : plan.status().message());
    if (!want.ok) {
      ASSERT_EQ(FirstReportedLine(plan.status().message()), want.first_error_line)
          << "input " << i << ": " << ::testing::PrintToString(text) << "\n"
          << plan.status().message();
      for (char c : plan.status().message()) {
        ASSERT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << plan.status().message();
      }
      continue;
    }
    ++accepted;
    const Plan& plan_ = *plan.value();
    if (want.entries.empty()) {  // an empty replacement removes the stream
      ASSERT_TRUE(plan_.streams.empty()) << ::testing::PrintToString(text);
      continue;
    }
    ASSERT_EQ(plan_.streams.size(), 1u);
    const PlanStream& p = plan_.streams[0];
    ASSERT_EQ(p.epoch_begin, want.epochs) << ::testing::PrintToString(text);
    ASSERT_EQ(p.sequence.size(), want.entries.size()) << ::testing::PrintToString(text);
    for (size_t k = 0; k < p.sequence.size(); ++k) {
      ASSERT_EQ(plan_.objects[p.sequence[k]].key, want.entries[k])
          << ::testing::PrintToString(text);
    }
    // The same entries in the compact form plan the same.
    CompactManifestParser compact;
    const std::string bytes = testing::EncodeCompact(testing::CompactOf("", EntryLines(text)));
    Gen split(static_cast<uint64_t>(i));  // its own: the texts generated stay as they were
    for (std::string_view chunk : split.Chunks(bytes)) compact.Feed(chunk);
    auto cplan = BuildPlan(std::move(compact).Finish(), resolver, nullptr, StreamChange::kReplace,
                           1ull << 30);
    ASSERT_TRUE(cplan.ok()) << ::testing::PrintToString(text) << cplan.status().message();
    const Plan& c = *cplan.value();
    ASSERT_EQ(c.streams.size(), 1u);
    ASSERT_EQ(c.streams[0].name, p.name);
    ASSERT_EQ(c.streams[0].epoch_begin, p.epoch_begin) << ::testing::PrintToString(text);
    ASSERT_EQ(c.streams[0].sequence, p.sequence) << ::testing::PrintToString(text);
    ASSERT_EQ(c.objects.size(), plan_.objects.size());
    for (size_t k = 0; k < c.objects.size(); ++k) ASSERT_EQ(c.objects[k].key, plan_.objects[k].key);
    ++compact_checked;
  }
  EXPECT_GE(inputs, testing::FuzzBudget::kFloor);
  EXPECT_GT(accepted, inputs / 10);  // the generator reaches both sides
  EXPECT_GT(inputs - accepted, inputs / 10);
  EXPECT_GT(compact_checked, accepted / 2);
  budget.Report("parser and plan", inputs,
                std::to_string(accepted) + " accepted, " + std::to_string(compact_checked) +
                    " also as compact");
}

// Through the control plane as the FUSE handlers drive it: writes in chunks (some at a wrong
// offset, refused), closes of dups mid-text, ftruncate(0) and a rewrite, the final close and
// release. A rejected text leaves the very same Plan object; an accepted one is installed.
TEST_F(ManifestFuzz, RegistrarInstallsOnlyWholeValidTexts) {
  const testing::FuzzBudget budget(0x5EED, kInputs);
  RamTier ram("ram", 1 << 20);
  PrefetchOptions o;
  o.staging_capacity = 1 << 20;
  o.staging_threads = 1;
  o.tier_threads = {1};
  o.demand_threads = 1;
  Stats stats;
  Prefetcher prefetcher(backing_, {&ram}, o, &stats);
  prefetcher.Start();
  Registrar control(backing_, prefetcher, stats, kAliases);
  Gen gen(budget.seed());
  int inputs = 0, accepted = 0, refused_at_write = 0;
  for (int i = 0; budget.More(i); ++i) {
    const std::string text = gen.Chance(70) ? gen.Text() : gen.RandomText();
    const ModelResult want = Model(tree_, text);
    const bool append = gen.Chance(20);
    const std::shared_ptr<const Plan> before = prefetcher.plan();
    auto w = control.OpenWriter(append, !append);
    if (gen.Chance(10)) {  // a false start, thrown away by ftruncate(fd, 0)
      const std::string junk = gen.RandomText() + "\nmissing\n";
      const Status s = control.Write(*w, junk, 0, false);  // refused at once if a line is bad
      ASSERT_TRUE(s.ok() || s.code() == Code::kInvalidArgument);
      ASSERT_FALSE(control.Truncate(*w, 1 + gen.Pick(5)).ok());
      ASSERT_TRUE(control.Truncate(*w, 0).ok());
    }
    uint64_t offset = 0;
    bool refused = false;  // a write failed: the text is rejected, every later write fails
    for (std::string_view chunk : gen.Chunks(text)) {
      if (gen.Chance(5)) {  // a hole, or a rewrite of what the text holds: refused
        const uint64_t wrong =
            offset > 0 && gen.Chance(50) ? gen.Pick(offset) : offset + 1 + gen.Pick(10);
        Status s = control.Write(*w, chunk, wrong, false);
        ASSERT_FALSE(s.ok()) << "a write at the wrong offset was taken";
        if (!refused) {
          ASSERT_EQ(s.os_errno(), ESPIPE);
        }
      }
      const Status s = control.Write(*w, chunk, append ? 0 : offset, append);
      offset += chunk.size();
      if (refused) {
        ASSERT_EQ(s.code(), Code::kInvalidArgument) << "a write after a refused one was taken";
      } else if (!s.ok()) {
        ASSERT_FALSE(want.ok) << "a write refused a text close() accepts: "
                              << ::testing::PrintToString(text);
        ASSERT_EQ(s.code(), Code::kInvalidArgument);
        ASSERT_EQ(control.ErrorsText(), s.message());
        refused = true;
        ++refused_at_write;
      } else if (text[0] != '\0') {  // a compact text (its own fuzzer covers it)
        ASSERT_LT(offset, want.first_lexical_end)
            << "a write completing an invalid line was taken: " << ::testing::PrintToString(text);
      }
      if (gen.Chance(5)) {
        (void)control.Flush(*w);  // a dup closed mid-text: validates, installs nothing
        ASSERT_EQ(prefetcher.plan().get(), before.get()) << ::testing::PrintToString(text);
      }
    }
    const Status closed = control.Flush(*w);
    if (refused) {
      ASSERT_FALSE(closed.ok());
    }
    ASSERT_EQ(prefetcher.plan().get(), before.get());
    control.Release(*w);
    ++inputs;
    const bool ok = closed.ok();
    ASSERT_EQ(ok, want.ok) << "input " << i << ": " << ::testing::PrintToString(text);
    if (!ok) {
      ASSERT_EQ(closed.code(), Code::kInvalidArgument);
      ASSERT_EQ(prefetcher.plan().get(), before.get()) << "a rejected text changed the plan";
      ASSERT_EQ(control.ErrorsText(), closed.message());
      continue;
    }
    ++accepted;
    auto now = prefetcher.plan();
    if (append && text.empty()) {  // an append that wrote nothing changes nothing
      ASSERT_EQ(now.get(), before.get());
      continue;
    }
    ASSERT_NE(now.get(), before.get());
    const size_t base = append && before ? Positions(*before).size() : 0;
    ASSERT_EQ(Positions(*now).size(), base + want.entries.size());
    for (size_t k = 0; k < want.entries.size(); ++k) {
      ASSERT_EQ(now->objects[Positions(*now)[base + k]].key, want.entries[k]);
    }
    ASSERT_EQ(control.ErrorsText(), "");
    if (Positions(*now).size() > 10'000) {  // keep appends from growing the plan without end
      auto clear = control.OpenWriter(false, true);
      control.Release(*clear);
    }
  }
  prefetcher.Stop();
  EXPECT_GE(inputs, testing::FuzzBudget::kFloor);
  EXPECT_GT(accepted, inputs / 10);
  EXPECT_GT(refused_at_write, inputs / 10);
  budget.Report("control plane", inputs,
                std::to_string(accepted) + " accepted, " + std::to_string(refused_at_write) +
                    " refused at a write");
}

}  // namespace
}  // namespace clairfs

namespace clairfs {
namespace {

// The kernel sends release asynchronously after close(): an earlier writer's release that
// arrives after a later writer's rejected close() installs its plan, but must not clear the
// later rejection's report (a job checking `errors` after its failed close would see "").
TEST_F(ManifestFuzz, ALateReleaseNeverClearsALaterRejection) {
  RamTier ram("ram", 1 << 20);
  PrefetchOptions o;
  o.staging_capacity = 1 << 20;
  Stats stats;
  Prefetcher prefetcher(backing_, {&ram}, o, &stats);
  Registrar control(backing_, prefetcher, stats, kAliases);
  auto first = control.OpenWriter(false, true);
  ASSERT_TRUE(control.Write(*first, "a\n", 0, false).ok());
  ASSERT_TRUE(control.Flush(*first).ok());  // close() returned; release still in flight
  auto second = control.OpenWriter(false, true);
  // Its last line not ended: refused at close(), not at the write.
  ASSERT_TRUE(control.Write(*second, "a\nmissing", 0, false).ok());
  EXPECT_FALSE(control.Flush(*second).ok());
  const std::string report = control.ErrorsText();
  EXPECT_NE(report.find("line 2: 'missing'"), std::string::npos) << report;
  control.Release(*first);  // the late release: installs the first plan
  ASSERT_NE(prefetcher.plan(), nullptr);
  EXPECT_EQ(prefetcher.plan()->entries(), 1u);
  EXPECT_EQ(control.ErrorsText(), report);
  control.Release(*second);
  EXPECT_EQ(control.ErrorsText(), report);
  // A later accepted manifest clears it.
  auto third = control.OpenWriter(false, true);
  ASSERT_TRUE(control.Write(*third, "b/c\n", 0, false).ok());
  ASSERT_TRUE(control.Flush(*third).ok());
  control.Release(*third);
  EXPECT_EQ(control.ErrorsText(), "");
  prefetcher.Stop();
}

}  // namespace
}  // namespace clairfs
