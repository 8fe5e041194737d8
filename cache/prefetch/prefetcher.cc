#include "cache/prefetch/prefetcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "cache/plan/kept_copies.h"
#include "cache/plan/merge.h"
#include "cache/plan/place.h"

namespace clairfs {

using Clock = std::chrono::steady_clock;

namespace {

PlacementLimits LimitsOf(const std::vector<Tier*>& tiers, const PrefetchOptions& o) {
  PlacementLimits limits;
  for (Tier* t : tiers) {
    limits.tier_names.push_back(t->name());
    limits.tier_capacity.push_back(t->capacity());
  }
  limits.staging_capacity = o.staging_capacity;
  bool volatile_above = false;
  for (size_t t = 0; o.keep_copies && t < tiers.size(); ++t) {
    if (!tiers[t]->persistent()) {
      volatile_above = true;
    } else if (volatile_above) {
      limits.keep_tier = static_cast<uint8_t>(t);
      break;
    }
  }
  return limits;
}

// The window's capacity at start: the configured one, or with tuning the tuner's start (at least
// the largest object: a chunk).
uint64_t StartCapacity(const PrefetchOptions& o) {
  if (!o.tune_staging_capacity) return o.staging_capacity;
  const uint64_t chunk = std::max(o.chunk_size, o.record_chunk_size);
  return std::min(o.staging_capacity, std::max(o.tune_start_capacity, chunk));
}

TunerLimits TunerLimitsOf(const PrefetchOptions& o) {
  TunerLimits l;
  // A start of 0 threads is no staging at all (tests that want only demand fetches).
  l.tune_threads = o.tune_staging_threads && o.staging_threads > 0;
  l.tune_capacity = o.tune_staging_capacity;
  l.min_threads = o.tune_min_threads;
  l.max_threads = o.tune_max_threads;
  l.min_capacity = StartCapacity(o);
  l.max_capacity = o.staging_capacity;
  return l;
}

}  // namespace

Prefetcher::Prefetcher(const Backing& backing, std::vector<Tier*> tiers, PrefetchOptions options,
                       Stats* stats)
    : options_(std::move(options)),
      limits_(LimitsOf(tiers, options_)),
      stats_(stats),
      tiers_(std::move(tiers)),
      fetcher_(backing, tiers_, stats),
      pool_(fetcher_, options_.fetch_timeout, stats),
      keeper_(tiers_, stats, options_.fetch_timeout),
      window_(StartCapacity(options_)),
      watch_(options_.watch),
      tier_next_(tiers_.size(), 0) {}

Prefetcher::~Prefetcher() { Stop(); }

void Prefetcher::SetCluster(ClusterHooks hooks) {
  cluster_ = std::move(hooks);
  fetcher_.SetCluster(cluster_);
}

void Prefetcher::Start() {
  std::lock_guard lock(mu_);
  if (started_ || stop_) return;
  started_ = true;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    int n =
        t < options_.tier_threads.size() ? options_.tier_threads[t] : PrefetchOptions::kTierThreads;
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, t] { TierLoop(t); });
  }
  const Autotuner tuner(TunerLimitsOf(options_), options_.staging_threads, window_.capacity());
  staging_target_ = tuner.target().threads;
  tuner_state_ = tuner.target().state;
  const int staging = tuner.limits().tune_threads
                          ? std::max(staging_target_, tuner.limits().max_threads)
                          : options_.staging_threads;
  for (int i = 0; i < staging; ++i) threads_.emplace_back([this, i] { StagingLoop(i); });
  if (tuner_state_ != TunerState::kStatic) threads_.emplace_back([this] { TuneLoop(); });
  if (options_.stream_idle.count() > 0) threads_.emplace_back([this] { ReapLoop(); });
  pool_.Start(options_.demand_threads);
  if (limits_.keep_tier != kNotKept) keeper_.Start();
}

void Prefetcher::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  tier_cv_.notify_all();
  staging_cv_.notify_all();
  park_cv_.notify_all();
  reap_cv_.notify_all();
  tune_cv_.notify_all();
  // Finishes the flights of the queued demand fetches before anything is joined: prefetch
  // threads may wait on them (and would otherwise wait until their deadline).
  pool_.Stop();
  for (auto& th : threads) th.join();
  // No fill queues a copy any more: what the faster tiers got last is written until the
  // drain deadline, so that the next mount finds it.
  keeper_.Stop(Clock::now() + options_.keep_drain);
}

