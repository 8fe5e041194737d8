// Registrar::Write refusing a manifest early (docs/control-interface.md, "Writing it"): the
// write() that completes an invalid line fails with EINVAL, the report is in `errors`, every
// later write and the close() fail too, and the active plan stays. Never a text that close()
// would accept.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/base/log.h"
#include "cache/manifest/compact_manifest.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ram_tier.h"
#include "control/registrar.h"
#include "tests/unit/mem_backing.h"

namespace clairfs {
namespace {

class ControlWrite : public ::testing::Test {
 protected:
  ControlWrite() : ControlWrite(64) {}
  explicit ControlWrite(uint32_t max_streams) : o_(Options(max_streams)) {
    SetLogLevel(LogLevel::kError);
    backing_.AddFile("a", "contents of a");
    backing_.AddDir("b");
    backing_.AddFile("b/c", "contents of b/c");
  }
  static PrefetchOptions Options(uint32_t max_streams) {
    PrefetchOptions o;
    o.staging_capacity = 1 << 20;
    o.max_streams = max_streams;
    return o;
  }
  ~ControlWrite() override { prefetcher_.Stop(); }

  // Writes text as one write() at the end of w's text.
  Status Write(Registrar::Writer& w, std::string_view text) {
    const Status s = control_.Write(w, text, written_[&w], false);
    if (s.ok()) written_[&w] += text.size();
    return s;
  }
  // The last close of w (its offset is forgotten: a new writer may have its address).
  void Release(Registrar::Writer& w) {
    control_.Release(w);
    written_.erase(&w);
  }
  // A whole manifest through one writer: write, close, release.
  Status Commit(std::string_view text) {
    auto w = control_.OpenWriter(false, true);
    Status s = Write(*w, text);
    if (s.ok()) s = control_.Flush(*w);
    Release(*w);
    return s;
  }
  uint64_t Rejected() const { return stats_.errors.manifest_rejected.load(); }

