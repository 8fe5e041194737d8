// The node report's codec (cluster/node_report.h): round trips, every truncation and every
// bound refused, and a time-bounded fuzzer (tests/unit/fuzz_budget.h) whose inputs either fail
// to decode or decode to a report that encodes back to itself and renders as JSON.
#include "cluster/node_report.h"

#include <gtest/gtest.h>

#include <climits>
#include <random>

#include "cluster/message_codec.h"
#include "cluster/protocol.h"
#include "cluster/sealed_transport.h"
#include "control/cluster_view.h"
#include "tests/unit/fuzz_budget.h"

namespace clairfs::cluster {
namespace {

NodeReport Sample() {
  NodeReport n;
  n.rank = 1023;
  n.host = "gpu-node-0417.example";
  n.sequence = 86400;
  n.uptime_ms = 3'600'000;
  n.plan_generation = 7;
  n.plan = PlanState::kPlaced;
  n.dataset_bytes = 1ull << 40;
  n.backing_bytes = 3ull << 30;
  n.backing_reads = 123456;
  n.peer_bytes_in = 5ull << 30;
  n.peer_bytes_out = 4ull << 30;
  n.tiers = {{TierKind::kRam, 60ull << 30, 64ull << 30, 50000},
             {TierKind::kSsd, 700ull << 30, 1ull << 40, 600000}};
  return n;
}

std::string_view View(const std::vector<char>& b) { return {b.data(), b.size()}; }

TEST(NodeReportTest, RoundTripsAndIsSmall) {
  const NodeReport n = Sample();
  const std::vector<char> bytes = EncodeReport(n);
  auto back = DecodeReport(View(bytes));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, n);
  EXPECT_EQ(DecodeReport(View(EncodeReport(NodeReport{}))), NodeReport{}) << "all zero";
  // What one report costs on the wire: a realistic node (two tiers, a 21-byte host name, a
  // terabyte-scale cluster) in well under the few hundred bytes a period allows.
  std::printf("a report: %zu bytes, %zu sealed\n", bytes.size(), bytes.size() + kSealBytes);
  EXPECT_LE(bytes.size(), 120u);
  EXPECT_LE(bytes.size() + kSealBytes, 200u);
}

TEST(NodeReportTest, EveryTruncationAndAnyTrailingByteIsRefused) {
  std::vector<char> bytes = EncodeReport(Sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeReport(std::string_view(bytes.data(), n))) << "cut at " << n;
  }
  bytes.push_back(0);
  EXPECT_FALSE(DecodeReport(View(bytes))) << "a byte left over";
  std::vector<char> other = EncodeReport(Sample());
  other[4] ^= 1;  // the protocol version
  EXPECT_FALSE(DecodeReport(View(other)));
}

// A report written field by field, to break one bound at a time.
std::vector<char> Crafted(uint64_t rank, std::string_view host, uint8_t plan, uint8_t tiers,
                          uint8_t kind) {
  wire::Writer w = MessageWriter();
  w.PutVarint(rank);
  w.PutVarint(host.size());
  w.PutBytes(host.data(), host.size());
  for (int i = 0; i < 3; ++i) w.PutVarint(i);
  w.Put(plan);
  for (int i = 0; i < 5; ++i) w.PutVarint(i);
  w.Put(tiers);
  for (uint8_t t = 0; t < tiers; ++t) {
    w.Put(kind);
    w.PutVarint(1);
    w.PutVarint(2);
    w.PutVarint(3);
  }
  return w.Take();
}

TEST(NodeReportTest, EveryBoundIsChecked) {
  EXPECT_TRUE(DecodeReport(View(Crafted(3, "n3", 2, 8, 2)))) << "at every bound: accepted";
  EXPECT_TRUE(DecodeReport(View(Crafted(INT_MAX, std::string(kMaxReportHost, 'h'), 0, 0, 0))));
  EXPECT_FALSE(DecodeReport(View(Crafted(uint64_t{INT_MAX} + 1, "n", 0, 0, 0)))) << "rank";
  EXPECT_FALSE(DecodeReport(View(Crafted(3, std::string(kMaxReportHost + 1, 'h'), 0, 0, 0))));
  EXPECT_FALSE(DecodeReport(View(Crafted(3, "n 3", 0, 0, 0)))) << "a space in the host";
  EXPECT_FALSE(DecodeReport(View(Crafted(3, "n\n3", 0, 0, 0)))) << "a newline";
  EXPECT_FALSE(DecodeReport(View(Crafted(3, "n\xc3\xa9", 0, 0, 0)))) << "not ASCII";
  EXPECT_FALSE(DecodeReport(View(Crafted(3, "n3", 3, 0, 0)))) << "plan state";
  EXPECT_FALSE(DecodeReport(View(Crafted(3, "n3", 0, kMaxReportTiers + 1, 0)))) << "tiers";
  EXPECT_FALSE(DecodeReport(View(Crafted(3, "n3", 0, 1, 3)))) << "tier kind";
  // A varint of eleven bytes, in place of the rank.
  wire::Writer w = MessageWriter();
  for (int i = 0; i < 11; ++i) w.Put<uint8_t>(0xff);
  EXPECT_FALSE(DecodeReport(View(w.Take())));
}

TEST(NodeReportTest, FuzzedReportsDecodeToThemselvesOrNot) {
  clairfs::testing::FuzzBudget budget(0x4e0de5eed, 2000000);
  std::mt19937_64 rng(budget.seed());
  const std::vector<char> good = EncodeReport(Sample());
  NodeReport small;
  small.host = "n0";
  const std::vector<char> plain = EncodeReport(small);
  int done = 0, decoded = 0;
  for (; budget.More(done); ++done) {
    std::vector<char> b = (rng() & 1) ? good : plain;
    switch (rng() % 4) {
      case 0:  // flip a few bytes after the header
        for (int k = 1 + rng() % 4; k > 0; --k) {
          b[kHeaderBytes + rng() % (b.size() - kHeaderBytes)] = static_cast<char>(rng());
        }
        break;
      case 1:  // cut
        b.resize(rng() % b.size());
        break;
      case 2:  // insert bytes
        for (int k = 1 + rng() % 8; k > 0; --k) {
          b.insert(b.begin() + kHeaderBytes + rng() % (b.size() - kHeaderBytes + 1),
                   static_cast<char>(rng()));
        }
        break;
      default:  // random fields after a good header
        b.resize(kHeaderBytes + rng() % 96);
        for (size_t i = kHeaderBytes; i < b.size(); ++i)
          b[i] = static_cast<char>(rng() % 4 ? rng() % 8 : rng());
        break;
    }
    auto n = DecodeReport(View(b));
    if (!n) continue;
    ++decoded;
    ASSERT_LE(n->host.size(), kMaxReportHost);
    ASSERT_LE(n->tiers.size(), kMaxReportTiers);
    auto again = DecodeReport(View(EncodeReport(*n)));
    ASSERT_TRUE(again) << "seed " << budget.seed() << " input " << done;
    ASSERT_EQ(*again, *n);
    // Whatever decodes renders: the host name is printable ASCII, so valid UTF-8 in JSON.
    ClusterRow row{n->rank, NodeState::kAlive, *n, 1.5};
    ClusterStats stats;
    ASSERT_NO_THROW(ClusterObject({row}, stats, {}).dump());
  }
  budget.Report("node report fuzz", done, std::to_string(decoded) + " decoded");
  EXPECT_GT(decoded, 0);
}

}  // namespace
}  // namespace clairfs::cluster
