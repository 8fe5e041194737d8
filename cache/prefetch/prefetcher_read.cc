// The Prefetcher's read path (cache/prefetch/prefetcher.h): a reader's open of a file or first
// read of a chunk, answered from the fastest place holding the object (Serve); which stream a
// read counts for (Attribute); the stretch of files the readers reach next (Upcoming, Sighted).
// The fill threads are in prefetcher_fill.cc, publishing plans in prefetcher.cc.

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "cache/base/log.h"
#include "cache/prefetch/prefetcher.h"

namespace clairfs {

using Clock = std::chrono::steady_clock;

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

void Prefetcher::Watch(const ReadWatch::Read& read) {
  if (auto warning = watch_.Observe(read, Clock::now())) LogWarn("{}", *warning);
}

void Prefetcher::Upcoming(const UpcomingQuery& query, UpcomingFiles* files) const {
  std::lock_guard lock(mu_);
  if (!plan_ || hold_ || consumption_.empty()) return;
  files->plan = generation_;  // bumped with every plan published
  std::vector<Signpost>* posts = query.posts ? &files->posts : nullptr;
  // Shared by the streams: what matters is how long the stats last the readers, and n streams
  // each read about 1/n of the node's reads.
  const uint32_t per = std::max<uint32_t>(kMinUpcoming, query.ahead / consumption_.size());
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
      const uint32_t id = seq[pos];
      const std::string_view path = plan_->objects[id].path();
      if (query.skip && query.skip(generation_, id)) {
        ++files->skipped;
      } else {
        files->paths.emplace_back(path);
        files->ids.push_back(id);
      }
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

Prefetcher::Claim Prefetcher::ClaimRead(const std::string& key, const FileVersion& version,
                                        bool consume, bool chunk) {
  Claim c;
  std::lock_guard lock(mu_);
  const uint32_t id = plan_ ? plan_->Find(key) : kNoPos;
  const Plan::ChunkedFileInfo* info =
      id == kNoPos && !chunk && plan_ ? plan_->ChunkedFile(key) : nullptr;
  if (info) {  // an open of a chunked file: its reads go chunk by chunk
    c.answer.emplace();
    if (info->version != version) {
      Stale(key);
      return c;  // changed since planning: never serve a cached copy
    }
    c.answer->source = OpenResult::Source::kChunked;
    c.answer->chunk = info->chunk;
    return c;
  }
  ReadWatch::Read seen{
      .path = KeyPath(key), .have_plan = plan_ && !plan_->streams.empty(), .planned = id != kNoPos};
  if (id == kNoPos) {
    auto& unplanned = chunk ? stats_->unplanned_chunk_reads : stats_->unplanned_file_reads;
    unplanned.fetch_add(1, std::memory_order_relaxed);
    if (consume) Watch(seen);
    c.answer.emplace();  // kDirect
    return c;
  }
  const PlanObject& o = plan_->objects[id];
  const int s = consume ? Attribute(id) : -1;
  uint32_t pos = kNoPos;
  if (s >= 0) {
    const uint32_t low = consumption_[s].low();
    pos = consumption_[s].Consume(id);
    active_[s] = Clock::now();
    seen.consumed = c.consumed = pos != kNoPos;
    if (seen.consumed) seen.ahead = pos - low;
  }
  if (consume) Watch(seen);
  // Taken also for a changed file, so that its counted occurrence is released.
  if (o.place.Staged()) c.staged = window_.Take(id, s >= 0 ? size_t(s) : 0, pos);
  if (s >= 0) c.freed = window_.Follow(s, consumption_[s]);
  if (o.version != version) {
    Stale(key);
    c.answer.emplace();
    return c;  // changed since planning: never serve a cached copy
  }
  c.place = o.place;
  if (c.place == kDirect) c.answer.emplace();
  return c;
}

bool Prefetcher::FromTier(const std::string& key, const FileVersion& version, Placement place,
                          bool consume, OpenResult* out) {
  // The fastest tier holding it serves it; a copy found below its planned tier is promoted.
  size_t j = 0;
  auto r = tiers_.Get(key, version, std::nullopt, &j);
  if (!r.ok()) return false;
  if (j > place.tier && StoreInTier(place.tier, key, r.value(), FetchSource::Tier(j))) {
    stats_->tier_promoted[place.tier].fetch_add(1, std::memory_order_relaxed);
  }
  if (consume) stats_->served_tier[j].fetch_add(1, std::memory_order_relaxed);
  out->source = OpenResult::Source::kTier;
  out->tier = j;
  out->blob = std::move(r.value());
  return true;
}

Result<OpenResult> Prefetcher::OnDemand(const std::string& key, const FileVersion& version,
                                        Placement place, bool consume) {
  OpenResult out;
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
  const auto count = [consume](Stats::Counter& c) {
    if (consume) c.fetch_add(1, std::memory_order_relaxed);
  };
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

Result<OpenResult> Prefetcher::Serve(const std::string& key, const FileVersion& version,
                                     bool consume, bool chunk) {
  Claim claim = ClaimRead(key, version, consume, chunk);
  if (claim.staged.freed || claim.freed) staging_cv_.notify_all();
  if (claim.consumed && consumed_hook_) consumed_hook_();
  if (claim.answer) return std::move(*claim.answer);
  // Counted once per object read: a reader's further reads of the chunk it is in are not.
  if (chunk && consume) stats_->chunk_reads.fetch_add(1, std::memory_order_relaxed);
  OpenResult out;
  if (claim.place.InTier() && FromTier(key, version, claim.place, consume, &out)) return out;
  if (claim.staged.blob || claim.staged.flight) {
    out.blob = std::move(claim.staged.blob);
    if (!out.blob) {
      auto r = pool_.Wait(*claim.staged.flight, nullptr, true);
      if (!r.ok()) return r.status();
      out.blob = std::move(r.value());
    }
    if (out.blob->version() == version) {
      if (consume) stats_->served_staging.fetch_add(1, std::memory_order_relaxed);
      out.source = OpenResult::Source::kStaging;
      return out;
    }
  }
  return OnDemand(key, version, claim.place, consume);
}

}  // namespace clairfs
