// CheckPaths, piece by piece as the writes of a manifest bring its paths: exactly the
// validation (files, targets, report) of checking them all at close().
#include <gtest/gtest.h>

#include <random>

#include "cache/manifest/manifest.h"
#include "cache/plan/resolve.h"
#include "tests/unit/mem_backing.h"

namespace clairfs {
namespace {

using testing::MemBacking;

// The dataset: files in 37 directories, plus names that are not plain files.
void Fill(MemBacking& b, int files) {
  for (int i = 0; i < files; ++i) {
    b.AddFile("d" + std::to_string(i % 37) + "/f" + std::to_string(i), std::string(i % 50, 'x'));
  }
  b.AddSymlink("alias", "d3/f3");
  b.AddSymlink("d5/up", "../d7/f7");
  b.AddSymlink("out", "../../etc/passwd");
  b.AddFifo("fifo");
}

// A text of every file, with aliases, odd spellings and (bad) errors spread over it.
std::string Text(int files, bool bad, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string t = "#stream s\n";
  for (int i = 0; i < files; ++i) {
    t += "d" + std::to_string(i % 37) + "/f" + std::to_string(i) + "\n";
    switch (rng() % 500) {
      case 0:
        t += "alias\n";
        break;
      case 1:
        t += "./d5/up\n";
        break;
      case 2:
        t += "d9//f9\n";
        break;
      case 3:
        t += "d1/../d2/f2\n";
        break;
      case 4:
        t += "d4/f4\t0+1\n";
        break;
      case 5:
        if (bad) t += "missing" + std::to_string(i) + "\n";
        break;
      case 6:
        if (bad) t += "fifo\n";
        break;
      case 7:
        if (bad) t += "out\n";
        break;
      case 8:
        if (bad) t += "d6\n";
        break;
      default:
        break;
    }
  }
  return t;
}

ParsedManifest ParseWhole(const std::string& text) {
  ManifestParser p;
  p.Feed(text);
  return std::move(p).Finish();
}

// Feeds text in random pieces, checking the new paths after each piece as Registrar::Write
// does, with a Peek() now and then (a close() of a dup'ed descriptor).
ParsedManifest ParseInPieces(const std::string& text, std::vector<PathResolver>& resolvers,
                             PathChecks* checks, uint32_t seed) {
  std::mt19937 rng(seed);
  ManifestParser p;
  size_t at = 0;
  while (at < text.size()) {
    const size_t n = std::min<size_t>(text.size() - at, 1 + rng() % 70'000);
    p.Feed(std::string_view(text).substr(at, n));
    at += n;
    const auto& paths = p.paths();
    if (paths.size() > checks->size()) {
      CheckPaths(std::span(paths).subspan(checks->size()), resolvers, checks);
    }
    if (rng() % 4 == 0) (void)p.Peek();
  }
  return std::move(p).Finish();
}

void ExpectSame(const Result<std::shared_ptr<const ResolvedManifest>>& a,
                const Result<std::shared_ptr<const ResolvedManifest>>& b) {
  ASSERT_EQ(a.ok(), b.ok());
  if (!a.ok()) {
    EXPECT_EQ(a.status().message(), b.status().message());
    return;
  }
  const ResolvedManifest& x = *a.value();
  const ResolvedManifest& y = *b.value();
  ASSERT_EQ(x.files.size(), y.files.size());
  for (size_t i = 0; i < x.files.size(); ++i) {
    ASSERT_EQ(x.files[i].path, y.files[i].path) << i;
    ASSERT_EQ(x.files[i].version, y.files[i].version) << i;
  }
  ASSERT_EQ(x.targets.size(), y.targets.size());
  for (size_t i = 0; i < x.targets.size(); ++i) {
    ASSERT_EQ(x.targets[i].file, y.targets[i].file) << i;
    ASSERT_EQ(x.targets[i].range, y.targets[i].range) << i;
  }
  EXPECT_EQ(x.sequence, y.sequence);
  EXPECT_EQ(x.epoch_begin, y.epoch_begin);
  EXPECT_EQ(x.range_entries, y.range_entries);
}

TEST(CheckPathsPieceByPiece, GivesTheValidationOfCheckingAtClose) {
  constexpr int kFiles = 60'000;  // the checker works in batches of 32,768 paths
  MemBacking backing;
  Fill(backing, kFiles);
  PathResolver resolver(backing, {});
  for (bool bad : {false, true}) {
    for (uint32_t seed : {1u, 2u}) {
      SCOPED_TRACE(std::string(bad ? "bad" : "good") + " text, seed " + std::to_string(seed));
      const std::string text = Text(kFiles, bad, seed);
      const auto at_close = ResolveManifest(ParseWhole(text), resolver);
      EXPECT_EQ(at_close.ok(), !bad) << (at_close.ok() ? "" : at_close.status().message());
      std::vector<PathResolver> resolvers = CheckResolvers(resolver);
      PathChecks checks;
      const ParsedManifest m = ParseInPieces(text, resolvers, &checks, seed);
      EXPECT_GT(checks.size(), static_cast<size_t>(kFiles));  // the aliases' spellings too
      ExpectSame(at_close, ResolveManifest(m, resolver, std::move(checks)));
    }
  }
}

TEST(CheckPathsPieceByPiece, PartlyCheckedTextsAreCompletedAtClose) {
  MemBacking backing;
  Fill(backing, 20'000);
  PathResolver resolver(backing, {});
  const std::string text = Text(20'000, true, 3);
  const ParsedManifest m = ParseWhole(text);
  const auto at_close = ResolveManifest(m, resolver);
  ASSERT_FALSE(at_close.ok());
  std::vector<PathResolver> resolvers = CheckResolvers(resolver);
  PathChecks checks;
  CheckPaths(std::span(m.paths).subspan(0, 12'345), resolvers, &checks);
  ExpectSame(at_close, ResolveManifest(m, resolver, std::move(checks)));
  // Checks of more paths than the text has are not its own: everything is checked again.
  PathChecks foreign;
  foreign.paths.resize(m.paths.size() + 1);
  ExpectSame(at_close, ResolveManifest(m, resolver, std::move(foreign)));
}

// CheckPaths, batch by batch on several threads, says of each path what resolving it alone
// says: the canonical path (the written bytes themselves when canonical, else a copy), the
// version, and for a bad path an error at its own index, in ascending order.
TEST(CheckPaths, AgreesWithResolvingEachPathAlone) {
  MemBacking backing;
  Fill(backing, 5'000);
  PathResolver resolver(backing, {});
  std::vector<std::string> written;
  std::mt19937 rng(7);
  for (int i = 0; i < 40'000; ++i) {  // two batches, each split among the threads
    const int f = static_cast<int>(rng() % 5'000);
    switch (rng() % 8) {
      case 0:
        written.push_back("alias");
        break;
      case 1:
        written.push_back("d5/up");
        break;
      case 2:
        written.push_back("d" + std::to_string(f % 37) + "//f" + std::to_string(f));
        break;
      case 3:
        written.push_back("missing/f" + std::to_string(f));
        break;
      case 4:
        written.push_back("fifo");
        break;
      case 5:
        written.push_back("d" + std::to_string(f % 37));
        break;
      default:
        written.push_back("d" + std::to_string(f % 37) + "/f" + std::to_string(f));
    }
  }
  const std::vector<std::string_view> paths(written.begin(), written.end());
  auto resolvers = CheckResolvers(resolver);
  PathChecks checks;
  CheckPaths(paths, resolvers, &checks);
  ASSERT_EQ(checks.size(), paths.size());
  size_t next_error = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    struct stat st {};
    const auto alone = resolver.Resolve(paths[i], true, &st);
    const CheckedPath& c = checks.paths[i];
    if (!alone.ok() || !S_ISREG(st.st_mode)) {
      ASSERT_FALSE(c.ok()) << paths[i];
      ASSERT_LT(next_error, checks.errors.size());
      EXPECT_EQ(checks.errors[next_error++].first, i) << paths[i];
      continue;
    }
    ASSERT_TRUE(c.ok()) << paths[i];
    EXPECT_EQ(c.path, alone.value()) << paths[i];
    EXPECT_EQ(c.path.data() == paths[i].data(), alone.value() == paths[i]) << paths[i];
    EXPECT_EQ(c.version, VersionOf(st)) << paths[i];
  }
  EXPECT_EQ(next_error, checks.errors.size());
}

}  // namespace
}  // namespace clairfs
