// The compact manifest form: round trips against the text form (parsed content and plans),
// input split anywhere, Peek(), hostile headers and sections, and a mutation fuzzer checked
// against a whole-buffer reference decoder written here.
#include "cache/manifest/compact_manifest.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <optional>
#include <random>

#include "cache/base/log.h"
#include "cache/plan/merge.h"
#include "cache/plan/plan.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ram_tier.h"
#include "control/registrar.h"
#include "tests/unit/compact_encode.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using testing::BuildPlan;
using testing::CompactManifest;
using testing::CompactOf;
using testing::EncodeCompact;
using testing::MemBacking;
using testing::SetLe;
using testing::TextOf;
using Epochs = std::vector<std::vector<std::string>>;

ParsedManifest ParseCompact(std::string_view bytes, size_t chunk = 0, bool peek = false) {
  CompactManifestParser p;
  if (chunk == 0) chunk = bytes.size() + 1;
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    p.Feed(bytes.substr(i, chunk));
    if (peek) (void)p.Peek();
  }
  EXPECT_EQ(p.bytes_fed(), bytes.size());
  return std::move(p).Finish();
}

ParsedManifest ParseText(std::string_view text) {
  ManifestParser p;
  p.Feed(text);
  return std::move(p).Finish();
}

// What a manifest says, independent of where it says it (no line or item numbers).
std::string Content(const ParsedManifest& m) {
  std::string s = "stream '" + m.stream + "'\npaths:";
  for (const auto& p : m.paths) s += " '" + std::string(p) + "'";
  s += "\ntargets:";
  for (const auto& t : m.targets) {
    s += " " + std::to_string(t.path) + "@" + std::to_string(t.range.offset) + "+" +
         std::to_string(t.range.length);
  }
  s += "\nsequence:";
  for (uint32_t v : m.sequence) s += " " + std::to_string(v);
  s += "\nepochs:";
  for (uint32_t v : m.epoch_begin) s += " " + std::to_string(v);
  return s + "\n";
}

// Everything a parse produced, locations and errors included.
std::string Dump(const ParsedManifest& m) {
  std::string s = Content(m) + "lines " + std::to_string(m.lines) + "\npath_line:";
  for (uint64_t l : m.path_line) s += " " + std::to_string(l);
  s += "\ntarget lines:";
  for (const auto& t : m.targets) s += " " + std::to_string(t.line);
  s += "\nerrors " + std::to_string(m.error_count) + ":\n";
  for (const auto& e : m.errors) s += std::to_string(e.line) + ": " + e.message + "\n";
  return s;
}

std::string FirstError(const ParsedManifest& m) {
  return m.errors.empty() ? "" : m.errors[0].message;
}

// Epochs of entry lines exercising whole-file and range entries, a repeated path, an
// escaped '#' and a space.
Epochs Sample() {
  return {{"a", "b/c", "big\t0+300", "a", "./#h"},
          {"big\t300+10", "e f", "big\t0+300", "b/c"},
          {"big", "a", "big\t1000+24"}};
}

