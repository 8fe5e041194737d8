// The counts view of the control files (control/counts_view.h): built by whitelist, so a field
// the whitelist does not name (a new one too) is hidden, and no path, stream name or byte size
// of a file reaches it; the full view is unchanged.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/base/log.h"
#include "cache/prefetch/prefetcher.h"
#include "cache/tiers/ram_tier.h"
#include "control/counts_view.h"
#include "control/metrics.h"
#include "control/views.h"
#include "tests/unit/mem_backing.h"

namespace clairfs {
namespace {

using nlohmann::json;

TEST(ControlViewsTest, TheWhitelistsAreWellFormed) {
  EXPECT_TRUE(ValidSchema(StatsCountsSchema()));
  EXPECT_TRUE(ValidSchema(PlanCountsSchema()));
  EXPECT_FALSE(ValidSchema(json::parse(R"({"a": "string"})")));
  EXPECT_FALSE(ValidSchema(json::parse(R"({"a": 1})")));
  EXPECT_FALSE(ValidSchema(json::parse(R"({"a": ["number", "name"]})")));
}

// Every key the whitelists name, with its path ("stats:prefetch/streams/[]/..."), for the audit
// below.
void Keys(const json& schema, const std::string& at, std::vector<std::string>* out) {
  if (schema.is_object()) {
    for (const auto& [key, sub] : schema.items()) {
      out->push_back(at + key);
      Keys(sub, at + key + "/", out);
    }
  } else if (schema.is_array()) {
    Keys(schema[0], at + "[]/", out);
  }
}

// An audit of the whitelists: no key of bytes (capacities aside), of names (a tier's aside),
// of paths or of messages; every "name" leaf is one the daemon or its configuration chose.
TEST(ControlViewsTest, TheWhitelistsNameNoBytesNamesOrPaths) {
  std::vector<std::string> keys;
  Keys(StatsCountsSchema(), "stats:", &keys);
  Keys(PlanCountsSchema(), "plan:", &keys);
  ASSERT_GT(keys.size(), 80u);
  const std::set<std::string> names = {"stats:tiers/[]/name", "stats:tiers/[]/state",
                                       "stats:warnings/[]/kind", "plan:tiers/[]/name",
                                       "plan:cluster/state"};
  for (const std::string& key : keys) {
    const std::string last = key.substr(key.find_last_of(":/") + 1);
    EXPECT_TRUE(last.find("bytes") == std::string::npos) << key;
    EXPECT_TRUE(last.find("path") == std::string::npos) << key;
    EXPECT_NE(last, "message") << key;
    if (last == "name" || last == "state" || last == "kind") {
      EXPECT_TRUE(names.count(key)) << key;
    }
  }
  EXPECT_EQ(Whitelist(json::parse(R"({"streams": [{"name": "s"}]})"), PlanCountsSchema()),
            json::parse(R"({"streams": [{}]})"));
}

TEST(ControlViewsTest, ViewForCaller) {
  EXPECT_EQ(ViewFor(0, false), ControlView::kFull);  // root may stat every file
  EXPECT_EQ(ViewFor(1000, true), ControlView::kFull);
  EXPECT_EQ(ViewFor(1000, false), ControlView::kCounts);
  EXPECT_EQ(ControlViewName(ControlView::kCounts), "counts");
}

TEST(ControlViewsTest, WhitelistKeepsOnlyNamedFieldsOfTheirType) {
  const json schema = json::parse(R"({
    "n": "number", "s": "name", "m": "numbers", "o": {"x": "number"}, "a": [{"k": "name"}],
    "bad": "path"})");
  const json value = json::parse(R"({
    "n": "a/secret/path", "s": 42, "m": {"ram": 1, "backing": null, "p": "x/y", "q": {}},
    "o": {"x": 1.5, "y": 2}, "a": [{"k": "on", "z": 9}, 7, {"k": 3}],
    "bad": "anything", "unnamed": 5})");
  EXPECT_EQ(Whitelist(value, schema), json::parse(R"({
    "m": {"ram": 1, "backing": null}, "o": {"x": 1.5}, "a": [{"k": "on"}, {}]})"));
  EXPECT_TRUE(Whitelist("text", json("number")).is_discarded());
  EXPECT_TRUE(Whitelist(json::object(), json::array()).is_discarded());
}