Result<std::shared_ptr<const Plan>> Prefetcher::Update(const PlanChange& change) {
  std::lock_guard install(install_mu_);
  auto next = change(plan().get());
  if (!next.ok()) return next.status();
  if (!next.value()) return plan();
  std::shared_ptr<const Plan> placed = next.value();
  InstallLocked(std::move(next.value()), false);
  return placed;
}

void Prefetcher::Install(std::shared_ptr<Plan> plan) {
  (void)Update([&](const Plan*) -> Result<std::shared_ptr<Plan>> { return std::move(plan); });
}

void Prefetcher::Replan() {
  std::lock_guard install(install_mu_);
  std::shared_ptr<Plan> copy;
  {
    std::lock_guard lock(mu_);
    if (!plan_ || stop_) return;
    copy = plan_->Clone();
  }
  InstallLocked(std::move(copy), true);
}

void Prefetcher::InstallLocked(std::shared_ptr<Plan> plan, bool replan) {
  bool ready = true;
  if (cluster_.place) {
    for (PlanObject& o : plan->objects) {
      o.held = false;
      for (size_t t = 0; t < tiers_.size() && !o.held; ++t)
        o.held = tiers_.Contains(t, o.key, o.version);
    }
    ready = cluster_.place(*plan, limits_, replan);
  } else {
    PlaceObjects(*plan, limits_);
  }
  PlaceKeptCopies(*plan, limits_);  // in the room the placement left
  std::shared_ptr<const Plan> placed = std::move(plan);
  // From here on every store is checked against the new placement (or refused while it is
  // pending), and what it does not assign is evicted: nothing working from the old plan can
  // put an object back afterwards.
  if (ready) {
    tiers_.SetPlacement(placed);
  } else {
    tiers_.Suspend();
  }
  {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    std::vector<Consumption> consumption;
    std::vector<Clock::time_point> active;
    std::vector<uint32_t> sighted;
    consumption.reserve(placed->streams.size());
    const PlanStream* fresh = nullptr;  // the first stream not followed before
    for (const PlanStream& s : placed->streams) {
      int old = -1;
      for (size_t j = 0; plan_ && j < plan_->streams.size(); ++j) {
        if (plan_->streams[j].name == s.name && plan_->streams[j].serial == s.serial) old = int(j);
      }
      if (old >= 0) {
        consumption.push_back(std::move(consumption_[old]));
        active.push_back(active_[old]);
        sighted.push_back(sighted_[old]);
      } else {
        consumption.emplace_back(options_.consumption_lag);
        active.push_back(now);
        sighted.push_back(0);
        if (!fresh) fresh = &s;
      }
      consumption.back().Reset(s, placed->objects.size(), old >= 0);
    }
    if (!replan && !placed->streams.empty()) {
      const PlanStream& first = fresh ? *fresh : placed->streams.front();
      watch_.PlanInstalled(
          fresh != nullptr,
          first.sequence.size() ? placed->objects[first.sequence[0]].path() : std::string_view(),
          now);
    }
    consumption_ = std::move(consumption);
    active_ = std::move(active);
    sighted_ = std::move(sighted);
    window_.Reset(*placed, consumption_);
    ++generation_;
    hold_ = !ready;
    std::fill(tier_next_.begin(), tier_next_.end(), 0);
    plan_ = std::move(placed);
  }
  tier_cv_.notify_all();
  staging_cv_.notify_all();
}