class CompactTest : public ::testing::Test {
 protected:
  CompactTest() : resolver_(backing_, {"/data/set"}) {
    backing_.AddFile("a", std::string(100, 'a'));
    backing_.AddFile("b/c", std::string(10, 'c'));
    backing_.AddFile("#h", "h");
    backing_.AddFile("e f", "ef");
    backing_.AddFile("big", std::string(1024, 'B'));
  }
  // The plans of the text and compact forms of epochs (appended to base's if given).
  std::pair<std::shared_ptr<Plan>, std::shared_ptr<Plan>> Plans(
      const std::string& stream, const Epochs& epochs, const Plan* text_base = nullptr,
      const Plan* compact_base = nullptr) {
    const auto change = text_base ? StreamChange::kAppend : StreamChange::kReplace;
    auto text = BuildPlan(ParseText(TextOf(stream, epochs)), resolver_, text_base, change, 256);
    auto compact = BuildPlan(ParseCompact(EncodeCompact(CompactOf(stream, epochs))), resolver_,
                             compact_base, change, 256);
    EXPECT_TRUE(text.ok()) << text.status().message();
    EXPECT_TRUE(compact.ok()) << compact.status().message();
    if (!text.ok() || !compact.ok()) return {};
    return {text.value(), compact.value()};
  }
  static void ExpectSamePlan(const Plan& a, const Plan& b) {
    ASSERT_EQ(a.objects.size(), b.objects.size());
    for (size_t i = 0; i < a.objects.size(); ++i) {
      EXPECT_EQ(a.objects[i].key, b.objects[i].key);
      EXPECT_EQ(a.objects[i].freq, b.objects[i].freq);
      EXPECT_EQ(a.objects[i].first, b.objects[i].first);
    }
    ASSERT_EQ(a.streams.size(), b.streams.size());
    for (size_t i = 0; i < a.streams.size(); ++i) {
      EXPECT_EQ(a.streams[i].name, b.streams[i].name);
      EXPECT_EQ(a.streams[i].sequence, b.streams[i].sequence);
      EXPECT_EQ(a.streams[i].epoch_begin, b.streams[i].epoch_begin);
    }
    EXPECT_EQ(a.entries(), b.entries());
    EXPECT_EQ(a.range_entries(), b.range_entries());
    EXPECT_EQ(a.grids, b.grids);
  }
  MemBacking backing_;
  PathResolver resolver_;
};

TEST_F(CompactTest, SaysWhatTheTextSays) {
  for (const std::string stream : {"", "rank-3@job:7+x"}) {
    const auto text = ParseText(TextOf(stream, Sample()));
    const auto compact = ParseCompact(EncodeCompact(CompactOf(stream, Sample())));
    ASSERT_TRUE(text.ok()) << Dump(text);
    ASSERT_TRUE(compact.ok()) << Dump(compact);
    EXPECT_EQ(Content(compact), Content(text));
    EXPECT_EQ(compact.form, ManifestForm::kCompact);
    EXPECT_EQ(compact.stream, stream);
    EXPECT_EQ(compact.lines, 8u);  // items
    // Items a, b/c, big 0+300, ./#h, big 300+10, e f, big, big 1000+24: the paths' first items.
    EXPECT_EQ(compact.path_line, (std::vector<uint64_t>{1, 2, 3, 4, 6}));
    ASSERT_EQ(compact.targets.size(), 8u);
    EXPECT_EQ(compact.targets[4].line, 5u);
    EXPECT_EQ(compact.paths[3], "#h");
  }
}

TEST_F(CompactTest, PlansEqualTheTextForms) {
  auto [text, compact] = Plans("s1", Sample());
  ASSERT_TRUE(text && compact);
  ExpectSamePlan(*text, *compact);
  ASSERT_EQ(compact->streams.size(), 1u);
  EXPECT_EQ(compact->streams[0].name, "s1");
  EXPECT_EQ(compact->streams[0].epochs(), 3u);
  EXPECT_GT(compact->range_entries(), 0u);
  EXPECT_FALSE(compact->grids.empty());  // big is read as chunks
  // Appended epochs merge alike.
  const Epochs more = {{"e f", "big\t512+512"}, {"./#h"}};
  auto [text2, compact2] = Plans("s1", more, text.get(), compact.get());
  ASSERT_TRUE(text2 && compact2);
  ExpectSamePlan(*text2, *compact2);
  EXPECT_EQ(compact2->streams[0].epochs(), 5u);
}

TEST_F(CompactTest, DuplicateAndUnreferencedItems) {
  // Items may repeat (one target) and need not be read (they are still checked and resolved).
  CompactManifest m{"", {"a", "b/c", "a", "big\t0+1", "big\t0+1"}, {{2, 0, 4}, {3}}};
  const auto p = ParseCompact(EncodeCompact(m));
  ASSERT_TRUE(p.ok()) << Dump(p);
  EXPECT_EQ(Content(p),
            "stream ''\npaths: 'a' 'b/c' 'big'\ntargets: 0@0+0 1@0+0 2@0+1\nsequence: 0 0 2 2\n"
            "epochs: 0 3\n");
  m.items[1] = "missing";
  auto plan =
      BuildPlan(ParseCompact(EncodeCompact(m)), resolver_, nullptr, StreamChange::kReplace, 256);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("\nitem 2: 'missing': "), std::string::npos)
      << plan.status().message();
}

