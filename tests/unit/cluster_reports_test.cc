// Node reports between the daemons of a cluster (cluster/report_table.h, ClusterNode's
// kReport): the table's rows (ages, stale, down, gone, refused and silent ranks) with a real
// PeerLiveness, and whole ClusterNodes over a LoopbackNetwork that learn each other's reports,
// refuse malformed ones, and show a killed rank as stale and a stopped one as gone; then the
// stats' "cluster" section built from those rows (control/cluster_view.h).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cluster/cluster_node.h"
#include "cluster/loopback_transport.h"
#include "cluster/node_report.h"
#include "cluster/protocol.h"
#include "cluster/report_table.h"
#include "control/cluster_view.h"
#include "control/counts_view.h"
#include "control/metrics.h"
#include "control/node_stats.h"
#include "tests/unit/test_util.h"

namespace clairfs::cluster {
namespace {

using namespace std::chrono_literals;
using clairfs::testing::WaitFor;
using Clock = std::chrono::steady_clock;

NodeReport Report(int rank, uint64_t backing) {
  NodeReport n;
  n.rank = rank;
  n.host = "n" + std::to_string(rank);
  n.backing_bytes = backing;
  n.tiers = {{TierKind::kRam, backing / 2, 1000, 3}};
  return n;
}

TEST(ReportTableTest, RowsCarryAgesAndTheStateOfEveryRank) {
  PeerLiveness live(0, 6, PeerOptions{});
  ReportTable table(0, 6);
  const auto t0 = Clock::now();
  EXPECT_FALSE(table.Record(0, Report(0, 1), t0)) << "this node's own";
  EXPECT_FALSE(table.Record(6, Report(6, 1), t0)) << "beyond the cluster";
  EXPECT_FALSE(table.Record(2, Report(3, 1), t0)) << "naming another rank than its sender";
  for (int r = 1; r <= 4; ++r) ASSERT_TRUE(table.Record(r, Report(r, 100 * r), t0));
  ASSERT_TRUE(table.Record(1, Report(1, 111), t0 + 5s)) << "a newer report replaces";
  live.MarkDown(2, "test");
  live.MarkGone(3);
  live.Refuse(4, HeaderCheck::kOtherVersion, kProtocolVersion + 1);
  const std::vector<ClusterRow> rows = table.Rows(Report(0, 7), live, t0 + 6s, 3s);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].state, NodeState::kSelf);
  EXPECT_EQ(rows[0].report->backing_bytes, 7u);
  EXPECT_EQ(rows[0].age_seconds, 0);
  EXPECT_EQ(rows[1].state, NodeState::kAlive);
  EXPECT_EQ(rows[1].report->backing_bytes, 111u);
  EXPECT_DOUBLE_EQ(rows[1].age_seconds, 1.0);
  EXPECT_EQ(rows[2].state, NodeState::kDown);
  EXPECT_EQ(rows[3].state, NodeState::kGone);
  EXPECT_EQ(rows[3].report->backing_bytes, 300u) << "a dead rank keeps its last report";
  EXPECT_DOUBLE_EQ(rows[3].age_seconds, 6.0);
  EXPECT_EQ(rows[4].state, NodeState::kRefused);
  EXPECT_EQ(rows[5].state, NodeState::kSilent);
  EXPECT_FALSE(rows[5].report);
  // Later, rank 1 stopped reporting: stale past the bound.
  EXPECT_EQ(table.Rows(Report(0, 7), live, t0 + 9s, 3s)[1].state, NodeState::kStale);
}