void Prefetcher::ReapLoop() {
  const auto idle = options_.stream_idle;
  const auto period = std::clamp<std::chrono::milliseconds>(idle / 4, std::chrono::milliseconds(50),
                                                            std::chrono::milliseconds(1000));
  for (;;) {
    std::vector<std::string> idle_streams;
    {
      std::unique_lock lock(mu_);
      reap_cv_.wait_for(lock, period, [&] { return stop_; });
      if (stop_) return;
      const auto now = Clock::now();
      for (size_t s = 0; plan_ && s < plan_->streams.size(); ++s) {
        if (now - active_[s] >= idle) idle_streams.push_back(plan_->streams[s].name);
      }
    }
    if (idle_streams.empty()) continue;
    (void)Update([&](const Plan* current) -> Result<std::shared_ptr<Plan>> {
      if (!current) return std::shared_ptr<Plan>();
      std::shared_ptr<Plan> next;
      for (const std::string& name : idle_streams) {
        // Checked again under the install lock: a registration may have renewed it meanwhile.
        {
          std::lock_guard lock(mu_);
          const int s = plan_ ? plan_->FindStream(name) : -1;
          if (s < 0 || Clock::now() - active_[s] < idle) continue;
        }
        auto without = RemoveStream(next ? *next : *current, name);
        if (without) {
          spdlog::info("stream '{}' removed: no read or registration for {:.1f} s", name,
                       std::chrono::duration<double>(idle).count());
          next = std::move(without);
        }
      }
      return next;
    });
  }
}

std::shared_ptr<const Plan> Prefetcher::plan() const {
  std::lock_guard lock(mu_);
  return plan_;
}

PrefetchProgress Prefetcher::progress() const {
  std::lock_guard lock(mu_);
  PrefetchProgress p;
  p.warnings = watch_.Active();
  // The window's settings, also before the first plan.
  p.staging_capacity = window_.capacity();
  p.staging_threads = staging_target_;
  p.tuner_state = tuner_state_;
  if (!plan_) return p;
  p.planned_files = plan_->files();
  p.planned_objects = plan_->objects.size();
  p.positions = plan_->positions();
  p.entries = plan_->entries();
  p.staging_bytes = window_.bytes();
  p.staging_ready_bytes = window_.ready_bytes();
  p.epoch = plan_->streams.empty() ? 0 : UINT64_MAX;
  const auto now = Clock::now();
  for (size_t i = 0; i < plan_->streams.size(); ++i) {
    const PlanStream& s = plan_->streams[i];
    const Consumption& c = consumption_[i];
    StreamProgress sp;
    sp.name = s.name;
    sp.epoch = c.epoch();
    sp.epochs = s.epochs();
    sp.position = c.low();
    sp.positions = s.sequence.size();
    sp.entries = s.entries;
    sp.given_up = c.given_up();
    sp.staging_cursor = window_.cursor(i);
    sp.idle_seconds = std::chrono::duration<double>(now - active_[i]).count();
    p.epoch = std::min(p.epoch, sp.epoch);
    p.position += sp.position;
    p.given_up += sp.given_up;
    p.streams.push_back(std::move(sp));
  }
  return p;
}

void Prefetcher::Stale(std::string_view key) {
  stats_->errors.stale.fetch_add(1, std::memory_order_relaxed);
  if (uint64_t more = 0; stale_log_.Allow(&more)) {
    spdlog::warn(
        "{} changed since the plan was made (size, mtime, ctime or inode number): read "
        "from the backing store, never from a cached copy; register the plan again to "
        "cache the new version{}",
        DisplayKey(key), more ? fmt::format(" ({} more since the last line)", more) : "");
  }
}

void Prefetcher::Watch(const ReadWatch::Read& read) {
  if (auto warning = watch_.Observe(read, Clock::now())) spdlog::warn("{}", *warning);
}

bool Prefetcher::StoreInTier(size_t t, const std::string& key, const BlobPtr& blob,
                             const FetchSource& source) {
  std::optional<size_t> from;
  if (source.kind == FetchSource::Kind::kTier) from = source.tier;
  uint8_t keep = kNotKept;
  Status s = tiers_.Store(t, key, blob, from, Deadline(), &keep);
  if (s.code() == Code::kNoSpace) {
    stats_->errors.tier_full.fetch_add(1, std::memory_order_relaxed);
    if (uint64_t more = 0; full_log_.Allow(&more)) {
      spdlog::warn(
          "tier {} is full: {} not stored there ({}); it is read from slower "
          "sources{}",
          tiers_.tier(t).name(), DisplayKey(key), s.message(),
          more ? fmt::format(" ({} more since the last line)", more) : "");
    }
  }
  if (s.ok() && keep != kNotKept && from != keep) keeper_.Enqueue(key, blob->version(), keep);
  return s.ok();
}

