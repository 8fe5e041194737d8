#include "cache/backing/stat_ahead.h"

#include <algorithm>
#include <utility>

namespace clairfs {
namespace {

int64_t Ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string_view DirOf(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

}  // namespace

StatAhead::StatAhead(const Backing& backing, Hooks hooks, StatAheadOptions options,
                     Stats::StatAhead& counters)
    : backing_(backing),
      hooks_(std::move(hooks)),
      options_(options),
      counters_(counters),
      reach_(options.ahead),
      seen_base_(Clock::now()) {}

StatAhead::~StatAhead() { Stop(); }

void StatAhead::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Loop(); });
  running_.store(true, std::memory_order_release);
}

void StatAhead::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  running_.store(false, std::memory_order_release);
  cv_.notify_all();
  done_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool StatAhead::Recent(const std::string& path, struct stat* st, bool count) {
  if (!running_.load(std::memory_order_acquire)) return false;
  // Quiet first: from then on every change made before this call has been forgotten.
  if (!hooks_.quiet()) {
    if (count) counters_.missed.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const auto now = Clock::now();
  {
    std::lock_guard lock(mu_);
    auto it = records_.find(path);
    if (it != records_.end() && it->second.vouched && now - it->second.at <= options_.max_age) {
      *st = it->second.st;
      if (count) counters_.used.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  if (count) counters_.missed.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void StatAhead::Forget(const std::string& path) {
  std::lock_guard lock(mu_);
  ++forgets_;
  records_.erase(path);
  // A name made, removed or renamed changes its directory's own attributes (mtime, size,
  // links), which no report names.
  if (const std::string_view dir = DirOf(path); !dir.empty()) records_.erase(std::string(dir));
}

void StatAhead::ForgetAll() {
  std::lock_guard lock(mu_);
  ++forgets_;
  records_.clear();
}

void StatAhead::Consumed() {
  const uint64_t n = consumed_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n < wake_at_.load(std::memory_order_relaxed) &&
      Ns(Clock::now()) < refresh_at_ns_.load(std::memory_order_relaxed)) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (poked_) return;
    poked_ = true;
    // Nobody else wakes the thread until its next batch sets the marks again.
    wake_at_.store(UINT64_MAX, std::memory_order_relaxed);
    refresh_at_ns_.store(INT64_MAX, std::memory_order_relaxed);
  }
  cv_.notify_one();
}

bool StatAhead::Reached(const std::string& path) {
  if (!Armed()) return false;
  Signpost post;
  {
    std::lock_guard lock(mu_);
    auto it = posts_.find(path);
    if (it == posts_.end() || stop_) return false;
    post = std::move(it->second);
    posts_.erase(it);
    armed_.store(posts_.size(), std::memory_order_relaxed);
  }
  // Before the batch below asks for the upcoming paths.
  if (hooks_.sighted && !hooks_.sighted(post)) return true;
  counters_.reached.fetch_add(1, std::memory_order_relaxed);
  if (post.spare) {  // another reader waits for the batch that lets this one on: so does it
    std::unique_lock lock(mu_);
    done_cv_.wait_for(lock, kWaitAges * options_.max_age,
                      [&] { return stop_ || batches_done_ > post.after; });
    return true;
  }
  if (post.last) {
    // The reader caught up with the stretch: the next ones are longer (before the batch
    // below asks), so that a batch lasts the readers longer than it takes (at most max_reach:
    // a longer stretch is statted before readers at these rates reach it).
    const uint32_t most = std::max<uint32_t>(options_.ahead, options_.max_reach);
    const uint32_t r = reach_.load(std::memory_order_relaxed);
    reach_.store(std::min<uint32_t>(most, r * 2), std::memory_order_relaxed);
  }
  uint64_t after;
  {
    std::lock_guard lock(mu_);
    after = batches_begun_;
    poked_ = true;
  }
  cv_.notify_one();
  if (!post.last) return true;
  // The other readers of the stream are about here too: the spares of the stretch past this
  // post stop them at the next file they reach (attributes only: safe on a request's thread).
  std::vector<Signpost> spares;
  {
    std::lock_guard lock(mu_);
    auto it = spares_.find(post.serial);
    if (it != spares_.end()) {
      // The next kSpares past the post (upcoming lists them in order): enough for as many
      // readers interleaved on one stream.
      for (Signpost& p : it->second) {
        if (spares.size() >= kSpares) break;
        if (p.pos > post.pos && !posts_.count(p.path)) spares.push_back(std::move(p));
      }
      spares_.erase(it);
    }
  }
  for (Signpost& p : spares) p.after = after;
  Arm(std::move(spares));
  std::unique_lock lock(mu_);
  done_cv_.wait_for(lock, kWaitAges * options_.max_age,
                    [&] { return stop_ || batches_done_ > after; });
  return true;
}

void StatAhead::Arm(std::vector<Signpost> posts) {
  // In posts_ before the kernel drops anything: the drop makes a reader at the file ask at
  // once, and Reached must find the post then, or the reader passes it with fresh attributes.
  {
    std::lock_guard lock(mu_);
    std::erase_if(posts, [&](const Signpost& p) { return !posts_.try_emplace(p.path, p).second; });
    armed_.store(posts_.size(), std::memory_order_relaxed);
  }
  std::vector<const Signpost*> unheld;  // the kernel holds no attributes of their files
  for (const Signpost& p : posts) {
    if (!hooks_.post(p.path)) unheld.push_back(&p);
  }
  counters_.signposts.fetch_add(posts.size() - unheld.size(), std::memory_order_relaxed);
  if (unheld.empty()) return;
  std::lock_guard lock(mu_);
  for (const Signpost* p : unheld) {
    auto it = posts_.find(p->path);  // unless reached meanwhile, or replaced by a newer one
    if (it != posts_.end() && it->second.serial == p->serial && it->second.pos == p->pos) {
      posts_.erase(it);
    }
  }
  armed_.store(posts_.size(), std::memory_order_relaxed);
}

size_t StatAhead::size() const {
  std::lock_guard lock(mu_);
  return records_.size();
}

void StatAhead::Loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (options_.idle_refresh.count() > 0) {
        cv_.wait_for(lock, options_.idle_refresh, [&] { return stop_ || poked_; });
      } else {
        cv_.wait(lock, [&] { return stop_ || poked_; });
      }
      if (stop_) return;
      // A batch nobody asked for (the idle refresh): the readers are not near the end of the
      // stretch, so it may shrink back towards `ahead` (fewer stats while they pause).
      if (!poked_) {
        const uint32_t r = reach_.load(std::memory_order_relaxed);
        reach_.store(std::max(options_.ahead, r / 2), std::memory_order_relaxed);
      }
      poked_ = false;
    }
    Batch();
  }
}

