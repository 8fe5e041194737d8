// Prefetcher: fills the tiers and the staging window ahead of the readers, following the plan,
// and answers each open (of a file that is one object) or chunk read (of a chunked file) with
// the object's bytes from the fastest place that has them.
//
// It orchestrates parts with one job each:
// - TierStack (tier_stack.h): lookup over the local tiers, stores under the active placement,
//   promotion, exclusive tiers;
// - Consumption (consumption.h): consumed positions, next use per object, low-water mark;
// - StagingWindow (staging_window.h): the window's entries, reserved bytes and cursor;
// - Fetcher (fetcher.h): source choice among tiers, peers and the backing store;
// - FetchPool (fetch_pool.h): single-flight, the demand threads, deadlines on every wait;
// - KeepWriter (keep_writer.h): writes the kept copies (kept_copies.h) into the persistent
//   tier in the background, so that a remount starts warm.
// The Prefetcher owns the published plan state, the tier-fill and staging threads, and
// adopting objects other nodes push. Its code is in three files by job: publishing plans,
// progress and the peer entry points (prefetcher.cc), the read path (prefetcher_read.cc: Open,
// ReadChunk, Serve, Upcoming, Sighted) and the fill threads (prefetcher_fill.cc).
//
// Threads: per tier, `tier_threads[t]` fill it in first-reference order; `staging_threads`
// fill the staging window in exact read order (with tune_staging_threads, tune_max_threads of
// them are started and the tuner's target count run, the others wait parked; with either
// setting tuned a tuning thread samples the window every tune_period: autotune.h); `demand_threads`
// (FetchPool) fetch what a reader reached before the prefetch did. Readers never fetch themselves
// and every wait on a fetch ends by fetch_timeout, so a stuck backing store cannot hang a reader,
// and Stop returns once each thread's current source call returns.
//
// Consumption is observed at open for a file that is one object, and at a reader's first read
// of a chunk since its previous chunk for a chunked file (docs/architecture.md): a staged copy
// is dropped once every counted occurrence was consumed or given up (Consumption); the reader
// keeps the bytes it holds until it lets them go.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache/backing/backing.h"
#include "cache/backing/stat_ahead.h"
#include "cache/base/log_limit.h"
#include "cache/base/stats.h"
#include "cache/plan/consumption.h"
#include "cache/plan/place.h"
#include "cache/plan/plan.h"
#include "cache/prefetch/autotune.h"
#include "cache/prefetch/cluster_hooks.h"
#include "cache/prefetch/fetch_pool.h"
#include "cache/prefetch/fetcher.h"
#include "cache/prefetch/keep_writer.h"
#include "cache/prefetch/prefetch_options.h"
#include "cache/prefetch/read_watch.h"
#include "cache/prefetch/staging_window.h"
#include "cache/prefetch/tier_stack.h"
#include "cache/tiers/tier.h"

namespace clairfs {

// One stream's progress (Consumption).
struct StreamProgress {
  std::string name;
  uint64_t epoch = 0, epochs = 0;
  uint64_t position = 0, positions = 0, entries = 0, given_up = 0;
  uint64_t staging_cursor = 0;  // the staging window's next position in this stream
  double idle_seconds = 0;      // since its last read or registration
};

struct OpenResult {
  enum class Source {
    kTier,
    kStaging,
    kBacking,
    kDirect,  // no blob: the caller reads the backing file itself
    kPeer,
    kChunked,  // (Open) a chunked file the plan holds: read it with ReadChunk
  };
  Source source = Source::kDirect;
  size_t tier = 0;     // with kTier: which tier (0: fastest)
  BlobPtr blob;        // the object's bytes; null with kDirect and kChunked
  ByteRange range;     // (ReadChunk) the chunk's range of the file, also with kDirect
  uint64_t chunk = 0;  // (Open, kChunked) the file's grid
};

// The node's progress: sums over its streams, and each stream's.
struct PrefetchProgress {
  uint64_t planned_files = 0;        // distinct files in the active plan
  uint64_t planned_objects = 0;      // objects (files and chunks) in the active plan
  uint64_t epoch = 0;                // the lowest of the streams' 0-based epochs
  uint64_t position = 0;             // positions consumed or given up, summed over streams
  uint64_t positions = 0;            // object reads in all access strings
  uint64_t entries = 0;              // manifest entries
  uint64_t given_up = 0;             // positions given up (Consumption)
  uint64_t staging_bytes = 0;        // bytes held or reserved by the staging window
  uint64_t staging_ready_bytes = 0;  // of those, fetched (held for the readers)
  uint64_t staging_capacity = 0;     // the window's capacity now (the tuner may grow it)
  int staging_threads = 0;           // staging threads running now (the tuner's target)
  TunerState tuner_state = TunerState::kStatic;
  std::vector<StreamProgress> streams;  // in the plan's (name) order
  std::vector<ReadWarning> warnings;    // raised by ReadWatch and not cleared
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
  // Before Start(): hook is called after each read that consumed a planned position, with no
  // lock of the prefetcher's held (StatAhead::Consumed).
  void SetConsumeHook(std::function<void()> hook) { consumed_hook_ = std::move(hook); }
  void Start();
  // Stops and joins every thread; waiting readers get kUnavailable or kTimedOut, every flight
  // is finished. Idempotent.
  void Stop();

