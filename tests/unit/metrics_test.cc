// The Prometheus text renderer (control/metrics.h): the exposition format's rules, escaping, and
// every family of a full stats object with its HELP and TYPE lines.
#include "control/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "control/stats_view.h"

namespace clairfs {
namespace {

using nlohmann::json;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

json SampleStats() {
  return json::parse(R"({
    "file_reads": 12, "bytes_read": 4096, "read_requests": 15, "object_reads": 10,
    "served": {"ram": 6, "staging": 2, "backing": 2, "peer": 0},
    "hit_rates": {"ram": 0.6, "staging": 0.2, "backing": 0.2, "peer": 0.0},
    "hit_rate": 0.8,
    "readiness": {"tiers": 1.0, "window": 0.5, "ready": 0.5},
    "backing_reads": 5, "backing_bytes": 18446744073709551615,
    "stall_ns": 1500000000, "stall_seconds": 1.5,
    "peer_bytes_in": 7, "peer_bytes_out": 9, "peer_errors": 1,
    "errors": {"fetch": 3, "timeout": 0},
    "access": {"open_denied": 4, "control_denied": 0},
    "tiers": [{"name": "ram", "bytes": 100, "capacity": 1000, "state": "on", "fetched": 5},
              {"name": "s\"s\\d\nx", "bytes": 0, "capacity": 10, "state": "off"}],
    "prefetch": {"planned_files": 8, "position": 3, "positions": 16, "epoch": 1,
                 "staging_bytes": 50, "staging_capacity": 200, "fetches": 9,
                 "staging_max_capacity": 400, "staging_threads": 8, "tuner_state": "stable",
                 "streams": [{"name": "rank0", "position": 3, "positions": 16}]},
    "kept": {"queued": 2, "pending": 1}
  })");
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("plain ütf-8"), "plain ütf-8");
  EXPECT_EQ(EscapeHelp("x\\y\nz \"q\""), "x\\\\y\\nz \"q\"");  // quotes stay in help
}

TEST(MetricsTest, FormatsValues) {
  EXPECT_EQ(FormatValue(1.5), "1.5");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  Exposition e;
  e.Family("x_total", Exposition::Type::kCounter, "h");
  e.Sample(uint64_t{18446744073709551615u});   // exact, not rounded through a double
  e.Sample({{"a", "1"}, {"b", "2"}}, json());  // null: NaN
  EXPECT_EQ(e.text(),
            "# HELP x_total h\n# TYPE x_total counter\n"
            "x_total 18446744073709551615\nx_total{a=\"1\",b=\"2\"} NaN\n");
}

// Every family: HELP then TYPE, once, before its samples; sample names belong to the family;
// counters end in _total; every line is a comment or `name[{labels}] value`.
TEST(MetricsTest, EveryFamilyIsDeclaredAndNamed) {
  const std::string text = RenderMetrics(SampleStats());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::map<std::string, std::string> type;
  std::set<std::string> helped;
  std::string current;
  for (const std::string& line : Lines(text)) {
    if (line.rfind("# HELP ", 0) == 0) {
      current = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(helped.insert(current).second) << "HELP twice: " << current;
      EXPECT_GT(line.size(), 8 + current.size()) << "empty help: " << current;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_EQ(name, current) << "TYPE without its HELP just before";
      const std::string t = line.substr(8 + name.size());
      EXPECT_TRUE(t == "counter" || t == "gauge") << line;
      EXPECT_TRUE(type.emplace(name, t).second) << "TYPE twice: " << name;
      if (t == "counter") {
        EXPECT_TRUE(name.ends_with("_total")) << name;
      }
      EXPECT_EQ(name.rfind("clairfs_", 0), 0u) << name;
      continue;
    }
    ASSERT_NE(line.rfind("#", 0), 0u) << line;
    const size_t end = line.find_first_of("{ ");
    ASSERT_NE(end, std::string::npos) << line;
    EXPECT_EQ(line.substr(0, end), current) << "sample outside its family: " << line;
    EXPECT_TRUE(type.count(current)) << line;
  }
  for (const char* name : {"clairfs_file_reads_total",
                           "clairfs_read_bytes_total",
                           "clairfs_read_requests_total",
                           "clairfs_object_reads_total",
                           "clairfs_backing_reads_total",
                           "clairfs_backing_read_bytes_total",
                           "clairfs_peer_bytes_total",
                           "clairfs_errors_total",
                           "clairfs_peer_refused_total",
                           "clairfs_stall_seconds_total",
                           "clairfs_tier_used_bytes",
                           "clairfs_tier_capacity_bytes",
                           "clairfs_tier_on",
                           "clairfs_plan_position",
                           "clairfs_plan_positions",
                           "clairfs_plan_epoch",
                           "clairfs_staging_used_bytes",
                           "clairfs_staging_capacity_bytes",
                           "clairfs_readiness_ratio",
                           "clairfs_hit_ratio",
                           "clairfs_served_ratio"}) {
    EXPECT_TRUE(type.count(name)) << name;
  }
}

