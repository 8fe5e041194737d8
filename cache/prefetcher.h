// Prefetcher: fills the tiers and the staging window ahead of the readers, following the plan,
// and answers each open with the file's bytes from the fastest place that has them.
//
// Threads: per tier, `tier_threads[t]` fill it in first-reference order; `staging_threads`
// fill the staging window in exact read order, bounded by staging_capacity bytes; and
// `demand_threads` fetch files a reader reached before the prefetch did. Readers never fetch
// themselves: they wait on a single-flight fetch with a deadline, so a stuck backing store
// cannot hang them past fetch_timeout.
//
// Consumption is observed at open: the earliest unconsumed occurrence of the file in the access
// string is marked consumed (readers may consume out of order); a staged copy is dropped once
// every staged occurrence of it was consumed. The handle keeps the bytes until release.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/backing.h"
#include "cache/plan.h"
#include "cache/single_flight.h"
#include "cache/stats.h"
#include "cache/tier.h"

namespace clairfs {

struct PrefetchOptions {
  uint64_t staging_capacity = 256ull << 20;         // bytes the staging window may hold
  int staging_threads = 4;                          // threads filling the staging window
  std::vector<int> tier_threads;                    // threads filling each tier (default 2)
  int demand_threads = 4;                           // threads fetching what readers reached first
  std::chrono::milliseconds fetch_timeout{60'000};  // longest a reader waits on a fetch
  uint64_t max_file_size = 256ull << 20;            // larger planned files are read directly
};

// ReadAny's source when a peer (ClusterHooks::peer) supplied the bytes.
inline constexpr int kFromPeer = -2;

// How the prefetcher works with other nodes (cluster/). Every member is optional.
struct ClusterHooks {
  // Replaces HDMLP placement (PlaceFiles). It may append files to plan.files (existing ids
  // are kept; it then calls plan.Finalize()) and must fill plan.tier_order. It returns false
  // while the placement is not known yet: the prefetch threads then hold until Replan(), and
  // readers are still served on demand. `replan`: called from Replan(), not for a new plan.
  std::function<bool(Plan& plan, const PlacementLimits& limits, bool replan)> place;
  // A local tier now holds path at version (the fill stored it or found it there).
  std::function<void(const std::string& path, const FileVersion& version)> held;
  // path was just read from the backing store (by the prefetch or for a reader).
  std::function<void(const std::string& path, const BlobPtr& blob)> fetched;
  // Consulted after the local tiers and before the backing store; Contains() must answer
  // from memory. Not owned.
  Tier* peer = nullptr;
  // Source choice: a peer that holds a file is read unless the backing store's measured
  // throughput is more than this many times the peers'; 0 never prefers the backing store.
  double backing_advantage = 0;
};

struct OpenResult {
  enum class Source { kTier, kStaging, kBacking, kDirect, kPeer };
  Source source = Source::kDirect;
  int tier = -1;  // with kTier: which tier
  BlobPtr blob;   // null with kDirect: the caller reads the backing file itself
};

struct PrefetchProgress {
  uint64_t planned_files = 0;  // distinct files in the active plan
  uint64_t epoch = 0;          // 0-based epoch of position
  uint64_t position = 0;       // first access-string position not yet consumed
  uint64_t entries = 0;
  uint64_t staging_bytes = 0;  // bytes held or reserved by the staging window
};

class Prefetcher {
 public:
  // backing, tiers and stats must outlive the prefetcher. Threads start in Start().
  Prefetcher(const Backing& backing, std::vector<Tier*> tiers, PrefetchOptions options,
             Stats* stats);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Before Start().
  void SetCluster(ClusterHooks hooks);
  void Start();
  // Stops and joins every thread; waiting readers get kUnavailable. Idempotent.
  void Stop();

  // Places and publishes a validated plan. Replace: consumption restarts at position 0.
  // Append (plan = old epochs + new ones, file ids kept): consumption state is kept. Tier
  // objects the new placement does not assign to that tier are evicted.
  void Install(std::shared_ptr<Plan> plan, bool append);
  // Places the active plan again (on a copy; ClusterHooks::place decides), keeping progress.
  void Replan();
  std::shared_ptr<const Plan> plan() const;
  const PlacementLimits& limits() const { return limits_; }
  PrefetchProgress progress() const;
  std::vector<uint64_t> TierUsedBytes() const;
  std::vector<uint64_t> TierCorruptions() const;
  std::vector<TierHealth> TierHealths() const;

