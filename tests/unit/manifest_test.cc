#include "cache/manifest/manifest.h"

#include <gtest/gtest.h>

namespace clairfs {
namespace {

ParsedManifest Parse(std::string_view text, size_t chunk = 0) {
  ManifestParser p;
  if (chunk == 0) {
    p.Feed(text);
  } else {
    for (size_t i = 0; i < text.size(); i += chunk) p.Feed(text.substr(i, chunk));
  }
  return std::move(p).Finish();
}

std::vector<std::string> Entries(const ParsedManifest& m) {
  std::vector<std::string> out;
  for (uint32_t id : m.sequence) out.emplace_back(m.paths[id]);
  return out;
}

TEST(ManifestParser, PlainListIsOneEpoch) {
  auto m = Parse("a\nb/c\na\n");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Entries(m), (std::vector<std::string>{"a", "b/c", "a"}));
  EXPECT_EQ(m.paths.size(), 2u);
  EXPECT_EQ(m.epoch_begin, (std::vector<uint32_t>{0}));
  EXPECT_EQ(m.lines, 3u);
}

TEST(ManifestParser, EpochsCommentsAndEscapedHash) {
  auto m = Parse("#epoch\nx\n# a comment\ny\n#epoch 2\n./#odd\nx\n#epochal is a comment\n");
  ASSERT_TRUE(m.ok()) << m.errors[0].message;
  EXPECT_EQ(Entries(m), (std::vector<std::string>{"x", "y", "#odd", "x"}));
  EXPECT_EQ(m.epoch_begin, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(m.path_line[0], 2u);
}

TEST(ManifestParser, LastLineWithoutNewlineCounts) {
  auto m = Parse("a\nb");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Entries(m), (std::vector<std::string>{"a", "b"}));
}

TEST(ManifestParser, EmptyTextIsEmptyPlan) {
  auto m = Parse("");
  EXPECT_TRUE(m.ok());
  EXPECT_TRUE(m.sequence.empty());
  EXPECT_TRUE(m.epoch_begin.empty());
}

TEST(ManifestParser, ChunkingDoesNotMatter) {
  std::string text;
  for (int i = 0; i < 500; ++i) {
    if (i % 100 == 0) text += "#epoch\n";
    text += "dir" + std::to_string(i % 7) + "/file " + std::to_string(i % 123) + ".jpg\n";
  }
  const auto whole = Parse(text);
  for (size_t chunk : {1, 2, 3, 7, 64, 4096}) {
    const auto split = Parse(text, chunk);
    EXPECT_EQ(Entries(split), Entries(whole)) << "chunk " << chunk;
    EXPECT_EQ(split.epoch_begin, whole.epoch_begin);
  }
}

TEST(ManifestParser, ErrorsCarryLineNumbers) {
  std::string text = "ok\n\nnul";
  text += '\0';
  text += "byte\n" + std::string(5000, 'x') + "\nfine\n#epoch\n#epoch\nlast\n";
  auto m = Parse(text, 100);
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(m.errors.size(), 4u);
  EXPECT_EQ(m.errors[0].line, 2u);
  EXPECT_NE(m.errors[0].message.find("empty"), std::string::npos);
  EXPECT_EQ(m.errors[1].line, 3u);
  EXPECT_NE(m.errors[1].message.find("NUL"), std::string::npos);
  EXPECT_EQ(m.errors[2].line, 4u);
  EXPECT_NE(m.errors[2].message.find("PATH_MAX"), std::string::npos);
  EXPECT_EQ(m.errors[3].line, 7u);
  EXPECT_NE(m.errors[3].message.find("empty"), std::string::npos);
}

TEST(ManifestParser, TrailingEpochMarkerIsAnEmptyEpoch) {
  auto m = Parse("a\n#epoch\n");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.errors[0].line, 2u);
}

TEST(ManifestParser, LongestAcceptedLine) {
  const std::string ok(ManifestParser::kMaxLine - 1, 'a');
  EXPECT_TRUE(Parse(ok + "\n").ok());
  EXPECT_FALSE(Parse(ok + "a\n").ok());
}

TEST(ManifestParser, KeepsOnlyFirstErrorsButCountsAll) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "\n";
  auto m = Parse(text);
  EXPECT_EQ(m.error_count, 100u);
  EXPECT_EQ(m.errors.size(), ManifestParser::kMaxErrors);
}