  // A change of the active plan, computed from it (null before the first) while no other
  // change runs: the new plan, null for no change, or an error (nothing changes).
  using PlanChange = std::function<Result<std::shared_ptr<Plan>>(const Plan* current)>;
  // Applies change and places and publishes its plan. A stream of the new plan with the name
  // and serial of an active one keeps its consumption (epochs were appended, or another
  // stream changed); any other starts at position 0. Tier objects the new placement does not
  // assign to that tier (or a faster one) are evicted, and no fill, reader or Adopt working
  // from an older plan can store one after that. Changes from the control file and from the
  // idle-stream reaper are serialized here, so that none is lost.
  Result<std::shared_ptr<const Plan>> Update(const PlanChange& change);
  // Update to plan.
  void Install(std::shared_ptr<Plan> plan);
  // Places the active plan again (on a copy; ClusterHooks::place decides), keeping progress.
  void Replan();
  std::shared_ptr<const Plan> plan() const;
  const PlacementLimits& limits() const { return limits_; }
  // The grids new plans are cut with (MergePlan; a file keeps its grid across appends).
  uint64_t chunk_size() const { return options_.chunk_size; }
  uint64_t record_chunk_size() const { return options_.record_chunk_size; }
  uint32_t max_streams() const { return options_.max_streams; }
  PrefetchProgress progress() const;
  std::vector<uint64_t> TierUsedBytes() const { return tiers_.UsedBytes(); }
  std::vector<uint64_t> TierCorruptions() const { return tiers_.Corruptions(); }
  std::vector<TierHealth> TierHealths() const { return tiers_.Healths(); }
  // Kept copies queued and not yet written (KeepWriter).
  uint64_t KeepPending() const { return keeper_.pending(); }

  // The object of key from elsewhere (another node): stored in the tier the active placement
  // gives it, if any, unless that tier holds it already or the version or size differs.
  // Thread-safe.
  void Adopt(const std::string& key, BlobPtr blob);

  // For a peer that reads key before this node's fill got to it (PeerServer's kFetch): the
  // object, if the active placement holds it in a tier of this node at version, from that
  // tier, or read now (a demand fetch, joined with the fill's if it is running) and stored
  // there, so that the backing store is read once for both. kNotFound when the placement does
  // not hold it here at version. Thread-safe; bounded by the fetch timeout.
  Result<BlobPtr> FetchForPeer(const std::string& key, const FileVersion& version);

  // The object of key at version from the fastest local tier holding it (a tier failure is a
  // miss), without I/O for absent objects. kNotFound if none. Thread-safe.
  Result<BlobPtr> GetLocal(const std::string& key, const FileVersion& version) const {
    return tiers_.Get(key, version);
  }