// The stats section over those rows: dead ranks' last counters count in the totals, a silent
// rank shows its state alone, and the metrics count the nodes by state.
TEST(ReportTableTest, TheStatsSectionSumsEveryReport) {
  std::vector<ClusterRow> rows = {{0, NodeState::kSelf, Report(0, 10), 0},
                                  {1, NodeState::kAlive, Report(1, 20), 0.5},
                                  {2, NodeState::kGone, Report(2, 30), 9},
                                  {3, NodeState::kSilent, std::nullopt, 0}};
  rows[1].report->dataset_bytes = 5000;
  rows[2].report->tiers.push_back({TierKind::kSsd, 40, 4000, 2});
  ClusterStats stats;
  stats.reports.received = 4;
  const nlohmann::json j = ClusterObject(rows, stats, {2s, 6s});
  ASSERT_EQ(j["nodes"].size(), 4u);
  EXPECT_EQ(j["totals"]["nodes"], 4);
  EXPECT_EQ(j["totals"]["alive"], 2);
  EXPECT_EQ(j["totals"]["reporting"], 3);
  EXPECT_EQ(j["totals"]["backing_bytes"], 60);
  EXPECT_EQ(j["totals"]["ram_bytes"], 5 + 10 + 15);
  EXPECT_EQ(j["totals"]["ram_capacity"], 3000);
  EXPECT_EQ(j["totals"]["ssd_capacity"], 4000);
  EXPECT_EQ(j["totals"]["dataset_bytes"], 5000);
  EXPECT_EQ(j["report_period_seconds"], 2.0);
  EXPECT_EQ(j["stale_after_seconds"], 6.0);
  EXPECT_EQ(j["reports"]["received"], 4);
  EXPECT_EQ(j["nodes"][2]["state"], "gone");
  EXPECT_EQ(j["nodes"][2]["alive"], false);
  EXPECT_EQ(j["nodes"][2]["ssd_bytes"], 40);
  EXPECT_EQ(j["nodes"][2]["tiers"][1]["kind"], "ssd");
  EXPECT_EQ(j["nodes"][1]["host"], "n1");
  EXPECT_EQ(j["nodes"][1]["age_seconds"], 0.5);
  EXPECT_TRUE(j["nodes"][3]["host"].is_null());
  EXPECT_TRUE(j["nodes"][3]["age_seconds"].is_null());
  EXPECT_FALSE(j["nodes"][3].contains("backing_bytes"));
  rows.pop_back();
  for (auto& r : rows) r.report->dataset_bytes = 0;
  EXPECT_TRUE(ClusterObject(rows, stats, {})["totals"]["dataset_bytes"].is_null()) << "unknown";

  const std::string text = RenderMetrics({{"cluster", j}});
  for (const char* line :
       {"clairfs_cluster_nodes{state=\"self\"} 1\n", "clairfs_cluster_nodes{state=\"alive\"} 1\n",
        "clairfs_cluster_nodes{state=\"gone\"} 1\n", "clairfs_cluster_nodes{state=\"silent\"} 1\n",
        "clairfs_cluster_nodes{state=\"stale\"} 0\n",
        "clairfs_cluster_backing_read_bytes_total 60\n",
        "clairfs_cluster_reports_total{outcome=\"received\"} 4\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
  // Other users' counts view shows none of it: it names hosts and byte sizes.
  EXPECT_FALSE(StatsCounts({{"cluster", j}}).contains("cluster"));
  EXPECT_EQ(MetricsCounts({{"cluster", j}}).find("clairfs_cluster_"), std::string::npos);
  const std::string single = RenderMetrics(nlohmann::json::object());
  EXPECT_EQ(single.find("clairfs_cluster_nodes{"), std::string::npos) << "no sample outside";
  EXPECT_EQ(single.find("\nclairfs_cluster_backing_read_bytes_total "), std::string::npos);
}

// What the section costs a reader of stats in a cluster of 1,024 nodes: its size and the time
// to build and print it (printed for docs/control-interface.md; no bound on the time).
TEST(ReportTableTest, TheSectionOfAThousandNodes) {
  constexpr int kNodes = 1024;
  std::vector<ClusterRow> rows;
  for (int r = 0; r < kNodes; ++r) {
    NodeReport n = Report(r, 1ull << 33);
    n.host = "gpu-node-" + std::to_string(1000 + r) + ".example";
    n.tiers.push_back({TierKind::kSsd, 1ull << 39, 1ull << 40, 600000});
    rows.push_back({r, r == 0 ? NodeState::kSelf : NodeState::kAlive, n, 1.25});
  }
  ClusterStats stats;
  const auto start = Clock::now();
  const std::string text = ClusterObject(rows, stats, {10240ms, 30720ms}).dump(2);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const std::string metrics = RenderMetrics({{"cluster", nlohmann::json::parse(text)}});
  std::printf("the cluster section of %d nodes: %zu bytes of stats, %zu of metrics, %.1f ms\n",
              kNodes, text.size(), metrics.size(), ms);
  EXPECT_EQ(nlohmann::json::parse(text)["nodes"].size(), static_cast<size_t>(kNodes));
}

// Three ClusterNodes over a loopback network, each reporting its own backing bytes.
class ReportingCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    PeerOptions po;
    po.report_every = 50ms;
    po.plan_timeout = 100ms;
    for (int r = 0; r < 3; ++r) {
      nodes_.push_back(std::make_unique<ClusterNode>(net_.at(r), po, &stats_[r].cluster));
      nodes_.back()->SetReportSource([this, r](NodeReport* n) {
        n->backing_bytes = backing_[r].load();
        n->tiers = {{TierKind::kRam, 10u * r, 100, 1}};
      });
      nodes_.back()->Start(
          [](const std::string&, const FileVersion&) -> Result<BlobPtr> {
            return Status::Error(Code::kNotFound, "none");
          },
          nullptr);
    }
  }
  void TearDown() override {
    for (auto& n : nodes_) n->Stop();
  }
  // Rank r's row as node `at` sees it.
  ClusterRow Row(int at, int r) { return nodes_[at]->ClusterReports().at(r); }

  LoopbackNetwork net_{3};
  NodeStats stats_[3];
  std::atomic<uint64_t> backing_[3] = {1000, 2000, 3000};
  std::vector<std::unique_ptr<ClusterNode>> nodes_;
};