  testing::MemBacking backing_;
  RamTier ram_{"ram", 1 << 20};
  PrefetchOptions o_;
  Stats stats_;
  Prefetcher prefetcher_{backing_, {&ram_}, o_, &stats_};
  Registrar control_{backing_, prefetcher_, stats_, {"/data/set"}};
  std::map<const Registrar::Writer*, uint64_t> written_;
};

TEST_F(ControlWrite, TheWriteCompletingABadLineFailsAndEverythingAfterIt) {
  ASSERT_TRUE(Commit("a\n").ok());
  const auto before = prefetcher_.plan();
  ASSERT_NE(before, nullptr);

  auto w = control_.OpenWriter(false, true);
  ASSERT_TRUE(Write(*w, "b/c\n").ok());
  ASSERT_TRUE(Write(*w, "a\t1+").ok());  // not a complete line yet: could still be valid
  const Status bad = Write(*w, "x\nb/c\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("line 2: malformed range"), std::string::npos) << bad.message();
  EXPECT_EQ(control_.ErrorsText(), bad.message());
  EXPECT_EQ(Rejected(), 1u);

  EXPECT_FALSE(control_.Write(*w, "a\n", 0, true).ok());  // later writes fail, also appends
  const Status closed = control_.Flush(*w);
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.message(), bad.message());
  Release(*w);
  EXPECT_EQ(prefetcher_.plan().get(), before.get()) << "a refused text changed the plan";
  EXPECT_EQ(control_.ErrorsText(), bad.message());
  EXPECT_EQ(Rejected(), 1u) << "one rejection, counted once";
}

// What only close() can decide (a missing file, a cut-off last line, a missing trailer) is
// refused there, not at the write.
TEST_F(ControlWrite, WhatNeedsTheWholeTextIsLeftToClose) {
  for (std::string_view text : {"missing", "a\nbad\t1+", "#begin\na\n", "a\n#epoch\n"}) {
    auto w = control_.OpenWriter(false, true);
    ASSERT_TRUE(Write(*w, text).ok()) << text;
    EXPECT_FALSE(control_.Flush(*w).ok()) << text;
    Release(*w);
  }
  EXPECT_EQ(prefetcher_.plan(), nullptr);
}

TEST_F(ControlWrite, AnOverlongLineFailsTheWriteThatMakesItSo) {
  auto w = control_.OpenWriter(false, true);
  ASSERT_TRUE(Write(*w, "a\n" + std::string(ManifestParser::kMaxLine - 1, 'x')).ok());
  const Status s = Write(*w, std::string(ManifestParser::kMaxRawLine, 'x'));  // no '\n' yet
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 2: line is longer than PATH_MAX"), std::string::npos)
      << s.message();
  EXPECT_FALSE(control_.Flush(*w).ok());
  Release(*w);
  EXPECT_EQ(prefetcher_.plan(), nullptr);
}

TEST_F(ControlWrite, FtruncateStartsARefusedTextOver) {
  auto w = control_.OpenWriter(false, true);
  ASSERT_FALSE(Write(*w, "\n").ok());
  ASSERT_TRUE(control_.Truncate(*w, 0).ok());
  ASSERT_TRUE(control_.Write(*w, "a\nb/c\n", 0, false).ok());
  ASSERT_TRUE(control_.Flush(*w).ok()) << control_.ErrorsText();
  Release(*w);
  ASSERT_NE(prefetcher_.plan(), nullptr);
  EXPECT_EQ(prefetcher_.plan()->entries(), 2u);
  EXPECT_EQ(control_.ErrorsText(), "");
}

// A later writer's close() is reported after an earlier refusal, and a refused writer's
// close() after a later acceptance: `errors` follows the order of the close() calls.
TEST_F(ControlWrite, ARefusedCloseIsReportedInCloseOrder) {
  auto w = control_.OpenWriter(false, true);
  ASSERT_FALSE(Write(*w, "#begin\n#begin\n").ok());
  ASSERT_TRUE(Commit("a\n").ok());
  EXPECT_EQ(control_.ErrorsText(), "");
  const Status s = control_.Flush(*w);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(control_.ErrorsText().find("line 2: '#begin' is allowed only on the first line"),
            std::string::npos)
      << control_.ErrorsText();
  Release(*w);
  EXPECT_EQ(prefetcher_.plan()->entries(), 1u);
}

TEST_F(ControlWrite, CrlfAndAByteOrderMarkAreAccepted) {
  const Status s =
      Commit("\xEF\xBB\xBF#begin\r\n#stream job\r\na\r\n#epoch\r\nb/c\t0+4\r\n#end 2\r\n");
  ASSERT_TRUE(s.ok()) << control_.ErrorsText();
  ASSERT_NE(prefetcher_.plan(), nullptr);
  ASSERT_EQ(prefetcher_.plan()->streams.size(), 1u);
  EXPECT_EQ(prefetcher_.plan()->streams[0].name, "job");
  EXPECT_EQ(prefetcher_.plan()->entries(), 2u);
  EXPECT_EQ(prefetcher_.plan()->streams[0].epochs(), 2u);
}

// A control byte in a refused line is shown escaped, never raw.
TEST_F(ControlWrite, ReportsEscapeControlBytes) {
  auto w = control_.OpenWriter(false, true);
  const Status s = Write(*w, "#stream a\rb\r\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'a\\x0db'"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\r'), std::string::npos);
  Release(*w);
}

TEST_F(ControlWrite, ACompactHeaderIsRefusedByTheWriteThatCompletesIt) {
  std::string header(kCompactMagic);
  header += std::string("\x02\0\0\0", 4);  // version 2
  header.resize(kCompactHeaderSize, '\0');
  auto w = control_.OpenWriter(false, true);
  ASSERT_TRUE(Write(*w, std::string_view(header).substr(0, kCompactHeaderSize - 1)).ok());
  const Status s = Write(*w, std::string_view(header).substr(kCompactHeaderSize - 1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at byte 8: "), std::string::npos) << s.message();
  EXPECT_FALSE(control_.Flush(*w).ok());
  Release(*w);
  EXPECT_EQ(prefetcher_.plan(), nullptr);
}

// A missing file fails the write() that completes its line, in a short text and in a long
// one alike (so `echo typo > manifest` fails in the shell), with the reason close()
// would give; every later write and the close() fail too.
TEST_F(ControlWrite, AMissingFileFailsTheWriteThatCompletesItsLine) {
  for (const size_t lines : {size_t{1}, size_t{3}, size_t{20000}}) {
    std::string text;
    for (size_t i = 0; i < lines; ++i) {
      const std::string name = "f" + std::to_string(i);
      backing_.AddFile(name, "x");
      text += name + "\n";
    }
    auto w = control_.OpenWriter(false, true);
    ASSERT_TRUE(Write(*w, text).ok()) << lines;
    ASSERT_TRUE(Write(*w, "a\nmiss").ok()) << "a line not complete yet is not checked";
    const Status s = Write(*w, "ing\nb/c\n");
    ASSERT_FALSE(s.ok()) << lines;
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("line " + std::to_string(lines + 2) + ": 'missing': "),
              std::string::npos)
        << s.message();
    EXPECT_EQ(control_.ErrorsText(), s.message());
    EXPECT_FALSE(Write(*w, "a\n").ok());
    EXPECT_FALSE(control_.Flush(*w).ok());
    Release(*w);
    EXPECT_EQ(prefetcher_.plan(), nullptr);
  }
}

// The paths are checked through the writer's view of the dataset (AccessPolicy::WriterView):
// a file the view does not show is refused as a missing one, at the write.
TEST_F(ControlWrite, PathsAreCheckedThroughTheWritersView) {
  auto view = std::make_shared<testing::MemBacking>();
  view->AddFile("a", "contents of a");  // b/c: not for this writer
  auto w = control_.OpenWriter(false, true, view);
  ASSERT_TRUE(Write(*w, "a\n").ok());
  const Status hidden = Write(*w, "b/c\n");
  ASSERT_FALSE(hidden.ok());
  Release(*w);
  auto m = control_.OpenWriter(false, true, view);
  ASSERT_TRUE(Write(*m, "a\n").ok());
  const Status missing = Write(*m, "b/x\n");
  ASSERT_FALSE(missing.ok());
  Release(*m);
  EXPECT_EQ(hidden.message().find("line 2: 'b/c': "), missing.message().find("line 2: 'b/x': "));
  EXPECT_EQ(prefetcher_.plan(), nullptr);
  EXPECT_TRUE(Commit("b/c\n").ok()) << "the daemon's own view has it";
}

// Streams at the limit (cache.max_streams): a text accepted at close() reserves its stream's
// place until it is installed, so it is installed however late its release comes and whatever
// other writers commit meanwhile; a text that finds no place is refused at its own close().
class ControlStreams : public ControlWrite {
 protected:
  ControlStreams() : ControlWrite(3) {}
  std::unique_ptr<Registrar::Writer> Closed(const std::string& stream, Status* closed) {
    auto w = control_.OpenWriter(false, true);
    *closed = Write(*w, "#stream " + stream + "\na\n");
    if (closed->ok()) *closed = control_.Flush(*w);
    return w;
  }
  std::set<std::string> Streams() {
    std::set<std::string> out;
    if (auto plan = prefetcher_.plan()) {
      for (const auto& st : plan->streams) out.insert(st.name);
    }
    return out;
  }
};

TEST_F(ControlStreams, AnAcceptedCloseHoldsItsPlaceUntilInstalled) {
  ASSERT_TRUE(Commit("#stream s1\na\n").ok());
  Status s2, s3, s4, again;
  auto w2 = Closed("s2", &s2);
  auto w3 = Closed("s3", &s3);
  ASSERT_TRUE(s2.ok()) << s2.message();
  ASSERT_TRUE(s3.ok()) << s3.message();
  // s2 and s3 are not installed yet: s4 finds no place, at its close().
  auto w4 = Closed("s4", &s4);
  ASSERT_FALSE(s4.ok());
  EXPECT_NE(s4.message().find("stream 's4' would be stream 4"), std::string::npos) << s4.message();
  EXPECT_EQ(control_.ErrorsText(), s4.message());
  Release(*w4);
  // Nor does a writer that commits in one go while they wait.
  EXPECT_FALSE(Commit("#stream s5\na\n").ok());
  // A second writer of a reserved stream shares its place.
  auto w3b = Closed("s3", &again);
  EXPECT_TRUE(again.ok()) << again.message();
  Release(*w3);
  Release(*w3b);
  Release(*w2);
  EXPECT_EQ(Streams(), (std::set<std::string>{"s1", "s2", "s3"}));
  // Replacing and removing a stream the plan has always work.
  EXPECT_TRUE(Commit("#stream s2\nb/c\n").ok());
  EXPECT_TRUE(Commit("#stream s2\n").ok());
  EXPECT_TRUE(Commit("#stream s6\na\n").ok()) << control_.ErrorsText();
  EXPECT_EQ(Streams(), (std::set<std::string>{"s1", "s3", "s6"}));
}

TEST_F(ControlStreams, AReservationIsGivenBackByAWriteATruncateOrARelease) {
  Status s;
  auto a = Closed("a", &s);
  ASSERT_TRUE(s.ok());
  auto b = Closed("b", &s);
  ASSERT_TRUE(s.ok());
  auto c = Closed("c", &s);
  ASSERT_TRUE(s.ok());
  ASSERT_FALSE(Commit("#stream d\na\n").ok());
  ASSERT_TRUE(control_.Truncate(*a, 0).ok());  // a's place is free again
  auto d = Closed("d", &s);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(Write(*b, "#epoch\na\n").ok());  // written on: validated again at close()
  auto e = Closed("e", &s);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(control_.Flush(*b).ok()) << "b's place went to e";
  Release(*b);
  Release(*c);  // installed: c holds a place in the plan itself now
  Release(*a);  // truncated, a replacement that wrote nothing: removes `default`
  Release(*d);
  Release(*e);
  EXPECT_EQ(Streams(), (std::set<std::string>{"c", "d", "e"}));
  EXPECT_TRUE(Commit("#stream e\n").ok());
  EXPECT_TRUE(Commit("#stream f\na\n").ok()) << control_.ErrorsText();
}

// Many writers of new streams at once, streams removed meanwhile: every text whose close()
// succeeded is installed, none above the limit; run under TSan too.
TEST_F(ControlStreams, EveryAcceptedCloseIsInstalledUnderConcurrency) {
  constexpr int kThreads = 6, kRounds = 40;
  std::vector<std::set<std::string>> kept(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto w = control_.OpenWriter(false, true);
        Status s = control_.Write(*w, "#stream " + name + "\na\n", 0, false);
        if (s.ok()) s = control_.Flush(*w);
        control_.Release(*w);
        if (s.ok()) {
          const auto plan = prefetcher_.plan();
          EXPECT_TRUE(plan && plan->FindStream(name) >= 0) << name << " accepted, not installed";
          kept[t].insert(name);
        }
        if (i % 3 == 2 && !kept[t].empty()) {  // make room: remove one of its own
          const std::string gone = *kept[t].begin();
          auto r = control_.OpenWriter(false, true);
          Status rs = control_.Write(*r, "#stream " + gone + "\n", 0, false);
          if (rs.ok()) rs = control_.Flush(*r);
          control_.Release(*r);
          EXPECT_TRUE(rs.ok()) << rs.message();
          kept[t].erase(gone);
        }
        EXPECT_LE(prefetcher_.plan() ? prefetcher_.plan()->streams.size() : 0u, 3u);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::string> all;
  for (const auto& k : kept) all.insert(k.begin(), k.end());
  EXPECT_EQ(Streams(), all);
}

}  // namespace
}  // namespace clairfs
