// StatAhead: stats the files the plan says the readers read next, in batches and ahead of
// them, so that a read reaching the daemon can take its file's version from a stat made
// moments before, instead of handing a stat of its own to an I/O thread and waiting for it
// (in no-open mode, with the data in a tier, that hand-off is most of what a read costs).
//
// A recorded stat answers for its path (Recent) only while nothing can have changed the file
// unseen:
// - it was made by a batch that began after the path's directory was watched (Hooks::watched:
//   the backing watch reports every change made on this node to the names in it, Forget);
// - no change of the path was reported since, and none at all while its batch ran (the whole
//   batch is dropped then), and no report was lost (ForgetAll);
// - every change reported so far was passed on (Hooks::quiet): the kernel queues the report
//   of a change before the call that made it returns, so a record is not used from that
//   moment until the report was applied;
// - it is at most max_age old: the bound for changes no watch sees (another node of a network
//   file system, a write through a shared mapping, a hard link in a directory not watched).
// Otherwise the caller stats the path itself. A stat that fails records nothing; a store that
// stalls costs a batch (one I/O call with the store's deadline, Backing::LstatMany), never a
// reader.
//
// Directories: each batch also stats the directories the upcoming paths lie in (each once per
// batch, with the files, in the same call; skipped while its record is young, as a file's is),
// and records them under the same rules (vouched when the directory they lie in is watched), so
// that a LOOKUP of a planned name (DatasetCore::Lookup) checks its parent's identity and takes
// the name's attributes without a backing call on the reader's path. Only regular files and
// directories are recorded.
//
// One thread makes the batches. Readers wake it (Consumed) once they have consumed half of
// what the records covered after the last batch (at most ahead / 2, at least kMinReads: a
// batch then stats about what was consumed since the last), or the last batch is
// half max_age old; otherwise it sleeps, so an idle job costs nothing. A batch stats the paths
// of the streams' next `ahead` positions (Hooks::upcoming; more after a signpost's wait,
// below, up to max_reach) whose record is missing or older than max_age / 2. A file recorded
// (vouched) by a batch begun less than max_age / 2 ago is passed over by its plan's object id
// (UpcomingQuery::skip, on the batch thread's own stamps: seen_), without a copy of its path
// or a lookup of its record: a batch costs about the files it stats, not the stretch it
// covers. A Forget, ForgetAll or a record dropped for room makes the next batch look at every
// file again.
// Memory: at most `capacity` records (the oldest are dropped first), about 250 bytes each,
// and a 4-byte stamp per object of the plan.
//
// Freshness (fs/fresh/revalidate.h), unless the dataset is declared immutable: with `check_all`,
// paths in directories not watched are statted too (recorded, never answered by Recent), and
// every batch's stats go to Hooks::checked, which compares them with what the kernel was given;
// with `idle_refresh`, a batch also runs that long after the last one while nothing wakes the
// thread (readers served by the page cache, or pausing), so a path the plan reads next is
// statted at least every idle_refresh + max_age / 2 (its record is refreshed once older than
// max_age / 2) plus one batch's time: the bound within which a planned read sees a change
// made where no watch sees it. It costs up to `ahead` stats per idle_refresh while streams
// are registered (none without a plan).
//
// Signposts (with Hooks::post): the kernel's page cache answers a warm epoch's reads without a
// word to the daemon, so its streams would not move and the batches would stat what the
// readers passed long ago. So each batch also picks a few upcoming positions (Hooks::
// upcoming's posts: a grid in the second half of each stream's stretch) and, once the batch's
// stats are compared, has the kernel drop their files' cached attributes (Hooks::post; pages
// stay; each post is armed before its drop, so that a reader the drop sends asking at once is
// seen). A reader that reaches such a file makes the kernel ask the daemon for its attributes
// (the permission check of its open, or the read itself: FUSE_CAP_AUTO_INVAL_DATA), and the
// daemon calls Reached, which moves the stream's stretch there (Hooks::sighted) and wakes a
// batch. A reader at a post in the last quarter of the stretch that chose it waits there until
// a batch begun after it has run (at most kWaitAges x max_age: a store slower than that lets
// the readers on), and the next kSpares spares past it (the other positions of that quarter
// whose file the stretch reads there first) are armed at once, so that the stream's other
// readers (as many as kSpares, interleaved) wait at the next file they reach: no reader passes
// the statted stretch while a batch is late.
// Since such readers read faster than a stretch is statted, each wait also doubles the
// positions the next batches ask Hooks::upcoming for (at most max_reach; a batch of the
// idle refresh halves them again, down to `ahead`), so that readers at page-cache speed soon
// wait no more: the stats are the same, made further ahead. A post costs the reader one round
// trip; about one position in 32 has one (Prefetcher::kPostsPerStretch), and the spares only
// while readers outrun the batches. Only reads that reach the daemon move the streams; posts
// never move what is staged or given up. Armed posts are kept until reached (at most
// kMaxPosts; beyond, the oldest batches' go).
//
// Thread-safe. Lock order: mu_ is a leaf; hooks and the store are called without it.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/backing/backing.h"
#include "cache/base/stats.h"