TEST_F(ReportingCluster, EveryNodeLearnsEveryOthersLatestReport) {
  for (int at = 0; at < 3; ++at) {
    ASSERT_TRUE(WaitFor([&] {
      for (const ClusterRow& row : nodes_[at]->ClusterReports()) {
        if (row.state != NodeState::kSelf && row.state != NodeState::kAlive) return false;
      }
      return true;
    }));
    const std::vector<ClusterRow> rows = nodes_[at]->ClusterReports();
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(rows[r].report);
      EXPECT_EQ(rows[r].report->rank, r);
      EXPECT_EQ(rows[r].report->backing_bytes, backing_[r].load());
      EXPECT_EQ(rows[r].report->tiers.at(0).used_bytes, 10u * r);
      EXPECT_FALSE(rows[r].report->host.empty());
      EXPECT_LT(rows[r].age_seconds, 5.0);
    }
  }
  // A change reaches the others within a few periods.
  backing_[1] = 123456;
  ASSERT_TRUE(WaitFor([&] { return Row(0, 1).report->backing_bytes == 123456; }));
  ASSERT_TRUE(WaitFor([&] { return Row(2, 1).report->backing_bytes == 123456; }));
  EXPECT_GT(stats_[0].cluster.reports.sent.load(), 2u);
  EXPECT_GT(stats_[0].cluster.reports.received.load(), 2u);
  EXPECT_EQ(stats_[0].cluster.reports.refused.load(), 0u);
}

TEST_F(ReportingCluster, MalformedReportsAreRefusedAndCounted) {
  ASSERT_TRUE(WaitFor([&] { return Row(0, 2).state == NodeState::kAlive; }));
  const uint64_t before = Row(0, 2).report->backing_bytes;
  std::vector<char> cut = EncodeReport(Report(2, 999));
  cut.pop_back();
  net_.at(2).Send(0, kReport, cut);
  net_.at(2).Send(0, kReport, EncodeReport(Report(1, 999)));  // rank 2 speaking for rank 1
  ASSERT_TRUE(WaitFor([&] { return stats_[0].cluster.reports.refused.load() == 2; }));
  EXPECT_EQ(Row(0, 2).report->backing_bytes, before);
  EXPECT_NE(Row(0, 1).report->backing_bytes, 999u);
}

TEST_F(ReportingCluster, AKilledRankTurnsStaleAndAStoppedOneGone) {
  ASSERT_TRUE(WaitFor([&] {
    return Row(0, 1).state == NodeState::kAlive && Row(0, 2).state == NodeState::kAlive;
  }));
  net_.Kill(2);  // crashed: no bye, no more reports
  ASSERT_TRUE(WaitFor([&] { return Row(0, 2).state == NodeState::kStale; }));
  const ClusterRow stale = Row(0, 2);
  EXPECT_GT(stale.age_seconds, 0.15) << "older than three periods";
  EXPECT_EQ(stale.report->backing_bytes, 3000u) << "its last report kept";
  nodes_[1]->Stop();  // says bye
  ASSERT_TRUE(WaitFor([&] { return Row(0, 1).state == NodeState::kGone; }));
  EXPECT_EQ(Row(0, 0).state, NodeState::kSelf);
}

}  // namespace
}  // namespace clairfs::cluster