TEST(CompactManifest, SplitAnywhereAndPeekChangeNothing) {
  std::vector<std::string> inputs = {EncodeCompact(CompactOf("x", Sample()))};
  // Inputs with errors too: bad items, a structural error, a cut-off.
  inputs.push_back(EncodeCompact({"", {"a", "#b", "c\nd", "", "e\t1-2"}, {{0, 1, 2, 3, 4}}}));
  inputs.push_back(inputs[0]);
  SetLe(inputs.back(), inputs.back().size() - 20, 7, 4);  // an index out of range
  inputs.push_back(inputs[0].substr(0, inputs[0].size() - 9));
  for (const auto& in : inputs) {
    const std::string whole = Dump(ParseCompact(in));
    EXPECT_EQ(Dump(ParseCompact(in, 1)), whole);
    EXPECT_EQ(Dump(ParseCompact(in, 3)), whole);
    EXPECT_EQ(Dump(ParseCompact(in, 1, true)), whole);
    EXPECT_EQ(Dump(ParseCompact(in, 7, true)), whole);
    // Peek at every prefix is the prefix's Finish.
    CompactManifestParser p;
    for (size_t i = 0; i < in.size(); ++i) {
      p.Feed(in.substr(i, 1));
      if (i % 5 == 0 || i + 1 == in.size()) {
        ASSERT_EQ(Dump(p.Peek()), Dump(ParseCompact(in.substr(0, i + 1)))) << "prefix " << i + 1;
      }
    }
    EXPECT_EQ(Dump(std::move(p).Finish()), whole);
  }
}

TEST(CompactManifest, CutOffAnywhereIsRejectedAtItsEnd) {
  const std::string in = EncodeCompact(CompactOf("name", Sample()));
  for (size_t n = 0; n < in.size(); ++n) {
    const auto m = ParseCompact(in.substr(0, n));
    ASSERT_FALSE(m.ok()) << n;
    ASSERT_EQ(m.error_count, 1u) << Dump(m);
    EXPECT_EQ(m.errors[0].line, 0u);
    EXPECT_EQ(m.errors[0].message.rfind("at byte " + std::to_string(n) + ": the input ends", 0), 0u)
        << m.errors[0].message;
    EXPECT_NE(m.errors[0].message.find("trailer is missing"), std::string::npos);
  }
  EXPECT_TRUE(ParseCompact(in).ok());
}

// A valid encoding with field `at` (n bytes) set to v: its first error.
std::string WithField(size_t at, uint64_t v, size_t n, const CompactManifest& m) {
  std::string in = EncodeCompact(m);
  SetLe(in, at, v, n);
  const auto p = ParseCompact(in);
  EXPECT_FALSE(p.ok());
  if (p.ok()) return "";
  EXPECT_EQ(p.errors[0].line, 0u);
  return FirstError(p);
}