namespace clairfs {

// A planned position whose reader the daemon wants to hear of: the file at path, position pos
// of the stream whose serial is `serial` (PlanStream::serial). last: pos lies in the last
// quarter of the stretch statted by the batch that picked it (its reader waits for the next).
// spare: armed only once a reader waits at a post of that stretch (StatAhead::Reached); its
// reader waits only until the batch that reader waits for is done (`after`: a batch numbered
// above it).
struct Signpost {
  std::string path;
  uint64_t serial = 0;
  uint32_t pos = 0;
  bool last = false;
  bool spare = false;
  uint64_t after = 0;
};

// A batch's question to Hooks::upcoming (Prefetcher::Upcoming).
struct UpcomingQuery {
  uint32_t ahead = 0;  // positions, shared among the streams
  bool posts = false;  // whether to pick signposts too
  // Optional: true when the file of object `id` of the plan numbered `plan` was statted lately
  // enough that this batch need not look at it (it is left out of the paths and counted in
  // skipped). Called with the plan's lock held: cheap, and takes no lock.
  std::function<bool(uint64_t plan, uint32_t id)> skip;
};

// Hooks::upcoming's answer.
struct UpcomingFiles {
  uint64_t plan = 0;               // the plan whose object ids `ids` are (0: none)
  std::vector<std::string> paths;  // the file of each position neither done nor skipped
  std::vector<uint32_t> ids;       // paths[i]'s object id in that plan
  size_t skipped = 0;              // positions left out by skip
  std::vector<Signpost> posts;     // with UpcomingQuery::posts (positions skipped or not)
};

struct StatAheadOptions {
  uint32_t ahead = 256;                      // positions of each stream statted ahead
  uint32_t max_reach = 2048;                 // positions a batch asks for at most (>= ahead)
  std::chrono::milliseconds max_age{1'000};  // oldest stat Recent answers with
  // Records kept at most. Kept past their stretch, a record serves every read of its file
  // until it is max_age / 2 old: a dataset read in less than that per epoch is statted once
  // for several epochs, not once per read.
  size_t capacity = 32768;
  bool check_all = false;                     // stat paths of directories not watched too
  std::chrono::milliseconds idle_refresh{0};  // a batch at least this often; 0: only on reads
};

class StatAhead {
 public:
  struct Hooks {
    // Fills *files with the paths (dataset relative) of the files the plan reads at its
    // streams' next `ahead` positions (shared among them: Prefetcher::Upcoming) but those
    // query.skip vouches for, and with the signposts among all of them when query.posts.
    // Called on StatAhead's thread.
    std::function<void(const UpcomingQuery& query, UpcomingFiles* files)> upcoming;
    // Whether every change made on this node to the names in directory dir ("" the root) is
    // reported to Forget from now on.
    std::function<bool(const std::string& dir)> watched;
    // Whether every change reported so far has been passed to Forget / ForgetAll.
    std::function<bool()> quiet;
    // Optional. Every batch's results: (*st)[i] and (*status)[i] for paths[i]. Called on
    // StatAhead's thread, without its lock, after the batch's records were stored.
    std::function<void(const std::vector<std::string>& paths, const std::vector<struct stat>& st,
                       const std::vector<Status>& status)>
        checked;
    // Optional: signposts are picked only with it. Makes the kernel drop the cached attributes
    // of the file at path (not its pages), if it holds the file; true if it did. Called on
    // StatAhead's thread without its lock; must not wait for a request of the mount.
    std::function<bool(const std::string& path)> post;
    // A reader reached post: moves the stretch of its stream there (Prefetcher::Sighted); false
    // if the post is stale (the stream replaced or past it). Called without StatAhead's lock.
    std::function<bool(const Signpost& post)> sighted;
  };

  // backing and counters must outlive this. The thread starts in Start().
  StatAhead(const Backing& backing, Hooks hooks, StatAheadOptions options,
            Stats::StatAhead& counters);
  ~StatAhead();  // Stop()
  StatAhead(const StatAhead&) = delete;
  StatAhead& operator=(const StatAhead&) = delete;

  void Start();
  // Ends the thread; it returns within the store deadline of a batch. Idempotent.
  void Stop();