// A field added to the full stats later is hidden until the whitelist names it.
TEST(ControlViewsTest, NewFieldsAreHiddenByDefault) {
  const json full = json::parse(R"({
    "file_reads": 3, "some_new_bytes": 123457, "prefetch": {"entries": 2, "new_path": "s/x"},
    "tiers": [{"name": "ram", "capacity": 100, "bytes": 123457, "new": 1}]})");
  const json shown = StatsCounts(full);
  EXPECT_EQ(shown["file_reads"], 3);
  EXPECT_EQ(shown["prefetch"], json::parse(R"({"entries": 2})"));
  EXPECT_EQ(shown["tiers"], json::parse(R"([{"name": "ram", "capacity": 100}])"));
  EXPECT_FALSE(shown.contains("some_new_bytes"));
  EXPECT_EQ(shown["view"], "counts");
  EXPECT_EQ(shown["hidden"], std::string(kHiddenNote));
}

TEST(ControlViewsTest, WarningsKeepTheirKindNotTheirMessage) {
  const json full = json::parse(R"({"warnings": [
    {"kind": "not_in_plan", "message": "reads of 'secretdir/stray.bin' ... 'secretdir/first'",
     "seconds": 2.5}]})");
  const json shown = StatsCounts(full);
  ASSERT_EQ(shown["warnings"].size(), 1u);
  EXPECT_EQ(shown["warnings"][0]["kind"], "not_in_plan");
  EXPECT_EQ(shown["warnings"][0]["seconds"], 2.5);
  EXPECT_EQ(shown.dump().find("secretdir"), std::string::npos) << shown.dump();
  EXPECT_FALSE(shown["warnings"][0]["message"].get<std::string>().empty());
}

TEST(ControlViewsTest, ErrorsSayOnlyThatAManifestWasRejected) {
  EXPECT_EQ(ErrorsCounts(""), "");
  const std::string shown = ErrorsCounts("line 1: 'secretdir/x.bin': No such file or directory\n");
  EXPECT_EQ(shown.find("secretdir"), std::string::npos);
  EXPECT_NE(shown.find("rejected"), std::string::npos);
}

std::set<std::string> Families(const std::string& text) {
  std::set<std::string> names;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) names.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  return names;
}

// Every family RenderMetrics writes is either shown (with its HELP, TYPE and samples) or
// hidden whole; the hidden ones are those of bytes and of streams.
TEST(ControlViewsTest, MetricsKeepOnlyTheCountsFamilies) {
  const json full = json::parse(R"({
    "file_reads": 12, "bytes_read": 123457, "served": {"ram": 6, "backing": 2},
    "tiers": [{"name": "ram", "bytes": 123457, "capacity": 1000, "state": "on"}],
    "prefetch": {"planned_files": 8, "staging_bytes": 123457,
                 "streams": [{"name": "secretstream", "position": 3}]},
    "kept": {"bytes": 123457}, "peer_bytes_in": 123457})");
  const std::string all = RenderMetrics(full);
  const std::string shown = MetricsCounts(full);
  const std::set<std::string> all_families = Families(all), shown_families = Families(shown);
  size_t allowed = 0;
  for (const std::string& f : all_families) {
    EXPECT_EQ(shown_families.count(f), size_t{CountsFamily(f)}) << f;
    allowed += CountsFamily(f);
  }
  EXPECT_EQ(allowed, shown_families.size());
  // The list's names are the renderer's (an empty stats object renders every family), and
  // none of them is of bytes of files.
  const std::set<std::string> rendered = Families(RenderMetrics(json::object()));
  for (std::string_view f : CountsFamilies()) {
    EXPECT_TRUE(rendered.count(std::string(f))) << f;
    EXPECT_TRUE(!f.ends_with("_bytes") || f.ends_with("_capacity_bytes")) << f;
    EXPECT_EQ(f.find("stream"), std::string_view::npos) << f;
  }
  for (const char* hidden :
       {"clairfs_read_bytes_total", "clairfs_tier_used_bytes", "clairfs_staging_used_bytes",
        "clairfs_stream_position", "clairfs_kept_written_bytes_total", "clairfs_peer_bytes_total",
        "clairfs_backing_read_bytes_total"}) {
    EXPECT_TRUE(all_families.count(hidden)) << hidden;
    EXPECT_FALSE(shown_families.count(hidden)) << hidden;
  }
  EXPECT_EQ(shown.find("123457"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("secretstream"), std::string::npos) << shown;
  EXPECT_NE(shown.find("\nclairfs_file_reads_total 12\n"), std::string::npos) << shown;
  EXPECT_NE(shown.find("clairfs_tier_capacity_bytes{tier=\"ram\"} 1000\n"), std::string::npos);
}