TEST(CompactManifest, HostileHeadersAreRejected) {
  const CompactManifest m{"", {"a", "b"}, {{0, 1}, {1}}};  // I 2, B 4, E 2, N 3
  struct Case {
    size_t at, n;
    uint64_t v;
    const char* message;
  };
  const std::vector<Case> cases = {
      {0, 1, 'X', "at byte 0: not a compact manifest"},
      {7, 1, 'S', "at byte 0: not a compact manifest"},
      {8, 4, 2, "at byte 8: format version 2: this clairfs reads version 1"},
      {12, 4, 1, "at byte 12: flags 1: no flag is defined"},
      {16, 8, 0, "at byte 16: item count 0 outside 1 to 4294967280"},
      {16, 8, 1ull << 32, "at byte 16: item count 4294967296 outside"},
      {16, 8, UINT64_MAX, "at byte 16: item count 18446744073709551615 outside"},
      {24, 8, 1, "at byte 24: item bytes 1 outside 2 to 8192"},
      {24, 8, 8193, "at byte 24: item bytes 8193 outside"},
      {24, 8, UINT64_MAX, "at byte 24: item bytes 18446744073709551615 outside"},
      {32, 8, 0, "at byte 32: epoch count 0 outside 1 to 1048576"},
      {32, 8, (1 << 20) + 1, "at byte 32: epoch count 1048577 outside"},
      {40, 8, 0, "at byte 40: entry count 0 outside 1 to 4294967280"},
      {40, 8, 0xFFFFFFF1u, "at byte 40: entry count 4294967281 outside"},
      {40, 8, 1, "at byte 40: entry count 1 below the epoch count 2"},
      {48, 2, 129, "at byte 48: stream name length 129 above 128"},
      {48, 2, 0xFFFF, "at byte 48: stream name length 65535 above 128"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(WithField(c.at, c.v, c.n, m).rfind(c.message, 0), 0u)
        << c.message << " / " << WithField(c.at, c.v, c.n, m);
  }
}

TEST(CompactManifest, BadStreamNames) {
  for (const std::string& name : std::vector<std::string>{
           "-x", ".x", "a b", "a/b", std::string("a\0b", 3), std::string(127, 'n') + "\xff"}) {
    std::string in = EncodeCompact({name, {"a"}, {{0}}});
    const auto p = ParseCompact(in);
    ASSERT_FALSE(p.ok()) << name;
    EXPECT_EQ(FirstError(p).rfind("at byte 50: ", 0), 0u) << FirstError(p);
    EXPECT_NE(FirstError(p).find("stream name"), std::string::npos) << FirstError(p);
  }
  const auto ok = ParseCompact(EncodeCompact({std::string(128, 'n'), {"a"}, {{0}}}));
  EXPECT_TRUE(ok.ok()) << Dump(ok);
}

TEST(CompactManifest, HugeDeclaredCountsCostOnlyWhatArrives) {
  // 2^32 - 16 items of up to 4096 bytes, 2^20 epochs, then 10 bytes of data: cut off, fast,
  // and nothing allocated for the promised counts.
  std::string in = EncodeCompact({"", {"a"}, {{0}}}).substr(0, 50);
  SetLe(in, 16, 0xFFFFFFF0u, 8);
  SetLe(in, 24, 0xFFFFFFF0ull * 4096, 8);
  SetLe(in, 32, 1 << 20, 8);
  SetLe(in, 40, 0xFFFFFFF0u, 8);
  const size_t before = mallinfo2().uordblks;
  CompactManifestParser p;
  p.Feed(in + std::string("abcd\0efg\0z", 10));
  const ParsedManifest& m = p.Peek();
  EXPECT_LT(mallinfo2().uordblks - before, size_t{1} << 20);  // no big allocation
  ASSERT_EQ(m.error_count, 1u) << Dump(m);
  EXPECT_EQ(FirstError(m),
            "at byte 60: the input ends inside the item section, after 2 of 4294967280 items "
            "(cut off: the trailer is missing)");
  EXPECT_EQ(m.paths.size(), 2u);
  // An epoch claiming 2^32 - 16 entries of a manifest with one item: as cheap.
  std::string e = EncodeCompact({"", {"a"}, {{0}}}).substr(0, 52);
  SetLe(e, 40, 0xFFFFFFF0u, 8);
  e += std::string("\xF0\xFF\xFF\xFF", 4) + std::string(8, '\0');
  CompactManifestParser q;
  q.Feed(e);
  EXPECT_EQ(FirstError(q.Peek()),
            "at byte 64: the input ends inside epoch 1 of 1, after entry 2 of 4294967280 (cut "
            "off: the trailer is missing)");
}

TEST(CompactManifest, SectionsMustAddUp) {
  const CompactManifest m{"", {"a", "b"}, {{0, 1}, {1}}};
  const std::string good = EncodeCompact(m);  // items at 50..53, epochs at 54, trailer at 74
  auto first = [](const std::string& in) { return FirstError(ParseCompact(in)); };
  // Item bytes that do not match the items.
  EXPECT_EQ(first(good.substr(0, 24) + std::string("\5\0\0\0\0\0\0\0", 8) + good.substr(32)),
            "at byte 54: the item section goes on after its 2 items (the header gives it 5 "
            "bytes)");
  EXPECT_EQ(first(good.substr(0, 24) + std::string("\3\0\0\0\0\0\0\0", 8) + good.substr(32)),
            "at byte 53: the item section's 3 bytes end after 1 of its 2 items (the last one has "
            "no terminating NUL)");
  std::string in = good;
  in[51] = 'x';  // "axb\0": one item in 4 bytes
  EXPECT_EQ(first(in), "at byte 54: the item section's 4 bytes end after 1 of its 2 items");
  // Epochs.
  in = good;
  SetLe(in, 54, 0, 4);
  EXPECT_EQ(first(in), "at byte 54: epoch 1 has no entries (count 0)");
  in = good;
  SetLe(in, 54, 4, 4);
  EXPECT_EQ(first(in),
            "at byte 54: epoch 1 counts 4 entries, more than the 3 left of the "
            "header's 3");
  in = good;
  SetLe(in, 62, 2, 4);
  EXPECT_EQ(first(in), "at byte 62: entry 2 (epoch 1) is item index 2, the items are 0 to 1");
  in = good;
  SetLe(in, 62, 0xFFFFFFFFu, 4);
  EXPECT_EQ(first(in),
            "at byte 62: entry 2 (epoch 1) is item index 4294967295, the items are 0 to 1");
  in = good;
  SetLe(in, 40, 4, 8);  // N 4, the epochs hold 3
  EXPECT_EQ(first(in), "at byte 74: the 2 epochs hold 3 entries, the header's entry count is 4");
  // Trailer and after.
  in = good;
  SetLe(in, 74, 2, 8);
  EXPECT_EQ(first(in), "at byte 74: the trailer counts 2 entries, the header 3 (mangled?)");
  in = good;
  in[89] = 't';
  EXPECT_EQ(first(in),
            "at byte 82: the trailer does not end with the magic \"\\0clairfs\" (mangled?)");
  EXPECT_EQ(first(good + "\n"), "at byte 90: bytes after the trailer");
  EXPECT_EQ(first(good + good), "at byte 90: bytes after the trailer");
  EXPECT_TRUE(ParseCompact(good).ok());
}

TEST(CompactManifest, ItemsAreCheckedLikeTextLines) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty path"},
      {"#x", "item begins with '#' (a path beginning with '#' is written './#...')"},
      {"a\nb", "item contains a line feed"},
      {"a\n", "item contains a line feed"},
      {"a\t1-2", "malformed range after the last TAB"},
      {"a\t0+0", "empty range (length 0)"},
      {"a\t01+2", "malformed range"},
      {"a\t18446744073709551615+1", "range overflows"},
      {"\t0+1", "empty path"},
      {std::string(4096, 'x'), "item is longer than PATH_MAX (4096 bytes)"},
  };
  for (const auto& [item, message] : cases) {
    const auto p = ParseCompact(EncodeCompact({"", {"ok", item, "b"}, {{0, 1, 2}}}));
    ASSERT_EQ(p.error_count, 1u) << ::testing::PrintToString(item) << Dump(p);
    EXPECT_EQ(p.errors[0].line, 2u);
    EXPECT_EQ(p.errors[0].message.rfind(message, 0), 0u) << p.errors[0].message;
    EXPECT_EQ(p.paths.size(), 2u);  // ok and b
  }
  // At the limit: 4095 bytes, "./#h", a path with a TAB and a range, '\r' and UTF-8 kept.
  const auto p = ParseCompact(
      EncodeCompact({"",
                     {std::string(4095, 'x'), "./#h", "t\tab\t0+1", "r\r", "caf\xc3\xa9"},
                     {{0, 1, 2, 3, 4}}}));
  ASSERT_TRUE(p.ok()) << Dump(p);
  EXPECT_EQ(p.paths[1], "#h");
  EXPECT_EQ(p.paths[2], "t\tab");
  EXPECT_EQ(p.paths[3], "r\r");
}