TEST(ManifestParser, TrailerCountsTheEntries) {
  EXPECT_TRUE(Parse("#begin\na\n#epoch\nb\na\n#end 3\n").ok());
  EXPECT_TRUE(Parse("#begin\n#end 0").ok());
  EXPECT_TRUE(Parse("a\n#end 1\n").ok());  // a trailer without '#begin' is checked too
  EXPECT_TRUE(Parse("#ending is a comment\na\n").ok());
  EXPECT_TRUE(Parse("a\r\n#end 1\r\n").ok());
  struct Case {
    const char* text;
    uint64_t line;
    const char* reason;
  } cases[] = {{"#begin\na\nb\n", 3, "without the '#end' trailer"},
               {"#begin\na\nb", 3, "without the '#end' trailer"},
               {"#begin\na\n#end 2\n", 3, "counts 2 entries, the text has 1"},
               {"a\n#end 1\nb\n", 3, "after the '#end' trailer"},
               {"a\n#end 1\n# comment\n", 3, "after the '#end' trailer"},
               {"a\n#end\n", 2, "malformed trailer"},
               {"a\n#end 01\n", 2, "malformed trailer"},
               {"a\n#end 1 \n", 2, "malformed trailer"},
               {"a\n#end +1\n", 2, "malformed trailer"},
               {"a\n#end\t1\n", 2, "malformed trailer"},
               {"a\n#end 1\r\r\n", 2, "malformed trailer"},  // one CR is a line end
               {"a\n#end 99999999999999999999999\n", 2, "malformed trailer"},
               {"a\n#begin\n", 2, "only on the first line"}};
  for (const auto& c : cases) {
    for (size_t chunk : {0, 1, 3}) {
      auto m = Parse(c.text, chunk);
      ASSERT_FALSE(m.ok()) << c.text;
      EXPECT_EQ(m.errors[0].line, c.line) << c.text;
      EXPECT_NE(m.errors[0].message.find(c.reason), std::string::npos)
          << c.text << ": " << m.errors[0].message;
    }
  }
}

// CRLF line ends and a leading UTF-8 BOM, as Windows editors write them, are read as LF and
// nothing, wherever the writes split them.
TEST(ManifestParser, CrlfAndAByteOrderMark) {
  const std::string text =
      "\xEF\xBB\xBF#begin\r\n#stream job\r\na\r\n#epoch\r\nb/c\t0+5\r\n./#h\r\n#end 3\r\n";
  for (size_t chunk : {0, 1, 2, 3, 5}) {
    auto m = Parse(text, chunk);
    ASSERT_TRUE(m.ok()) << chunk << ": " << m.errors[0].message;
    EXPECT_EQ(Entries(m), (std::vector<std::string>{"a", "b/c", "#h"})) << chunk;
    EXPECT_EQ(m.stream, "job");
    EXPECT_EQ(m.epoch_begin, (std::vector<uint32_t>{0, 1}));
    EXPECT_EQ(m.targets[1].range.length, 5u);
  }
  // A BOM without '#begin', a last line without '\n', a lone CR at the end of the text.
  const std::string bom = "\xEF\xBB\xBF";
  EXPECT_EQ(Entries(Parse(bom + "a\r\nb\r")), (std::vector<std::string>{"a", "b"}));
  // Only one CR per line, and the BOM only at the very start of the text.
  EXPECT_EQ(Entries(Parse("a\r\r\n")), (std::vector<std::string>{"a\r"}));
  EXPECT_EQ(Entries(Parse("a\n" + bom + "b\n")), (std::vector<std::string>{"a", bom + "b"}));
  EXPECT_EQ(Entries(Parse("a\rb\n")), (std::vector<std::string>{"a\rb"}));
  // A CR before a range's TAB is part of the path.
  auto m = Parse("a\r\t0+1\r\n");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Entries(m), (std::vector<std::string>{"a\r"}));
  // Neither counts towards the line length.
  const std::string longest(ManifestParser::kMaxLine - 1, 'a');
  EXPECT_TRUE(Parse(bom + longest + "\r\n", 1000).ok());
  EXPECT_FALSE(Parse(bom + longest + "a\r\n", 1000).ok());
  EXPECT_TRUE(Parse("x\n" + longest + "\r\n").ok());
  // A line of a BOM or a CR alone is empty.
  EXPECT_FALSE(Parse(bom + "\r\na\n").ok());
  EXPECT_FALSE(Parse("a\n\r\n").ok());
}