void StatAhead::Batch() {
  const uint64_t consumed = consumed_.load(std::memory_order_relaxed);
  const auto begin = Clock::now();
  uint64_t forgets;  // a change reported from here on drops the batch's records
  uint64_t number;
  uint64_t evictions;
  {
    std::lock_guard lock(mu_);
    forgets = forgets_;
    evictions = evictions_;
    number = ++batches_begun_;
  }
  // What seen_ vouches for holds only while the records are there.
  if (forgets != seen_forgets_ || evictions != seen_evictions_) {
    seen_.clear();
    seen_forgets_ = forgets;
    seen_evictions_ = evictions;
  }
  if (begin - seen_base_ > std::chrono::hours(24 * 200)) {  // stamps wrap after 497 days
    seen_.clear();
    seen_base_ = begin;
  }
  // A file recorded by a batch begun less than max_age / 2 ago needs no stat yet (as below).
  const Clock::time_point young = begin - options_.max_age / 2;
  UpcomingQuery query;
  query.ahead = reach_.load(std::memory_order_relaxed);
  query.posts = static_cast<bool>(hooks_.post);
  query.skip = [&](uint64_t plan, uint32_t id) {
    return plan == seen_plan_ && id < seen_.size() && StampedAfter(seen_[id], young);
  };
  UpcomingFiles next;
  hooks_.upcoming(query, &next);
  if (next.plan != seen_plan_) {  // object ids of another plan: other files
    seen_.clear();
    seen_plan_ = next.plan;
  }
  std::vector<std::string>& upcoming = next.paths;
  std::vector<Signpost>& posts = next.posts;
  // The directories they lie in, each once (a lookup checks its parent's identity): after the
  // files, so that files[0, files) are the planned positions. A directory whose files were
  // all skipped was statted (or found young) by the batches that recorded them.
  const size_t files = upcoming.size();
  {
    std::unordered_map<std::string_view, bool> dirs;  // views into upcoming's files
    for (size_t i = 0; i < files; ++i) {
      const std::string_view dir = DirOf(upcoming[i]);
      if (!dir.empty()) dirs.try_emplace(dir, true);
    }
    std::vector<std::string> add;
    add.reserve(dirs.size());
    for (const auto& d : dirs) add.emplace_back(d.first);
    for (std::string& d : add) upcoming.push_back(std::move(d));
  }
  // Recent answers only for paths whose directory is watched from before the stat: a change
  // made before the watch began was reported to nobody. One question per directory, before the
  // stats. Paths of directories not watched are statted only for freshness (check_all).
  std::vector<bool> in_watched(upcoming.size());
  {
    std::unordered_map<std::string_view, bool> watched;  // views into upcoming, by directory
    for (size_t i = 0; i < upcoming.size(); ++i) {
      const std::string_view dir = DirOf(upcoming[i]);
      auto [it, fresh] = watched.try_emplace(dir, false);
      if (fresh) it->second = hooks_.watched(std::string(dir));
      in_watched[i] = it->second;
    }
  }
  // What to stat: a path whose record is young enough is kept, unless it is not vouched for
  // while its directory is watched now (statted again, it becomes usable). A path listed twice
  // is statted twice.
  std::vector<std::string> paths;
  std::vector<bool> vouched;
  std::vector<bool> is_file;    // a planned position's path, not one of their directories
  std::vector<uint32_t> id_of;  // a file's object id in next.plan (kNoId: a directory)
  constexpr uint32_t kNoId = UINT32_MAX;
  size_t covered = next.skipped;  // upcoming paths with a usable record after this batch
  paths.reserve(upcoming.size());
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < upcoming.size(); ++i) {
      const bool w = in_watched[i];
      auto it = records_.find(upcoming[i]);
      if (it != records_.end() && begin - it->second.at < options_.max_age / 2 &&
          (it->second.vouched || !w)) {
        covered += i < files && it->second.vouched;
        // Recorded by an earlier batch (whose stamp was lost or never made): from now on
        // skipped like the files this batch records.
        if (i < files && it->second.vouched) See(next.ids, i, it->second.at);
        continue;
      }
      if (!w && !options_.check_all) continue;
      paths.push_back(std::move(upcoming[i]));
      vouched.push_back(w);
      is_file.push_back(i < files);
      id_of.push_back(i < files && i < next.ids.size() ? next.ids[i] : kNoId);
    }
  }
  const bool statted = !paths.empty();
  std::vector<uint32_t> seen_now;  // ids of the files recorded (vouched) by this batch
  if (statted) {
    std::vector<struct stat> st;
    std::vector<Status> status;
    backing_.LstatMany(&paths, &st, &status);
    {
      std::lock_guard lock(mu_);
      if (forgets_ == forgets && !stop_) {  // else a change was reported meanwhile: dropped
        for (size_t i = 0; i < paths.size() && i < st.size() && i < status.size(); ++i) {
          if (!status[i].ok()) continue;
          if (!is_file[i]) {  // a directory's record serves lookups below it
            if (S_ISDIR(st[i].st_mode)) Insert(paths[i], st[i], begin, vouched[i]);
            continue;
          }
          if (!S_ISREG(st[i].st_mode)) continue;
          Insert(paths[i], st[i], begin, vouched[i]);
          covered += vouched[i];
          if (vouched[i] && id_of[i] != kNoId) seen_now.push_back(id_of[i]);
          counters_.stats.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
    if (hooks_.checked) hooks_.checked(paths, st, status);
  }
  // Stamped after the records went in, and only when they did (no change reported meanwhile;
  // an eviction by this batch's own inserts clears seen_ at the next).
  for (const uint32_t id : seen_now) Mark(id, begin);
  // The stretch is statted and compared: its posts are armed (a post already armed is only
  // updated: the kernel still has no attributes of its file).
  std::vector<Signpost> fresh;
  {
    std::lock_guard lock(mu_);
    if (posts_.size() + posts.size() > kMaxPosts) posts_.clear();  // never reached: stale
    spares_.clear();
    for (Signpost& p : posts) {
      if (p.spare) {
        spares_[p.serial].push_back(std::move(p));
        continue;
      }
      auto it = posts_.find(p.path);
      if (it != posts_.end()) {
        it->second = std::move(p);
      } else {
        fresh.push_back(std::move(p));
      }
    }
  }
  Arm(std::move(fresh));
  {
    std::lock_guard lock(mu_);
    batches_done_ = number;
  }
  // Counted once all of it is done (records in, posts armed), so that whoever sees the count
  // move sees what the batch did.
  if (statted) counters_.batches.fetch_add(1, std::memory_order_relaxed);
  done_cv_.notify_all();
  // The next batch: once the readers consumed half of what the records now cover, or this
  // batch is half max_age old; so sooner while few are covered (directories not watched yet:
  // the kernel looks them up as the job reaches them), but never after fewer than kMinReads.
  const uint64_t half = std::min<uint64_t>(options_.ahead / 2, covered / 2);
  wake_at_.store(consumed + std::max<uint64_t>(kMinReads, half), std::memory_order_relaxed);
  refresh_at_ns_.store(Ns(begin + options_.max_age / 2), std::memory_order_relaxed);
}

uint32_t StatAhead::Stamp(Clock::time_point t) const {
  // Centiseconds from seen_base_, plus one: 0 is "none". Batch clears seen_ long before wrap.
  const auto cs =
      std::chrono::duration_cast<std::chrono::milliseconds>(t - seen_base_).count() / 10;
  return static_cast<uint32_t>(std::max<int64_t>(0, cs) + 1);
}

bool StatAhead::StampedAfter(uint32_t stamp, Clock::time_point after) const {
  // stamp - 1 centiseconds from the base is at or before the batch's begin: later than
  // `after` only if that floor is.
  return stamp != 0 && seen_base_ + std::chrono::milliseconds(int64_t{stamp - 1} * 10) > after;
}

void StatAhead::Mark(uint32_t id, Clock::time_point at) {
  if (id >= seen_.size()) seen_.resize(size_t{id} + 1, 0);
  seen_[id] = Stamp(at);
}

void StatAhead::See(const std::vector<uint32_t>& ids, size_t i, Clock::time_point at) {
  if (i < ids.size() && at >= seen_base_) Mark(ids[i], at);
}

void StatAhead::Insert(const std::string& path, const struct stat& st, Clock::time_point at,
                       bool vouched) {
  records_.insert_or_assign(path, Record{st, at, vouched});
  if (records_.size() <= options_.capacity) return;
  ++evictions_;
  // Over capacity: the oldest go, down to three quarters of it, so that this sort of the
  // records' times runs once per capacity / 4 insertions.
  std::vector<std::pair<Clock::time_point, const std::string*>> by_age;
  by_age.reserve(records_.size());
  for (const auto& [p, r] : records_) by_age.emplace_back(r.at, &p);
  const size_t drop = records_.size() - options_.capacity * 3 / 4;
  std::nth_element(by_age.begin(), by_age.begin() + drop, by_age.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < drop; ++i) records_.erase(*by_age[i].second);
}

}  // namespace clairfs
