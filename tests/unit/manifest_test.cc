#include "cache/manifest.h"

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
  for (uint32_t id : m.sequence) out.push_back(m.paths[id]);
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

}  // namespace
}  // namespace clairfs
