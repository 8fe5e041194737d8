// PeerTier: the other nodes' caches, as one more tier (design.md section 3), over a Transport.
//
// Plans. When this node registers a manifest, Place() sends its plan digest to every rank,
// with the node's catalog (its object keys and versions: protocol.h) only where that rank was
// not sent the same catalog before, as after an epoch appended over the same files.
// Once every live rank's digest is here, or plan_timeout after this node registered, every
// node computes the same cluster placement (placement.h) and its prefetcher fills what this
// node owns. A digest that arrives later (a late node, new epochs), a node that leaves or one
// marked down triggers a new placement. Until the first placement the prefetcher holds, so
// nodes do not all read the same files from the backing store.
//
// Holding. Every file a local tier holds is announced to the other nodes (batched); Get()
// asks only a node that announced the file at the requested version. A peer answers at once
// with the bytes and their xxh3, or "not here"; the receiver checks the hash and the size, so
// a bad reply is a miss, never wrong bytes. A peer that does not answer within peer_timeout is
// marked down and skipped for down_for; readers then go to the backing store. A peer whose
// messages carry another protocol version (protocol.h) is refused and treated as down.
//
// Threads: a receiver (dispatches messages), serve_threads servers (answer requests from
// the local tiers), and a planner (announcements, placement deadlines, replans). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/base/log_limit.h"
#include "cache/plan/plan.h"
#include "cache/base/string_map.h"
#include "cache/base/stats.h"
#include "cache/tiers/tier.h"
#include "cluster/peer_options.h"
#include "cluster/placement.h"
#include "cluster/protocol.h"
#include "cluster/transport.h"

namespace clairfs::cluster {

class PeerTier : public Tier {
 public:
  // This node's tiers: the bytes of path at version if a local tier holds them. Must not
  // block on the network.
  using LocalLookup = std::function<Result<BlobPtr>(const std::string&, const FileVersion&)>;

  PeerTier(Transport& transport, PeerOptions options, Stats* stats);
  ~PeerTier() override;

  // Offers this node's tiers a file another node pushed (Prefetcher::Adopt).
  using Adopt = std::function<void(const std::string&, BlobPtr)>;

  // Starts the threads. replan re-places the active plan (Prefetcher::Replan); it is called
  // from the planner thread with no lock held. adopt is called from a serving thread.
  void Start(LocalLookup lookup, std::function<void()> replan, Adopt adopt = nullptr);
  // Tells the other nodes that this one leaves and joins the threads; waiting readers return
  // kUnavailable at once. Idempotent.
  void Stop();

  // ClusterHooks::place: see the header comment. Returns false while the placement waits for
  // other nodes' plans.
  bool Place(Plan& plan, const PlacementLimits& limits, bool replan);
  // ClusterHooks::held: a local tier holds path at version.
  void Held(const std::string& path, const FileVersion& version);
  // ClusterHooks::fetched: this node read path from the backing store. If another node owns
  // it (so had not announced it yet), the bytes are pushed to that node, which keeps them
  // instead of reading the backing store for the same file again.
  void Fetched(const std::string& path, const BlobPtr& blob);
  // The cluster section of .clairfs/plan, as JSON text.
  std::string InfoJson() const;

  const std::string& name() const override { return name_; }
  Result<BlobPtr> Get(std::string_view path, const FileVersion& version) override;
  // Peers fill their own tiers: refused with kNoSpace.
  Status Put(std::string_view path, BlobPtr blob) override;
  bool Contains(std::string_view path, const FileVersion& version) override;
  void Erase(std::string_view) override {}
  void RetainOnly(const std::function<bool(std::string_view, const FileVersion&)>&) override {}
  uint64_t used_bytes() const override;  // bytes the other nodes announced
  uint64_t capacity() const override;    // the other registered nodes' tier capacity

 private:
  struct Holder {
    int rank;
    FileVersion version;
  };
  struct Pending {
    bool done = false;
    std::vector<char> reply;
  };

  void ReceiveLoop();
  void ServeLoop();
  void PlanLoop();
  void Broadcast(int tag, const std::vector<char>& bytes);
  bool LiveLocked(int r, std::chrono::steady_clock::time_point now) const;  // mu_ held
  // plan_mu_ held: the live ranks (not this one) that have not registered a plan.
  std::vector<int> UnregisteredLocked() const;
  void MarkDown(int r);  // logged when r was live
  // Data of key from r that fails its checks: counted in Stats::peer_errors, logged
  // (rate-limited).
  void Damaged(int r, std::string_view key);
  // plan_mu_ held: sends mine to every other rank, with its catalog where that rank was not
  // sent this catalog yet (a rank skipped as gone or incompatible gets it next time).
  void SendDigestLocked(const Digest& mine);
  // Receiver thread: a kPlan from r that does not decode (malformed, a damaged catalog, or a
  // digest naming a catalog this node does not hold). Counted in
  // Stats::peer_protocol_errors and logged once per reason; r's earlier digest is dropped, so
  // r counts as unregistered (placed without it once plan_timeout passed) until it sends a
  // digest that decodes.
  void RefuseDigest(int r, const std::string& why);
  // A message from r without this protocol's header: r is treated as down for good (logged
  // once, every such message counted in Stats::peer_protocol_errors).
  void Refuse(int r, HeaderCheck check, uint16_t version);

  Transport& transport_;
  const PeerOptions options_;
  Stats* const stats_;
  const std::string name_ = "peer";
  const int rank_, size_;
  LocalLookup lookup_;
  std::function<void()> replan_;
  Adopt adopt_;

  // Lock order: plan_mu_ before mu_. Transport calls may be made under either.
  mutable std::mutex plan_mu_;
  std::vector<std::optional<Digest>> digests_;  // by rank; this node's own included
  std::vector<std::optional<uint64_t>> catalog_sent_;  // by rank: hash of the last catalog sent
  uint64_t plan_bytes_sent_ = 0;  // kPlan bytes sent, all ranks
  uint64_t catalog_sends_ = 0;    // kPlan messages that carried the catalog
  uint64_t generation_ = 0;
  bool registered_ = false;  // this node has a plan
  std::chrono::steady_clock::time_point registered_at_;
  bool placed_ = false;  // the active plan has a cluster placement
  bool dirty_ = false;   // digests or liveness changed since the last placement
  ClusterPlacement totals_;
  LocalPlacement local_;
  std::vector<int> placed_ranks_;
  bool said_waiting_ = false;       // the wait for this registration's missing ranks was logged
  std::vector<int> said_missing_;   // the ranks the last placement was logged to lack
  StringMap<int> peer_owner_;  // files read here that another node owns

  mutable std::mutex mu_;
  std::condition_variable reply_cv_, serve_cv_, plan_cv_;
  bool stop_ = false;
  bool started_ = false;
  std::unordered_map<std::string, Holder> holders_;
  uint64_t holder_bytes_ = 0;
  std::vector<std::chrono::steady_clock::time_point> down_until_;
  std::vector<bool> gone_;          // said bye
  std::vector<bool> incompatible_;  // speaks another protocol version: never asked or placed
  uint64_t next_id_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<Pending>> pending_;
  std::deque<Message> requests_;  // kRequest and kPush, for the serving threads
  std::vector<std::pair<std::string, FileVersion>> announce_;
  std::vector<std::thread> threads_;

  // Receiver thread only: the last catalog accepted from each rank, and the reason its last
  // digest was refused (empty: it decoded).
  std::vector<std::optional<Catalog>> catalogs_;
  std::vector<std::string> digest_error_;
  LogLimit damage_log_;
};

}  // namespace clairfs::cluster