TEST(MetricsTest, SamplesCarryTheStatsValues) {
  const std::string text = RenderMetrics(SampleStats());
  std::set<std::string> lines;
  for (const std::string& l : Lines(text)) lines.insert(l);
  for (const char* want : {
           "clairfs_file_reads_total 12",
           "clairfs_read_requests_total 15",
           "clairfs_object_reads_total{source=\"ram\"} 6",
           "clairfs_object_reads_total{source=\"backing\"} 2",
           "clairfs_backing_read_bytes_total 18446744073709551615",
           "clairfs_stall_seconds_total 1.5",
           "clairfs_peer_bytes_total{direction=\"in\"} 7",
           "clairfs_peer_bytes_total{direction=\"out\"} 9",
           "clairfs_errors_total{kind=\"fetch\"} 3",
           "clairfs_errors_total{kind=\"peer\"} 1",
           "clairfs_access_denied_total{kind=\"open\"} 4",
           "clairfs_tier_used_bytes{tier=\"ram\"} 100",
           "clairfs_tier_on{tier=\"ram\"} 1",
           "clairfs_tier_on{tier=\"s\\\"s\\\\d\\nx\"} 0",  // escaped tier name
           "clairfs_tier_fills_total{tier=\"ram\"} 5",
           "clairfs_plan_position 3",
           "clairfs_plan_epoch 1",
           "clairfs_staging_capacity_bytes 200",
           "clairfs_staging_max_capacity_bytes 400",
           "clairfs_staging_threads 8",
           "clairfs_tuner_state{state=\"stable\"} 1",
           "clairfs_tuner_state{state=\"threads\"} 0",
           "clairfs_readiness_ratio{part=\"window\"} 0.5",
           "clairfs_hit_ratio 0.8",
           "clairfs_served_ratio{source=\"staging\"} 0.2",
           "clairfs_stream_positions{stream=\"rank0\"} 16",
           "clairfs_kept_copies_total{outcome=\"queued\"} 2",
           "clairfs_kept_pending 1",
       }) {
    EXPECT_TRUE(lines.count(want)) << "missing: " << want << "\nin:\n" << text;
  }
}

// Nothing read yet: the ratios are NaN, not 0; an empty object renders every family.
TEST(MetricsTest, EmptyStatsRenderValidFamilies) {
  const std::string text = RenderMetrics(json::object());
  EXPECT_NE(text.find("\nclairfs_hit_ratio NaN\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nclairfs_file_reads_total 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE clairfs_tier_used_bytes gauge\n"), std::string::npos);
}

TEST(MetricsTest, ReadinessIsTheSmallerOfTiersAndWindow) {
  EXPECT_DOUBLE_EQ(ComputeReadiness(nullptr, {5}, 0, 100).ready, 1.0);  // no plan
  PlanSummary s;
  s.tiers.push_back({"ram", 4, 400, 1000});
  s.staging.bytes = 300;
  Readiness r = ComputeReadiness(&s, {100}, 50, 200);  // window room: min(300, 200)
  EXPECT_DOUBLE_EQ(r.tiers, 0.25);
  EXPECT_DOUBLE_EQ(r.window, 0.25);
  r = ComputeReadiness(&s, {800}, 200, 200);
  EXPECT_DOUBLE_EQ(r.tiers, 1.0);  // capped
  EXPECT_DOUBLE_EQ(r.window, 1.0);
  EXPECT_DOUBLE_EQ(r.ready, 1.0);
  s.staging.bytes = 0;
  r = ComputeReadiness(&s, {200}, 0, 200);
  EXPECT_DOUBLE_EQ(r.window, 1.0);  // nothing to stage
  EXPECT_DOUBLE_EQ(r.ready, 0.5);
}

}  // namespace
}  // namespace clairfs