void Prefetcher::TierLoop(size_t t) {
  for (;;) {
    std::string key;
    FileVersion version;
    uint8_t keep;
    {
      std::unique_lock lock(mu_);
      tier_cv_.wait(lock, [&] {
        return stop_ || (plan_ && !hold_ && tier_next_[t] < plan_->tier_order[t].size());
      });
      if (stop_) return;
      const PlanObject& o = plan_->objects[plan_->tier_order[t][tier_next_[t]++]];
      key = o.key;
      version = o.version;
      keep = o.kept_in;
    }
    if (tiers_.Contains(t, key, version)) {
      // Held since an earlier plan that did not keep a copy: this one does.
      if (keep != kNotKept && !tiers_.Contains(keep, key, version)) {
        keeper_.Enqueue(key, version, keep);
      }
      if (cluster_.held) cluster_.held(key, version);
      continue;
    }
    FetchSource source;
    auto r = pool_.Fetch(key, version, t, &source);
    if (!r.ok() || r.value()->version() != version) continue;
    // Another pass (a placement made again while this one fetched) joined the same flight and
    // stored it already: counted once.
    if (tiers_.Contains(t, key, version)) continue;
    // Refused when the plan changed meanwhile and no longer gives key to this tier.
    if (!StoreInTier(t, key, r.value(), source)) continue;
    stats_->tier_fetched[t].fetch_add(1, std::memory_order_relaxed);
    if (source.kind == FetchSource::Kind::kTier) {
      stats_->tier_promoted[t].fetch_add(1, std::memory_order_relaxed);
    }
    stats_->fetched_objects.fetch_add(1, std::memory_order_relaxed);
    if (cluster_.held) cluster_.held(key, version);
  }
}

void Prefetcher::TuneLoop() {
  Autotuner tuner(TunerLimitsOf(options_), options_.staging_threads, StartCapacity(options_));
  auto last = Clock::now();
  uint64_t fetched0 = staging_fetched_bytes_.load(std::memory_order_relaxed);
  uint64_t stall0 = stats_->stall_ns.load(std::memory_order_relaxed);
  for (;;) {
    TunerSample sample;
    {
      std::unique_lock lock(mu_);
      if (tune_cv_.wait_for(lock, options_.tune_period, [&] { return stop_; })) return;
      sample.ready_bytes = window_.ready_bytes();
      sample.full = staging_full_;
      sample.active = staging_full_ || window_.bytes() > 0;
      staging_full_ = false;
    }
    const auto now = Clock::now();
    const uint64_t fetched = staging_fetched_bytes_.load(std::memory_order_relaxed);
    const uint64_t stall = stats_->stall_ns.load(std::memory_order_relaxed);
    sample.elapsed = now - last;
    sample.fetched_bytes = fetched - fetched0;
    sample.stall_ns = stall - stall0;
    sample.active = sample.active || sample.fetched_bytes > 0;
    last = now;
    fetched0 = fetched;
    stall0 = stall;
    const TunerTarget before = tuner.target();
    const TunerTarget t = tuner.Observe(sample);
    if (t == before) continue;
    {
      std::lock_guard lock(mu_);
      window_.Grow(t.capacity);
      staging_target_ = t.threads;
      tuner_state_ = t.state;
    }
    park_cv_.notify_all();     // parked threads to run
    staging_cv_.notify_all();  // room to fill
    if (t.threads != before.threads || t.capacity != before.capacity) {
      spdlog::debug("staging tuner: {} threads, {} MiB window ({})", t.threads, t.capacity >> 20,
                    TunerStateName(t.state));
    }
  }
}