  // Fills *files (StatAhead::Hooks::upcoming) with the file of each position not done yet among
  // each stream's stretch, but those query.skip vouches for (files->plan: a number of the
  // active plan, its ids the plan's object ids): the stretch is the stream's next `per`
  // positions from per / 4 behind the furthest its readers are known to have reached
  // (consumed, or sighted at a signpost; readers run a little out of order); per =
  // query.ahead / streams, at least kMinUpcoming. With query.posts, files->posts gets
  // signposts among all of them: in the second half of each stretch, the first position at or
  // after each point of a grid of per / kPostsPerStretch whose file the stretch does not read
  // at a position not done before it (so that a reader of that file is at that position); and,
  // as spares, every other such position of the stretch's last quarter. Thread-safe.
  void Upcoming(const UpcomingQuery& query, UpcomingFiles* files) const;
  // A reader reached post (StatAhead::Reached) though the daemon may have seen none of the reads
  // before it: the stretch of its stream counts from there. Moves nothing staged, consumes
  // nothing. False, changing nothing, when the stream was replaced or is known to be past pos.
  // Thread-safe.
  bool Sighted(const Signpost& post);
  static constexpr uint32_t kMinUpcoming = 32;
  static constexpr uint32_t kPostsPerStretch = 8;

  // A reader opened path, whose backing file is now at version: consumes and serves the
  // file's object if the plan has the file as one; kChunked if the plan holds chunks of it at
  // this version; else kDirect. consume false: serves without consuming, and without counting
  // in file_reads (a read of the file already counted). Thread-safe.
  Result<OpenResult> Open(const std::string& path, const FileVersion& version, bool consume = true);
  // Whether the active plan names path, as an object or a chunked file: an Open of a path it
  // does not name is kDirect whatever the version and whatever a tier holds (so a reader may
  // open the backing file before it knows the version). Thread-safe.
  bool Plans(const std::string& path) const;
  // A reader of chunked file path (opened at version, kChunked) reads at offset: the chunk of
  // the file's grid in the active plan holding offset, served like Open serves an object, or
  // kDirect if the plan has no such chunk. consume: this is the reader's first read of the chunk
  // since its previous one (an object read). Thread-safe.
  Result<OpenResult> ReadChunk(const std::string& path, const FileVersion& version, uint64_t offset,
                               bool consume);

 private:
  void InstallLocked(std::shared_ptr<Plan> plan, bool replan);
  // Before a cluster placement: sets PlanObject::held of every object of plan (a local tier
  // holds it at its version), and adds to plan, held and read by no stream (freq 0), every
  // object the tiers hold that it does not name, at the version held: the placement may leave
  // them here for the nodes that read them (cluster/holders.h). A local reader of such an object
  // is served it only at that version (Open's version check). Finalizes plan if it added any.
  void MarkHeld(Plan& plan) const;
  // The stream a read of object id is counted for: the one whose earliest unconsumed
  // occurrence of id lies nearest its low-water mark, within consumption_lag positions (a
  // tie: the one that read last), else the one that read last among those still reading id;
  // -1 if none does. Under mu_.
  int Attribute(uint32_t id);
  // Removes the streams idle for options_.stream_idle, until Stop.
  void ReapLoop();
  // An object read of key at version (Open, ReadChunk); `chunk`: of a chunked file. An open
  // (!chunk) of a chunked file the plan holds answers kChunked, under the same lock. In three
  // steps: what the plan says of the read (ClaimRead, under mu_), then the fastest source
  // holding the object: a local tier (FromTier), the staging window (the claim's staged
  // copy), else a demand fetch (OnDemand: peers, slower tiers, the backing store).
  Result<OpenResult> Serve(const std::string& key, const FileVersion& version, bool consume,
                           bool chunk);
  // What the plan says of one object read, decided under mu_: the read consumed (consume: its
  // position in the stream Attribute picks), shown to the read watch, its staged copy taken.
  struct Claim {
    std::optional<OpenResult> answer;  // set: answered already (chunked, unplanned, stale, direct)
    Placement place = kDirect;
    StagingWindow::Hit staged;  // the staged copy, or the flight that fetches it
    bool freed = false;         // the window has room again: staging threads to wake
    bool consumed = false;      // a planned position was consumed: consumed_hook_ to call
  };
  Claim ClaimRead(const std::string& key, const FileVersion& version, bool consume, bool chunk);
  // The fastest local tier holding key at version serves *out (a copy below place's tier is
  // promoted there); false if none holds it. consume: counted in served_tier.
  bool FromTier(const std::string& key, const FileVersion& version, Placement place, bool consume,
                OpenResult* out);
  // A demand fetch (FetchPool), joined with a fill's flight if one runs, stored in place's tier.
  Result<OpenResult> OnDemand(const std::string& key, const FileVersion& version, Placement place,
                              bool consume);
  // key's backing file is not at the version the plan cached: counted and logged
  // (rate-limited); it is read from the backing store, never from a tier.
  void Stale(std::string_view key);
  // Shows read to watch_ and logs the warning it raises, if any. Under mu_.
  void Watch(const ReadWatch::Read& read);
  // The staging window's capacity at start: the configured one, or with tuning the tuner's
  // start (at least the largest object: a chunk); and the tuner's limits (prefetcher_fill.cc).
  static uint64_t StagingStartCapacity(const PrefetchOptions& o);
  static TunerLimits TunerLimitsOf(const PrefetchOptions& o);
  void TierLoop(size_t tier);
  // Staging thread `index` (from 0): parked while index >= staging_target_.
  void StagingLoop(int index);
  // Samples the window every options_.tune_period, feeds the tuner and applies its target,
  // until Stop.
  void TuneLoop();
  // Stores blob (from `source`) in tier t, the placement permitting; counts a full tier.
  // Queues the copy the placement has a slower tier keep, unless it came from there.
  bool StoreInTier(size_t t, const std::string& key, const BlobPtr& blob,
                   const FetchSource& source);
  std::chrono::steady_clock::time_point Deadline() const {
    return std::chrono::steady_clock::now() + options_.fetch_timeout;
  }