// An error found while feeding is final: parsed() shows it before the text ends, and no later
// byte takes it back; a line not yet complete is not judged.
TEST(ManifestParser, ErrorsAreKnownAsSoonAsTheirLineIsComplete) {
  ManifestParser p;
  p.Feed("a\nb\t1+");
  EXPECT_EQ(p.parsed().error_count, 0u);  // "b\t1+2" may follow
  (void)p.Peek();                         // the cut-off line is an error if the text ends here
  p.Feed("x");
  EXPECT_EQ(p.parsed().error_count, 0u) << "Peek()'s error was not taken back";
  p.Feed("\nc\n");
  ASSERT_EQ(p.parsed().error_count, 1u);
  EXPECT_EQ(p.parsed().errors[0].line, 2u);

  ManifestParser q;  // an overlong line is known before its end
  q.Feed("a\n" + std::string(ManifestParser::kMaxRawLine, 'x'));
  ASSERT_EQ(q.parsed().error_count, 1u);
  EXPECT_EQ(q.parsed().errors[0].line, 2u);
  q.Feed(std::string(10000, 'x') + "\nb\n");
  auto m = std::move(q).Finish();
  EXPECT_EQ(m.error_count, 1u);
  EXPECT_EQ(Entries(m), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.lines, 3u);
}

// The report escapes what the text said: a CR inside a line is shown as \x0d, never raw.
TEST(ManifestReport, EscapesControlBytes) {
  auto m = Parse("#stream a\rb\r\n\x1b[2J\t1+0\n");
  ASSERT_EQ(m.error_count, 2u);
  const std::string report = ManifestReport(m.error_count, m.errors, m.form);
  EXPECT_EQ(report.find('\r'), std::string::npos) << report;
  EXPECT_EQ(report.find('\x1b'), std::string::npos) << report;
  EXPECT_NE(report.find("manifest rejected: 2 errors\nline 1: stream name 'a\\x0db'"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("line 2: empty range"), std::string::npos) << report;
}

// Peek() shows the text as if it ended there; feeding on continues it as if Peek() had not
// been called, also in the middle of a line, an epoch marker or a trailer.
TEST(ManifestParser, PeekThenContinue) {
  const std::string text = "#begin\nab/c\n#epoch x\nd\nab/c\n#end 3\n";
  const auto whole = Parse(text);
  ASSERT_TRUE(whole.ok());
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ManifestParser p;
    p.Feed(std::string_view(text).substr(0, cut));
    const ParsedManifest& peeked = p.Peek();
    auto alone = Parse(std::string_view(text).substr(0, cut));
    EXPECT_EQ(Entries(peeked), Entries(alone)) << cut;
    EXPECT_EQ(peeked.error_count, alone.error_count) << cut;
    EXPECT_EQ(peeked.epoch_begin, alone.epoch_begin) << cut;
    (void)p.Peek();  // twice: no change
    p.Feed(std::string_view(text).substr(cut));
    if (cut % 2) (void)p.Peek();
    auto m = std::move(p).Finish();
    EXPECT_TRUE(m.ok()) << cut << ": " << (m.errors.empty() ? "" : m.errors[0].message);
    EXPECT_EQ(Entries(m), Entries(whole)) << cut;
    EXPECT_EQ(m.epoch_begin, whole.epoch_begin) << cut;
    EXPECT_EQ(m.path_line, whole.path_line) << cut;
    EXPECT_EQ(m.lines, whole.lines) << cut;
  }
}

TEST(EscapeForReport, ControlBytesAndInvalidUtf8AreEscaped) {
  EXPECT_EQ(EscapeForReport("plain/path ok.jpg"), "plain/path ok.jpg");
  EXPECT_EQ(EscapeForReport("a\x1b[31mb\x07\t\r\x7f"), "a\\x1b[31mb\\x07\\x09\\x0d\\x7f");
  EXPECT_EQ(EscapeForReport("back\\slash"), "back\\\\slash");
  EXPECT_EQ(EscapeForReport("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
  EXPECT_EQ(EscapeForReport("\xff\xc3"), "\\xff\\xc3");           // invalid, truncated
  EXPECT_EQ(EscapeForReport("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(EscapeForReport("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(EscapeForReport("\xc2\x9b"), "\\xc2\\x9b");           // C1 CSI
  EXPECT_EQ(EscapeForReport("\xe2\x80\xae"), "\\xe2\\x80\\xae");  // right-to-left override
  EXPECT_EQ(EscapeForReport(std::string("\0", 1)), "\\x00");
}

}  // namespace
}  // namespace clairfs