  // Bytes of path from elsewhere (another node): stored in the tier the plan gives path, if
  // any, unless that tier holds it already or the version differs. Thread-safe.
  void Adopt(const std::string& path, BlobPtr blob);

  // The bytes of path at version from the fastest local tier other than `except` holding them
  // (a tier failure is a miss), without I/O for absent objects; *source (if given): the tier.
  // kNotFound if none. Thread-safe.
  Result<BlobPtr> GetLocal(const std::string& path, const FileVersion& version, int except = -1,
                           int* source = nullptr) const;

  // A reader opened path, whose backing file is now at version. Thread-safe.
  Result<OpenResult> Open(const std::string& path, const FileVersion& version);

 private:
  struct StageEntry {
    BlobPtr blob;          // null until the fetch lands
    FlightPtr flight;      // the fetch that fills it
    uint32_t pending = 0;  // staged occurrences not yet consumed
    uint64_t bytes = 0;    // reserved window bytes
  };
  struct DemandJob {
    std::string path;
    FileVersion version;
    FlightPtr flight;
  };

  void InstallLocked(std::shared_ptr<Plan> plan, bool append, bool replan);
  // Whether to ask a peer that holds a file rather than the backing store (by throughput).
  bool PreferPeer();
  void RecordRate(bool peer, uint64_t bytes, std::chrono::steady_clock::duration took);
  void TierLoop(size_t tier);
  void StagingLoop();
  void DemandLoop();
  Result<BlobPtr> ReadBacking(const std::string& path);
  // The bytes of path at version from GetLocal(except), else from a peer that holds them
  // (ClusterHooks), else from the backing store. *source: the tier, kFromPeer, or -1.
  Result<BlobPtr> ReadAny(const std::string& path, const FileVersion& version, int except,
                          int* source);
  // Runs or joins the single-flight fetch of path; leader work goes to the demand threads.
  Result<BlobPtr> DemandFetch(const std::string& path, const FileVersion& version, int* source);
  Result<BlobPtr> WaitTimed(Flight& flight, int* source = nullptr);
  void ConsumeLocked(uint32_t id, uint32_t* pos);
  // Drops one staged occurrence of id; true if its window bytes were freed.
  bool ReleaseStageLocked(uint32_t id);

  const Backing& backing_;
  const std::vector<Tier*> tiers_;
  const PrefetchOptions options_;
  PlacementLimits limits_;
  Stats* const stats_;
  SingleFlight flights_;

  ClusterHooks cluster_;
  std::mutex install_mu_;                    // serializes Install and Replan; taken before mu_
  std::mutex rate_mu_;                       // leaf
  double peer_rate_ = 0, backing_rate_ = 0;  // bytes per second, moving averages; 0: unknown
  uint64_t choices_ = 0;
  // Lock order: mu_ before SingleFlight's lock before a Flight's lock; tiers' locks are leaves
  // and are never taken while holding mu_, except the peer tier's Contains() (a leaf too).
  mutable std::mutex mu_;
  std::condition_variable tier_cv_;     // a plan was installed, or stop
  std::condition_variable staging_cv_;  // the window has room, a plan was installed, or stop
  std::condition_variable demand_cv_;   // a demand job was queued, or stop
  bool stop_ = false;
  bool started_ = false;
  bool hold_ = false;        // placement pending (ClusterHooks::place returned false)
  uint64_t generation_ = 0;  // bumped by every Install; stale jobs drop their result
  std::shared_ptr<Plan> plan_;
  std::vector<uint8_t> consumed_;   // per position
  std::vector<uint32_t> next_use_;  // per file: earliest unconsumed position, or kNoPos
  uint32_t low_ = 0;                // first unconsumed position
  uint32_t stage_cursor_ = 0;       // next position the staging threads consider
  std::unordered_map<uint32_t, StageEntry> staging_;
  uint64_t staging_bytes_ = 0;
  std::vector<size_t> tier_next_;  // per tier: next index into plan_->tier_order
  std::deque<DemandJob> demand_;
  std::vector<std::thread> threads_;
};

}  // namespace clairfs