void Prefetcher::StagingLoop(int index) {
  for (;;) {
    StagingWindow::Job job;
    FlightPtr flight;
    bool leader = false;
    uint64_t gen;
    {
      std::unique_lock lock(mu_);
      for (;;) {
        if (stop_) return;
        if (index >= staging_target_) {  // parked by the tuner
          park_cv_.wait(lock);
          continue;
        }
        auto step = StagingWindow::Step::kIdle;
        if (plan_ && !hold_) {
          step = window_.Next(*plan_, consumption_, cluster_.peer, &job);
        }
        if (step == StagingWindow::Step::kFetch) break;
        if (step == StagingWindow::Step::kFull) staging_full_ = true;
        if (step == StagingWindow::Step::kMore) {  // a long walk: let readers take the lock
          lock.unlock();
          std::this_thread::yield();
          lock.lock();
          continue;
        }
        if (step == StagingWindow::Step::kAwaitPeer) {
          staging_cv_.wait_for(lock, std::chrono::milliseconds(10));  // announcements are polled
        } else {
          staging_cv_.wait(lock);
        }
      }
      std::tie(flight, leader) = pool_.Join(job.key);
      window_.Attach(job.id, flight);
      gen = generation_;
    }
    FetchSource source;
    auto r = leader ? pool_.Lead(job.key, job.version, flight, std::nullopt, &source)
                    : pool_.Wait(*flight, &source, false);
    // Counted here: a reader may consume the entry (and drop it) before the lock below.
    if (leader && r.ok()) {
      staging_fetched_bytes_.fetch_add(r.value()->size(), std::memory_order_relaxed);
      stats_->fetched_objects.fetch_add(1, std::memory_order_relaxed);
      stats_->staging_fetched.fetch_add(1, std::memory_order_relaxed);
    }
    bool freed = false;
    {
      std::lock_guard lock(mu_);
      if (gen == generation_) freed = window_.Land(job.id, flight, r);
    }
    if (freed) staging_cv_.notify_all();
  }
}

void Prefetcher::Adopt(const std::string& key, BlobPtr blob) {
  size_t t;
  {
    std::lock_guard lock(mu_);
    const uint32_t id = plan_ && !hold_ ? plan_->Find(key) : kNoPos;
    if (id == kNoPos) return;
    const PlanObject& o = plan_->objects[id];
    if (!o.place.InTier() || o.version != blob->version() || o.bytes != blob->size()) return;
    t = o.place.tier;
  }
  const FileVersion version = blob->version();
  if (tiers_.Contains(t, key, version)) return;
  // Refused if a plan change took the object out of tier t meanwhile.
  if (!StoreInTier(t, key, blob, FetchSource{})) return;
  stats_->tier_fetched[t].fetch_add(1, std::memory_order_relaxed);
  stats_->peer_adopted.fetch_add(1, std::memory_order_relaxed);
  if (cluster_.held) cluster_.held(key, version);
}

Result<BlobPtr> Prefetcher::FetchForPeer(const std::string& key, const FileVersion& version) {
  size_t t;
  {
    std::lock_guard lock(mu_);
    const uint32_t id = plan_ && !hold_ ? plan_->Find(key) : kNoPos;
    if (id == kNoPos) return Status::Error(Code::kNotFound, "not in this node's plan");
    const PlanObject& o = plan_->objects[id];
    if (!o.place.InTier() || o.version != version) {
      return Status::Error(Code::kNotFound, "not held here at this version");
    }
    t = o.place.tier;
  }
  if (auto r = tiers_.Get(key, version); r.ok()) return r;
  FetchSource source;
  auto r = pool_.Demand(key, version, &source);
  if (!r.ok()) return r;
  if (r.value()->version() != version) return Status::Error(Code::kNotFound, "it changed");
  // Stored unless the fill (whose flight this may have joined) stored it meanwhile.
  if (source != FetchSource::Tier(t) && !tiers_.Contains(t, key, version) &&
      StoreInTier(t, key, r.value(), source)) {
    stats_->tier_fetched[t].fetch_add(1, std::memory_order_relaxed);
    if (cluster_.held) cluster_.held(key, version);
  }
  return r;
}

int Prefetcher::Attribute(uint32_t id) {
  int best = -1;
  uint32_t nearest = kNoPos;
  const auto later = [&](size_t s) { return best < 0 || active_[s] > active_[best]; };
  for (size_t s = 0; s < consumption_.size(); ++s) {
    const uint32_t p = consumption_[s].Locate(id, options_.consumption_lag);
    if (p == kNoPos) continue;
    const uint32_t d = p - consumption_[s].low();
    if (d < nearest || (d == nearest && later(s))) {
      nearest = d;
      best = static_cast<int>(s);
    }
  }
  if (best >= 0) return best;
  // Further ahead than readers run out of order in every stream: the stream that read last.
  for (size_t s = 0; s < consumption_.size(); ++s) {
    if (consumption_[s].Reads(id) && later(s)) best = static_cast<int>(s);
  }
  return best;
}