TEST(CompactManifest, ErrorsAreCappedAndTheStructuralOneIsKept) {
  CompactManifest m{"", {}, {{}}};
  for (int i = 0; i < 30; ++i) {
    m.items.push_back("#" + std::to_string(i));
    m.epochs[0].push_back(static_cast<uint32_t>(i));
  }
  std::string in = EncodeCompact(m);
  const auto all = ParseCompact(in);
  EXPECT_EQ(all.error_count, 30u);
  EXPECT_EQ(all.errors.size(), CompactManifestParser::kMaxErrors - 1);
  EXPECT_EQ(all.errors.back().line, 19u);
  const auto cut = ParseCompact(in.substr(0, in.size() - 1));
  EXPECT_EQ(cut.error_count, 31u);
  ASSERT_EQ(cut.errors.size(), CompactManifestParser::kMaxErrors);
  EXPECT_EQ(cut.errors.back().line, 0u);
  // The report: structural errors alone, item errors as "item N: ".
  MemBacking backing;
  PathResolver resolver(backing, {});
  auto plan = BuildPlan(cut, resolver, nullptr, StreamChange::kReplace, 256);
  ASSERT_FALSE(plan.ok());
  const std::string& r = plan.status().message();
  EXPECT_EQ(r.rfind("manifest rejected: 31 errors\nat byte " + std::to_string(in.size() - 1) +
                        ": the input ends inside the trailer",
                    0),
            0u)
      << r;
  EXPECT_NE(r.find("\nitem 1: item begins with '#'"), std::string::npos) << r;
  EXPECT_NE(r.find("(11 more)\n"), std::string::npos) << r;
}