// The whole path through Registrar: a plan naming a secret file (of a size written nowhere
// else) in a named stream, and a rejected manifest naming another; the counts view of every
// generated file holds neither name, nor the stream's, nor the size; the full view holds them.
class ControlViewsThroughTheRegistrar : public ::testing::Test {
 protected:
  static constexpr uint64_t kSecretSize = 123457;
  ControlViewsThroughTheRegistrar() {
    SetLogLevel(LogLevel::kError);
    backing_.AddFile("secretdir/hidden_name.bin", std::string(kSecretSize, 'x'));
    o_.staging_capacity = 1 << 20;
  }
  ~ControlViewsThroughTheRegistrar() override { prefetcher_.Stop(); }

  Status Commit(std::string_view text) {
    auto w = control_.OpenWriter(false, true);
    Status s = control_.Write(*w, text, 0, false);
    if (s.ok()) s = control_.Flush(*w);
    control_.Release(*w);
    return s;
  }

  testing::MemBacking backing_;
  RamTier ram_{"ram", 1 << 20};
  PrefetchOptions o_;
  NodeStats stats_;
  Prefetcher prefetcher_{backing_, {&ram_}, o_, &stats_.cache};
  Registrar control_{backing_, prefetcher_, stats_.cache, {"/data/set"}};
  ControlViews views_{control_, prefetcher_, stats_};
};

TEST_F(ControlViewsThroughTheRegistrar, CountsHoldNoNameAndNoSize) {
  prefetcher_.Start();
  ASSERT_TRUE(Commit("#stream secretstream\nsecretdir/hidden_name.bin\n").ok())
      << control_.ErrorsText();
  // The RAM tier holds the file: its size is in the full stats (ram_bytes, tiers[].bytes).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (prefetcher_.TierUsedBytes()[0] < kSecretSize) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the file was never prefetched";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(Commit("secretdir/missing_name.bin\n").ok());
  const std::string size = std::to_string(kSecretSize);
  for (ControlFile f :
       {ControlFile::kStats, ControlFile::kPlan, ControlFile::kErrors, ControlFile::kMetrics}) {
    const std::string counts = views_.ViewText(f, ControlView::kCounts);
    for (const std::string& secret :
         {std::string("secretdir"), std::string("hidden_name"), std::string("missing_name"),
          std::string("secretstream"), size}) {
      EXPECT_EQ(counts.find(secret), std::string::npos)
          << "'" << secret << "' in the counts view of file " << int(f) << ":\n"
          << counts;
    }
    EXPECT_FALSE(counts.empty());
  }
  const json stats = json::parse(views_.ViewText(ControlFile::kStats, ControlView::kCounts));
  EXPECT_EQ(stats["view"], "counts");
  EXPECT_EQ(stats["prefetch"]["planned_files"], 1);
  EXPECT_EQ(stats["prefetch"]["streams"].size(), 1u);
  EXPECT_EQ(stats["errors"]["manifest_rejected"], 1);
  const json plan = json::parse(views_.ViewText(ControlFile::kPlan, ControlView::kCounts));
  EXPECT_EQ(plan["files"], 1);
  EXPECT_EQ(plan["entries"], 1);
  EXPECT_FALSE(plan.contains("bytes"));
  EXPECT_FALSE(plan.contains("predicted_backing_bytes"));

  // The full view: names and sizes included.
  const json full_stats = json::parse(views_.ViewText(ControlFile::kStats, ControlView::kFull));
  EXPECT_EQ(full_stats["prefetch"]["streams"][0]["name"], "secretstream");
  EXPECT_EQ(full_stats["ram_bytes"], kSecretSize);
  EXPECT_FALSE(full_stats.contains("view"));
  EXPECT_EQ(views_.ViewText(ControlFile::kPlan, ControlView::kFull), views_.PlanJson());
  EXPECT_EQ(views_.ViewText(ControlFile::kErrors, ControlView::kFull), control_.ErrorsText());
  EXPECT_NE(views_.PlanJson().find("secretstream"), std::string::npos);
  EXPECT_EQ(json::parse(views_.PlanJson())["bytes"], kSecretSize);
  EXPECT_NE(views_.StatsJson().find(size), std::string::npos);
  EXPECT_NE(control_.ErrorsText().find("secretdir/missing_name.bin"), std::string::npos);
  EXPECT_NE(views_.MetricsText().find("stream=\"secretstream\""), std::string::npos);
}

TEST_F(ControlViewsThroughTheRegistrar, CountsWithoutAPlan) {
  const json plan = json::parse(views_.ViewText(ControlFile::kPlan, ControlView::kCounts));
  EXPECT_EQ(plan["entries"], 0);
  EXPECT_EQ(plan["streams"], json::array());
  EXPECT_EQ(views_.ViewText(ControlFile::kErrors, ControlView::kCounts), "");
}

}  // namespace
}  // namespace clairfs
