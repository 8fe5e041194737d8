// ClusterStats: the peer tier's counters (cluster/), updated lock-free by its threads and read by
// .clairfs/stats (control/node_stats.h). What the cache counts of peers (objects served from or
// fetched from them, adopted) is in Stats (cache/base/stats.h).
#pragma once

#include <atomic>
#include <cstdint>

namespace clairfs {

struct ClusterStats {
  using Counter = std::atomic<uint64_t>;
  Counter peer_bytes_in{0};   // object bytes received from peers
  Counter peer_bytes_out{0};  // object bytes sent to peers
  Counter peer_errors{0};     // requests that failed: timeout, down peer, bad hash, bad reply
  // Messages refused: another protocol version, or no magic; or an object whose size or
  // version does not match the key and version asked for (PeerSource::CountMismatch).
  Counter peer_protocol_errors{0};
  Counter mpi_errors{0};  // MPI calls that returned an error (logged, rate-limited)
  // Node reports (cluster/node_report.h): sent (one per receiving rank), received and kept,
  // and refused unread because malformed or naming another rank than their sender.
  struct Reports {
    Counter sent{0};
    Counter received{0};
    Counter refused{0};
  } reports;
  // Peer messages dropped unread because their seal failed (cluster/sealed_transport.h).
  struct PeerRefused {
    Counter unsealed{0};       // no seal: not sent by a daemon of a sealed cluster
    Counter other_cluster{0};  // sealed under another cluster's key
    Counter other_session{0};  // sealed for another session: an earlier run's, or another rank's
    Counter forged{0};         // the MAC does not match: bytes changed, or sealed without the key
    Counter replayed{0};       // accepted once already: sent again
  } peer_refused;
};

}  // namespace clairfs