TEST(CompactManifest, InputPicksTheFormByItsFirstByte) {
  const std::string compact = EncodeCompact(CompactOf("s", Sample()));
  for (size_t chunk : {size_t{1}, size_t{1000}}) {
    ManifestInput in;
    EXPECT_TRUE(in.Peek().ok());  // nothing written: an empty text
    EXPECT_EQ(in.Peek().form, ManifestForm::kText);
    in.Feed("");
    for (size_t i = 0; i < compact.size(); i += chunk) in.Feed(compact.substr(i, chunk));
    EXPECT_EQ(in.bytes_fed(), compact.size());
    const auto m = std::move(in).Finish();
    EXPECT_EQ(m.form, ManifestForm::kCompact);
    EXPECT_EQ(Dump(m), Dump(ParseCompact(compact)));
  }
  ManifestInput text;
  text.Feed("a\n");
  text.Feed(std::string("\0", 1));
  const auto t = std::move(text).Finish();
  EXPECT_EQ(t.form, ManifestForm::kText);
  EXPECT_EQ(FirstError(t), "path contains a NUL byte");
}

// Through Registrar as the FUSE handlers drive it: a compact manifest written in pieces is
// validated at close() and installed at release; a broken one changes nothing.
TEST_F(CompactTest, RegistrarInstallsACompactManifest) {
  SetLogLevel(LogLevel::kError);
  RamTier ram("ram", 1 << 20);
  PrefetchOptions o;
  o.staging_capacity = 1 << 20;
  Stats stats;
  Prefetcher prefetcher(backing_, {&ram}, o, &stats);
  Registrar control(backing_, prefetcher, stats, {"/data/set"});
  const std::string in = EncodeCompact(CompactOf("job", Sample()));
  auto w = control.OpenWriter(false, true);
  for (size_t i = 0; i < in.size(); i += 7) {
    ASSERT_TRUE(control.Write(*w, std::string_view(in).substr(i, 7), i, false).ok());
  }
  ASSERT_TRUE(control.Flush(*w).ok()) << control.ErrorsText();
  control.Release(*w);
  ASSERT_NE(prefetcher.plan(), nullptr);
  EXPECT_EQ(prefetcher.plan()->entries(), 12u);
  ASSERT_EQ(prefetcher.plan()->streams.size(), 1u);
  EXPECT_EQ(prefetcher.plan()->streams[0].name, "job");
  EXPECT_EQ(prefetcher.plan()->streams[0].epochs(), 3u);
  const auto before = prefetcher.plan();
  auto bad = control.OpenWriter(false, true);
  ASSERT_TRUE(control.Write(*bad, std::string_view(in).substr(0, in.size() - 3), 0, false).ok());
  const Status s = control.Flush(*bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("\nat byte " + std::to_string(in.size() - 3) + ": the input ends"),
            std::string::npos)
      << s.message();
  control.Release(*bad);
  EXPECT_EQ(prefetcher.plan().get(), before.get());
  EXPECT_EQ(control.ErrorsText(), s.message());
  prefetcher.Stop();
}

}  // namespace
}  // namespace clairfs