void Prefetcher::Upcoming(uint32_t ahead, std::vector<std::string>* paths,
                          std::vector<Signpost>* posts) const {
  std::lock_guard lock(mu_);
  if (!plan_ || hold_ || consumption_.empty()) return;
  // Shared by the streams: what matters is how long the stats last the readers, and n streams
  // each read about 1/n of the node's reads.
  const uint32_t per = std::max<uint32_t>(kMinUpcoming, ahead / consumption_.size());
  const uint32_t grid = std::max<uint32_t>(1, per / kPostsPerStretch);
  std::unordered_set<std::string_view> before;  // files read at positions not done so far
  for (size_t s = 0; s < consumption_.size() && s < plan_->streams.size(); ++s) {
    const Consumption& c = consumption_[s];
    const PlanStream& stream = plan_->streams[s];
    const PositionList& seq = stream.sequence;
    const uint32_t back = per / 4;
    const uint32_t reached = std::max(c.high(), sighted_[s]);
    const uint32_t from = std::max(c.low(), reached > back ? reached - back : 0);
    const uint64_t to = std::min<uint64_t>(seq.size(), uint64_t{from} + per);
    uint64_t next_post = (uint64_t{from} + per / 2 + grid - 1) / grid * grid;
    before.clear();
    for (uint64_t pos = from; pos < to; ++pos) {
      if (c.done(static_cast<uint32_t>(pos))) continue;
      const std::string_view path = plan_->objects[seq[pos]].path();
      paths->emplace_back(path);
      // Posts (and the set of files read before them) only when asked for: this runs under mu_.
      if (!posts || !before.insert(path).second) continue;
      const bool last = pos + per / 4 >= to;
      if (pos >= next_post) {
        posts->push_back(
            Signpost{std::string(path), stream.serial, static_cast<uint32_t>(pos), last, false});
        next_post = (pos / grid + 1) * grid;
      } else if (last) {  // a spare: armed only once a reader waits at a post of the stretch
        posts->push_back(
            Signpost{std::string(path), stream.serial, static_cast<uint32_t>(pos), true, true});
      }
    }
  }
}

bool Prefetcher::Sighted(const Signpost& post) {
  std::lock_guard lock(mu_);
  if (!plan_) return false;
  for (size_t s = 0; s < consumption_.size() && s < plan_->streams.size(); ++s) {
    if (plan_->streams[s].serial != post.serial) continue;
    if (post.pos <= sighted_[s] || post.pos < consumption_[s].high()) return false;  // passed
    sighted_[s] = post.pos;
    active_[s] = Clock::now();  // a stream the page cache serves is not idle
    return true;
  }
  return false;  // replaced
}

Result<OpenResult> Prefetcher::Open(const std::string& path, const FileVersion& version,
                                    bool consume) {
  if (consume) stats_->file_reads.fetch_add(1, std::memory_order_relaxed);
  return Serve(path, version, consume, false);  // a whole file's key is its path
}

bool Prefetcher::Plans(const std::string& path) const {
  std::lock_guard lock(mu_);
  return plan_ && (plan_->Find(path) != kNoPos || plan_->ChunkedFile(path) != nullptr);
}

Result<OpenResult> Prefetcher::ReadChunk(const std::string& path, const FileVersion& version,
                                         uint64_t offset, bool consume) {
  uint64_t chunk = 0;
  {
    std::lock_guard lock(mu_);
    const Plan::ChunkedFileInfo* info = plan_ ? plan_->ChunkedFile(path) : nullptr;
    if (info) chunk = info->chunk;
  }
  OpenResult out;
  if (chunk == 0 || offset >= version.size) return out;
  const ByteRange range = ChunkGrid(chunk).Chunk(version.size, offset / chunk);
  auto r = Serve(ObjectKey(path, range), version, consume, true);
  if (r.ok()) r.value().range = range;
  return r;
}

