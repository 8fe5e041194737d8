// ControlPlane::Write refusing a manifest early (docs/control-interface.md, "Writing it"): the
// write() that completes an invalid line fails with EINVAL, the report is in `errors`, every
// later write and the close() fail too, and the active plan stays. Never a text that close()
// would accept.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <string>

#include "cache/compact_manifest.h"
#include "cache/prefetcher.h"
#include "cache/ram_tier.h"
#include "fs/control.h"
#include "tests/unit/mem_backing.h"

namespace clairfs {
namespace {

class ControlWrite : public ::testing::Test {
 protected:
  ControlWrite() {
    spdlog::set_level(spdlog::level::err);
    backing_.AddFile("a", "contents of a");
    backing_.AddDir("b");
    backing_.AddFile("b/c", "contents of b/c");
    o_.staging_capacity = 1 << 20;
  }
  ~ControlWrite() override { prefetcher_.Stop(); }

  // Writes text as one write() at the end of w's text.
  Status Write(ControlPlane::Writer& w, std::string_view text) {
    const Status s = control_.Write(w, text, written_[&w], false);
    if (s.ok()) written_[&w] += text.size();
    return s;
  }
  // The last close of w (its offset is forgotten: a new writer may have its address).
  void Release(ControlPlane::Writer& w) {
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
  ControlPlane control_{backing_, prefetcher_, stats_, {"/data/set"}};
  std::map<const ControlPlane::Writer*, uint64_t> written_;
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
  for (std::string_view text : {"missing\n", "a\nbad\t1+", "#begin\na\n", "a\n#epoch\n"}) {
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

// A long text's paths are checked while it is written: a later write() fails once the check
// found a missing file, with the reason close() would give.
TEST_F(ControlWrite, APathTheCheckAheadFoundMissingFailsALaterWrite) {
  std::string text;
  for (size_t i = 0; i < ControlPlane::kCheckAheadFrom; ++i) {
    const std::string name = "f" + std::to_string(i);
    if (i != 5) backing_.AddFile(name, "x");
    text += name + "\n";
  }
  auto w = control_.OpenWriter(false, true);
  ASSERT_TRUE(Write(*w, text).ok());
  Status s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s.ok() && std::chrono::steady_clock::now() < deadline) s = Write(*w, "f0\n");
  ASSERT_FALSE(s.ok()) << "the check ahead never reported the missing file";
  EXPECT_NE(s.message().find("line 6: 'f5': "), std::string::npos) << s.message();
  EXPECT_FALSE(control_.Flush(*w).ok());
  Release(*w);
  EXPECT_EQ(prefetcher_.plan(), nullptr);
}

}  // namespace
}  // namespace clairfs
