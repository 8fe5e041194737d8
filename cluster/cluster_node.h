// ClusterNode: this node's part in the cluster (docs/architecture.md, "The peer tier"), over a
// Transport. It owns one class per job and joins them:
//   PlacementCoordinator  the plan exchange and the cluster placement (which node holds what)
//   PeerDirectory         who holds what: the other nodes' announcements, and this node's
//   PeerReader            the read path: a PeerSource the fetcher asks after the local tiers
//   PeerServer            answers the other nodes' requests and keeps what they push
//   PeerLiveness          which ranks are live (down, gone, refused)
//   ReportTable           the other ranks' latest reports of themselves (node_report.h)
// and runs two threads: a receiver that checks every message's header and hands it to its
// class, and a planner that sends this node's announcements (batched, every announce_every),
// its report to every reachable rank once a report period (ReportPeriod), and re-places the
// plan when the coordinator says a placement is due. A peer whose messages
// carry another protocol version (protocol.h) is refused and treated as down.
//
// Thread-safe. Lock order: wake_mu_ is a leaf; the parts' locks are their own (see each
// header), none is held while calling another part except as those headers say.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/plan/place.h"
#include "cache/plan/plan.h"
#include "cache/prefetch/cluster_hooks.h"
#include "cluster/cluster_stats.h"
#include "cluster/node_report.h"
#include "cluster/peer_bytes.h"
#include "cluster/peer_directory.h"
#include "cluster/peer_liveness.h"
#include "cluster/peer_options.h"
#include "cluster/peer_reader.h"
#include "cluster/peer_server.h"
#include "cluster/placement_coordinator.h"
#include "cluster/report_table.h"
#include "cluster/transport.h"

namespace clairfs::cluster {

class ClusterNode {
 public:
  using LocalLookup = PeerServer::LocalLookup;
  using Adopt = PeerServer::Adopt;
  using Fetch = PeerServer::Fetch;
  // Fills what the cluster part does not count of this node's report: its tiers and backing
  // store traffic (the composition root wires ControlViews::FillReport). Called from the
  // planner thread and from ClusterReports' callers, with no lock of this class held.
  using ReportSource = std::function<void(NodeReport*)>;

  // transport and stats must outlive the node; failed transport calls are counted in
  // Stats::mpi_errors.
  ClusterNode(Transport& transport, PeerOptions options, ClusterStats* stats);
  ~ClusterNode();

  // Starts the threads. replan re-places the active plan (Prefetcher::Replan); it is called
  // from the planner thread with no lock held. lookup, adopt and fetch: PeerServer.
  void Start(LocalLookup lookup, std::function<void()> replan, Adopt adopt = nullptr,
             Fetch fetch = nullptr);
  // Before Start: what fills this node's reports; without one they carry no tiers and no
  // backing counters.
  void SetReportSource(ReportSource source) { report_source_ = std::move(source); }
  // Tells the other nodes that this one leaves and joins the threads; waiting readers return
  // kUnavailable at once. Idempotent.
  void Stop();

  // The prefetcher's hooks into this node: place, held, fetched and the peer source.
  ClusterHooks Hooks(double backing_advantage);

  // ClusterHooks::place: PlacementCoordinator::Place.
  bool Place(Plan& plan, const PlacementLimits& limits, bool replan);
  // ClusterHooks::held: a local tier holds key at version; announced with the next batch.
  void Held(const std::string& key, const FileVersion& version);
  // ClusterHooks::fetched: this node read key from the backing store. If another node owns it
  // (so had not announced it yet), the bytes are pushed to that node, which keeps them
  // instead of reading the backing store for the same object again.
  void Fetched(const std::string& key, const BlobPtr& blob);
  // The cluster section of .clairfs/plan, as JSON text.
  std::string InfoJson() const { return coordinator_.InfoJson(); }

  // Every rank's row (ReportTable::Rows), this node's from its counters now.
  std::vector<ClusterRow> ClusterReports() const;
  // This node's report now (its sequence: the number of reports sent so far).
  NodeReport OwnReport() const;
  // How often this node sends its report, and the age past which a report is stale.
  std::chrono::milliseconds report_period() const { return ReportPeriod(options_, size_); }

  // The read path (ClusterHooks::peer).
  PeerSource& source() { return reader_; }
  const PeerDirectory& directory() const { return directory_; }

 private:
  void ReceiveLoop();
  void PlanLoop();
  void Dispatch(Message m);
  void Wake();
  // Sends bytes to every reachable rank; how many it sent to.
  int Broadcast(int tag, const std::vector<char>& bytes);
  // Sends this node's report to every reachable rank (the planner thread).
  void SendReport();

  Transport& transport_;
  const PeerOptions options_;
  ClusterStats* const stats_;
  std::function<void()> replan_;
  ReportSource report_source_;
  const int size_;
  const std::string host_;
  const std::chrono::steady_clock::time_point started_at_;
  std::atomic<uint64_t> reports_made_{0};  // reports sent so far (the next one's sequence)
  std::chrono::steady_clock::time_point next_report_{};  // the planner thread's

  PeerLiveness liveness_;
  PeerDirectory directory_;
  PeerDamage damage_;
  PeerReader reader_;
  PeerServer server_;
  PlacementCoordinator coordinator_;
  ReportTable reports_;

  std::atomic<bool> stop_{false};
  std::mutex wake_mu_;  // leaf: guards woken_ and started_
  std::condition_variable wake_cv_;
  bool woken_ = false;  // the planner is asked to look before its tick
  bool started_ = false;
  std::vector<std::thread> threads_;  // receiver and planner
};

}  // namespace clairfs::cluster
