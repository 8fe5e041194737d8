// A node's report of itself (kReport, protocol.h): what every daemon of a cluster tells the
// others every report period (PeerOptions::report_every, ReportPeriod), so that the stats of any
// node show the whole cluster (docs/control-interface.md, "cluster"). The structs and the names
// of their enums are header-only, so that control/ renders them without linking cluster/; the
// codec is in node_report.cc.
//
// Encoding (after the protocol's header, wire.h): the rank (varint), the host name (a varint
// length, at most kMaxReportHost bytes, each printable ASCII), the sequence number, the uptime in
// ms, the plan generation, the plan state (one byte), the dataset bytes, backing bytes, backing
// reads, peer bytes in and out (varints each), the tier count (one byte, at most
// kMaxReportTiers), then per tier its kind (one byte), bytes used, capacity and objects (varints).
// Nothing follows. A report of a node with two tiers and a 20-byte host name is about 60 to 100
// bytes, and 60 more of seal (sealed_transport.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace clairfs::cluster {

inline constexpr size_t kMaxReportHost = 255;  // bytes of a host name (HOST_NAME_MAX is 64)
inline constexpr size_t kMaxReportTiers = 8;   // tiers of one node (more than any config has)

enum class TierKind : uint8_t { kRam = 0, kSsd = 1, kOther = 2 };

inline const char* TierKindName(TierKind k) {
  switch (k) {
    case TierKind::kRam:
      return "ram";
    case TierKind::kSsd:
      return "ssd";
    case TierKind::kOther:
      break;
  }
  return "other";
}

// A tier's name as the configuration gives it ("ram", "ssd") to its kind.
inline TierKind TierKindOf(std::string_view name) {
  if (name == "ram") return TierKind::kRam;
  if (name == "ssd") return TierKind::kSsd;
  return TierKind::kOther;
}

// Where the node's plan is in the cluster's placement (PlacementCoordinator's "state").
enum class PlanState : uint8_t { kNone = 0, kWaiting = 1, kPlaced = 2 };

inline const char* PlanStateName(PlanState s) {
  switch (s) {
    case PlanState::kNone:
      return "no plan";
    case PlanState::kWaiting:
      return "waiting for plans";
    case PlanState::kPlaced:
      return "placed";
  }
  return "no plan";
}

struct TierReport {
  TierKind kind = TierKind::kOther;
  uint64_t used_bytes = 0;
  uint64_t capacity = 0;
  uint64_t objects = 0;  // objects the active plan places in the tier

  bool operator==(const TierReport&) const = default;
};

struct NodeReport {
  int rank = 0;
  std::string host;              // the node's host name (gethostname)
  uint64_t sequence = 0;         // reports this daemon sent before this one
  uint64_t uptime_ms = 0;        // since the daemon's cluster part started
  uint64_t plan_generation = 0;  // of the node's plan part (0: none registered)
  PlanState plan = PlanState::kNone;
  uint64_t dataset_bytes =
      0;  // the whole cluster's planned bytes as this node knows them (0: unknown)
  uint64_t backing_bytes = 0;  // read from the backing store
  uint64_t backing_reads = 0;
  uint64_t peer_bytes_in = 0;   // object bytes received from peers
  uint64_t peer_bytes_out = 0;  // object bytes sent to peers
  std::vector<TierReport> tiers;

  bool operator==(const NodeReport&) const = default;
};

// What a node knows of one rank (ClusterNode::ClusterReports):
//   kSelf     this node (its report made from its live counters)
//   kAlive    reported within the stale bound (ReportStaleAfter), and live
//   kStale    live, but its last report is older than the stale bound: it stopped reporting
//   kSilent   live, and never reported (not yet started, or an older build)
//   kDown     missed a reply deadline (PeerLiveness: down for down_for)
//   kGone     said bye (its daemon stopped)
//   kRefused  speaks another protocol version: its messages are ignored
enum class NodeState : uint8_t { kSelf, kAlive, kStale, kSilent, kDown, kGone, kRefused };

inline const char* NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kSelf:
      return "self";
    case NodeState::kAlive:
      return "alive";
    case NodeState::kStale:
      return "stale";
    case NodeState::kSilent:
      return "silent";
    case NodeState::kDown:
      return "down";
    case NodeState::kGone:
      return "gone";
    case NodeState::kRefused:
      return "refused";
  }
  return "silent";
}

// One rank's row: its state, its latest report (none for a rank that never reported) and the
// report's age in seconds (0 for this node's own).
struct ClusterRow {
  int rank = 0;
  NodeState state = NodeState::kSilent;
  std::optional<NodeReport> report;
  double age_seconds = 0;
};

// The message's bytes (header included).
std::vector<char> EncodeReport(const NodeReport& report);
// The report, or nullopt when bytes are not exactly one well-formed report: no header, a
// field cut short, a host name too long or not printable ASCII, too many tiers, an enum out of
// range, a rank that is negative or beyond int, or bytes left over.
std::optional<NodeReport> DecodeReport(std::string_view bytes);

}  // namespace clairfs::cluster