  // A stat of path the rules above let stand for one made now: true with it in *st; else
  // false. count: a read's question, counted in used / missed (a lookup's is counted by its
  // caller).
  bool Recent(const std::string& path, struct stat* st, bool count = true);
  // A change of path was reported: its record and its directory's are dropped (the
  // directory's attributes change with its names), and so is the batch running now.
  void Forget(const std::string& path);
  // Reports were lost, or a directory's names changed wholesale: every record is dropped.
  void ForgetAll();
  // A reader consumed a planned position: may wake the thread (see above). Lock-free unless it
  // wakes it.
  void Consumed();
  // The kernel asked for the attributes of the file at path: if it is an armed signpost, its
  // stream's stretch moves there and a batch is woken; the caller waits (at most kWaitAges x
  // max_age) for a batch begun after this call when the post was in its stretch's last quarter.
  // True if path was a signpost. Lock-free while none is armed.
  bool Reached(const std::string& path);
  static constexpr int kWaitAges = 4;    // a reader at a post waits at most this many max_age
  static constexpr size_t kSpares = 16;  // spares armed per wait, the next past the post
  // Whether a signpost is armed (Reached would look path up). Lock-free.
  bool Armed() const { return armed_.load(std::memory_order_relaxed) > 0; }

  size_t size() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Record {
    struct stat st;
    Clock::time_point at;  // when its batch began (the stat was made after)
    bool vouched;          // its directory was watched before the stat: Recent may use it
  };
  static constexpr uint64_t kMinReads = 8;   // reads between two batches, at least
  static constexpr size_t kMaxPosts = 4096;  // armed signposts kept at most
  void Loop();
  void Batch();
  // The stamp of time t in seen_ (never 0), and whether a stamp is of a batch that began after
  // `after` (rounded so that it never says so wrongly).
  uint32_t Stamp(Clock::time_point t) const;
  bool StampedAfter(uint32_t stamp, Clock::time_point after) const;
  // seen_[id] = Stamp(at) (the batch thread only). See: the same for ids[i], if there is one
  // and `at` is not before seen_base_ (a record older than the stamps' base is not marked).
  void Mark(uint32_t id, Clock::time_point at);
  void See(const std::vector<uint32_t>& ids, size_t i, Clock::time_point at);
  void Insert(const std::string& path, const struct stat& st, Clock::time_point at, bool vouched);
  // Arms posts whose path has none armed: each is in posts_ before Hooks::post drops its
  // file's attributes (so the reader that drop sends finds it), and is taken back out if the
  // kernel holds no attributes of the file. Counts the armed. Called without mu_.
  void Arm(std::vector<Signpost> posts);

  const Backing& backing_;
  const Hooks hooks_;
  const StatAheadOptions options_;
  Stats::StatAhead& counters_;

  std::atomic<uint64_t> consumed_{0};
  std::atomic<uint64_t> wake_at_{0};       // consumed_ count that wakes the thread
  std::atomic<int64_t> refresh_at_ns_{0};  // steady clock time that lets a read wake it
  std::atomic<bool> running_{false};
  std::atomic<size_t> armed_{0};  // posts_.size()
  std::atomic<uint32_t> reach_;   // positions the next batch asks upcoming for (>= ahead)

  // Lock order: a leaf. Guards everything below.
  mutable std::mutex mu_;
  std::condition_variable cv_;       // poked_ or stop_
  std::condition_variable done_cv_;  // batches_done_ or stop_
  bool poked_ = false;
  bool stop_ = false;
  uint64_t forgets_ = 0;  // Forget and ForgetAll calls: a batch spanning one is dropped
  uint64_t batches_begun_ = 0;
  uint64_t batches_done_ = 0;                        // the number of the last batch finished
  std::unordered_map<std::string, Signpost> posts_;  // armed, by path: the last batch's
  // The spares of each stream's last stretch (by serial), armed when a reader waits.
  std::unordered_map<uint64_t, std::vector<Signpost>> spares_;
  std::unordered_map<std::string, Record> records_;
  uint64_t evictions_ = 0;  // Insert's drops for room: a record seen_ vouches for may be gone

  // The batch thread's own, no lock: which planned files have a vouched record, so that a
  // batch walks its stretch without looking up (and Hooks::upcoming without copying) the path
  // of every position. seen_[id]: the Stamp of the batch that recorded object id's file of
  // plan seen_plan_ (0: none). Cleared at a batch that finds a Forget, ForgetAll or eviction
  // made since the last (their records may be gone), at a new plan, and before the stamps
  // wrap. Four bytes per planned object.
  uint64_t seen_plan_ = 0;
  uint64_t seen_forgets_ = 0;
  uint64_t seen_evictions_ = 0;
  Clock::time_point seen_base_;  // stamps count centiseconds from here
  std::vector<uint32_t> seen_;
  std::thread thread_;
};

}  // namespace clairfs