Result<OpenResult> Prefetcher::Serve(const std::string& key, const FileVersion& version,
                                     bool consume, bool chunk) {
  OpenResult out;
  Placement place = kDirect;
  StagingWindow::Hit staged;
  bool freed = false;
  bool consumed = false;
  {
    std::lock_guard lock(mu_);
    const uint32_t id = plan_ ? plan_->Find(key) : kNoPos;
    const Plan::ChunkedFileInfo* info =
        id == kNoPos && !chunk && plan_ ? plan_->ChunkedFile(key) : nullptr;
    if (info) {  // an open of a chunked file: its reads go chunk by chunk
      if (info->version != version) {
        Stale(key);
        return out;  // changed since planning: never serve a cached copy
      }
      out.source = OpenResult::Source::kChunked;
      out.chunk = info->chunk;
      return out;
    }
    ReadWatch::Read seen{.path = KeyPath(key),
                         .have_plan = plan_ && !plan_->streams.empty(),
                         .planned = id != kNoPos};
    if (id == kNoPos) {
      auto& unplanned = chunk ? stats_->unplanned_chunk_reads : stats_->unplanned_file_reads;
      unplanned.fetch_add(1, std::memory_order_relaxed);
      if (consume) Watch(seen);
      return out;  // kDirect
    }
    const PlanObject& o = plan_->objects[id];
    const int s = consume ? Attribute(id) : -1;
    uint32_t pos = kNoPos;
    if (s >= 0) {
      const uint32_t low = consumption_[s].low();
      pos = consumption_[s].Consume(id);
      active_[s] = Clock::now();
      seen.consumed = consumed = pos != kNoPos;
      if (seen.consumed) seen.ahead = pos - low;
    }
    if (consume) Watch(seen);
    // Taken also for a changed file, so that its counted occurrence is released.
    if (o.place.Staged()) staged = window_.Take(id, s >= 0 ? size_t(s) : 0, pos);
    if (s >= 0) freed = window_.Follow(s, consumption_[s]);
    if (o.version != version) {
      Stale(key);
      return out;  // changed since planning: never serve a cached copy
    }
    place = o.place;
  }
  if (staged.freed || freed) staging_cv_.notify_all();
  if (consumed && consumed_hook_) consumed_hook_();
  if (place == kDirect) return out;
  // Counted once per object read: a reader's further reads of the chunk it is in are not.
  auto count = [&](Stats::Counter& c) {
    if (consume) c.fetch_add(1, std::memory_order_relaxed);
  };
  if (chunk) count(stats_->chunk_reads);
  if (place.InTier()) {
    // The fastest tier holding it serves it; a copy found below its planned tier is promoted.
    size_t j = 0;
    if (auto r = tiers_.Get(key, version, std::nullopt, &j); r.ok()) {
      if (j > place.tier && StoreInTier(place.tier, key, r.value(), FetchSource::Tier(j))) {
        stats_->tier_promoted[place.tier].fetch_add(1, std::memory_order_relaxed);
      }
      count(stats_->served_tier[j]);
      out.source = OpenResult::Source::kTier;
      out.tier = j;
      out.blob = std::move(r.value());
      return out;
    }
  }
  if (staged.blob || staged.flight) {
    out.blob = std::move(staged.blob);
    if (!out.blob) {
      auto r = pool_.Wait(*staged.flight, nullptr, true);
      if (!r.ok()) return r.status();
      out.blob = std::move(r.value());
    }
    if (out.blob->version() == version) {
      count(stats_->served_staging);
      out.source = OpenResult::Source::kStaging;
      return out;
    }
  }
  FetchSource source;
  auto r = pool_.Demand(key, version, &source);
  if (!r.ok()) return r.status();
  if (r.value()->version() != version) {
    Stale(key);
    return OpenResult{};  // it changed again: read it directly
  }
  if (place.InTier() && source != FetchSource::Tier(place.tier)) {
    (void)StoreInTier(place.tier, key, r.value(), source);
  }
  out.blob = std::move(r.value());
  switch (source.kind) {
    case FetchSource::Kind::kPeer:
      count(stats_->served_peer);
      out.source = OpenResult::Source::kPeer;
      return out;
    case FetchSource::Kind::kTier:
      count(stats_->served_tier[source.tier]);
      out.source = OpenResult::Source::kTier;
      out.tier = source.tier;
      return out;
    case FetchSource::Kind::kBacking:
      break;
  }
  stats_->served_backing.fetch_add(1, std::memory_order_relaxed);
  out.source = OpenResult::Source::kBacking;
  return out;
}

}  // namespace clairfs