  const PrefetchOptions options_;
  PlacementLimits limits_;
  Stats* const stats_;
  TierStack tiers_;
  Fetcher fetcher_;
  FetchPool pool_;
  KeepWriter keeper_;
  ClusterHooks cluster_;
  std::function<void()> consumed_hook_;  // set before Start()

  // Lock order: install_mu_, then (one at a time, never under mu_) TierStack's gates, then
  // mu_, then FetchPool::mu_, SingleFlight's lock, a Flight's lock. Tiers' own locks, the
  // peer tier's Contains() and KeepWriter's lock are leaves; mu_ is never held while
  // fetching, storing or queueing a kept copy. The tuning thread adds no lock: it takes mu_
  // alone (to sample the window and publish the target), its Autotuner is its own, and the
  // bytes fetched are an atomic.
  std::mutex install_mu_;            // serializes Install and Replan
  mutable std::mutex mu_;            // guards everything below
  std::condition_variable tier_cv_;  // a plan was published, or stop
  // The window has room, a plan was published, the tuner changed the target, or stop.
  std::condition_variable staging_cv_;
  // Parked staging threads wait here, not on staging_cv_ (whose every consumption would wake
  // them all for nothing): the tuner changed the target, or stop.
  std::condition_variable park_cv_;
  bool stop_ = false;
  bool started_ = false;
  bool hold_ = false;        // placement pending (ClusterHooks::place returned false)
  uint64_t generation_ = 0;  // bumped by every publish; stale staging results are dropped
  std::shared_ptr<const Plan> plan_;
  std::vector<Consumption> consumption_;                       // per stream of plan_, in its order
  std::vector<std::chrono::steady_clock::time_point> active_;  // per stream: last read/register
  std::vector<uint32_t> sighted_;  // per stream: the furthest signpost its readers reached
  StagingWindow window_;
  ReadWatch watch_;                  // logs under mu_: each warning once per plan
  LogLimit stale_log_;               // files changed since the plan was made
  LogLimit full_log_;                // stores refused by a full tier
  std::condition_variable reap_cv_;  // stop
  std::condition_variable tune_cv_;  // stop
  // The tuner's target and what it samples (autotune.h): staging threads with an index at or
  // past staging_target_ wait parked; staging_full_ is set when the walk found no room, and
  // cleared by each sample.
  int staging_target_ = 0;
  bool staging_full_ = false;
  TunerState tuner_state_ = TunerState::kStatic;
  // Bytes the staging threads fetched (leaders only); read by the tuning thread. No lock.
  std::atomic<uint64_t> staging_fetched_bytes_{0};
  std::vector<size_t> tier_next_;  // per tier: next index into plan_->tier_order
  std::vector<std::thread> threads_;
};

}  // namespace clairfs
