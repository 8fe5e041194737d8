#include "cluster/peer_tier.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "cache/base/object_key.h"

namespace clairfs::cluster {

using Clock = std::chrono::steady_clock;

namespace {
Status Miss() { return Status::Error(Code::kNotFound, "no peer holds it"); }

// "ranks 2, 5" or "rank 2", for log lines.
std::string RankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}
}  // namespace

PeerTier::PeerTier(Transport& transport, PeerOptions options, Stats* stats)
    : transport_(transport),
      options_(options),
      stats_(stats),
      rank_(transport.rank()),
      size_(transport.size()),
      digests_(transport.size()),
      catalog_sent_(transport.size()),
      down_until_(transport.size()),
      gone_(transport.size(), false),
      incompatible_(transport.size(), false),
      catalogs_(transport.size()),
      digest_error_(transport.size()) {
  transport_.CountErrorsIn(&stats_->mpi_errors);
}

PeerTier::~PeerTier() { Stop(); }

void PeerTier::Start(LocalLookup lookup, std::function<void()> replan, Adopt adopt) {
  std::lock_guard lock(mu_);
  if (started_) return;
  started_ = true;
  lookup_ = std::move(lookup);
  replan_ = std::move(replan);
  adopt_ = std::move(adopt);
  threads_.emplace_back([this] { ReceiveLoop(); });
  for (int i = 0; i < std::max(1, options_.serve_threads); ++i) {
    threads_.emplace_back([this] { ServeLoop(); });
  }
  threads_.emplace_back([this] { PlanLoop(); });
}

void PeerTier::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  Broadcast(kBye, EncodeBye());
  reply_cv_.notify_all();
  serve_cv_.notify_all();
  plan_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void PeerTier::Broadcast(int tag, const std::vector<char>& bytes) {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    {
      std::lock_guard lock(mu_);
      if (gone_[r] || incompatible_[r]) continue;
    }
    transport_.Send(r, tag, bytes);
  }
}

bool PeerTier::LiveLocked(int r, Clock::time_point now) const {
  return r != rank_ && !gone_[r] && !incompatible_[r] && down_until_[r] <= now;
}

std::vector<int> PeerTier::UnregisteredLocked() const {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && LiveLocked(r, now) && !digests_[r]) missing.push_back(r);
  }
  return missing;
}

void PeerTier::Refuse(int r, HeaderCheck check, uint16_t version) {
  stats_->peer_protocol_errors.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    if (incompatible_[r]) return;
    incompatible_[r] = true;
  }
  if (check == HeaderCheck::kOtherVersion) {
    spdlog::error(
        "peer rank {} refused: it speaks clairfs peer protocol version {}, this node (rank {}) "
        "version {}; it is treated as down. Run the same clairfs on every node.",
        r, version, rank_, kProtocolVersion);
  } else {
    spdlog::error(
        "peer rank {} refused: its messages lack the clairfs protocol magic (a clairfs older "
        "than peer protocol version {}, which this node (rank {}) speaks, or not clairfs); it "
        "is treated as down. Run the same clairfs on every node.",
        r, kProtocolVersion, rank_);
  }
  {
    std::lock_guard lock(plan_mu_);
    dirty_ = true;
  }
  plan_cv_.notify_all();
}

void PeerTier::MarkDown(int r) {
  bool was_live;
  {
    std::lock_guard lock(mu_);
    was_live = LiveLocked(r, Clock::now());
    down_until_[r] = Clock::now() + options_.down_for;
  }
  if (was_live) {  // once per episode
    spdlog::warn("peer rank {} did not answer within {:.1f} s: skipped for {:.0f} s; what it "
                 "holds is read from the backing store meanwhile",
                 r, std::chrono::duration<double>(options_.peer_timeout).count(),
                 std::chrono::duration<double>(options_.down_for).count());
  }
  {
    std::lock_guard lock(plan_mu_);
    dirty_ = true;
  }
  plan_cv_.notify_all();
}

bool PeerTier::Place(Plan& plan, const PlacementLimits& limits, bool replan) {
  std::unique_lock lock(plan_mu_);
  if (!replan || !registered_) {
    Digest mine = MakeDigest(plan, limits, rank_, ++generation_);
    SendDigestLocked(mine);
    digests_[rank_] = std::move(mine);
    registered_ = true;
    registered_at_ = Clock::now();
    said_waiting_ = false;
  }
  const std::vector<int> missing = UnregisteredLocked();
  const double timeout = std::chrono::duration<double>(options_.plan_timeout).count();
  if (!missing.empty() && Clock::now() < registered_at_ + options_.plan_timeout) {
    if (!said_waiting_) {
      spdlog::info("rank {} registered its plan; waiting up to {:.0f} s for the plans of {}",
                   rank_, timeout, RankList(missing));
      said_waiting_ = true;
    }
    placed_ = false;
    lock.unlock();
    plan_cv_.notify_all();  // the planner watches the deadline
    return false;
  }
  if (!missing.empty() && missing != said_missing_) {
    spdlog::warn("{} did not register a plan within {:.0f} s of rank {}'s: placed without them "
                 "(what they would have held is read from the backing store). Check that the "
                 "job on every rank registers its plan; a rank that does joins at the next "
                 "placement",
                 RankList(missing), timeout, rank_);
  }
  said_missing_ = missing;
  std::vector<const Digest*> present;
  {
    std::lock_guard l(mu_);
    const auto now = Clock::now();
    for (int r = 0; r < size_; ++r) {
      if (digests_[r] && (r == rank_ || LiveLocked(r, now))) present.push_back(&*digests_[r]);
    }
  }
  totals_ = PlaceCluster(present);
  local_ = ApplyPlacement(plan, limits, totals_, present, rank_);
  peer_owner_.clear();
  for (const PlanObject& o : plan.objects) {
    if (o.place == kPeer) peer_owner_.emplace(o.key, totals_.owner.find(o.key)->second);
  }
  placed_ranks_.clear();
  for (const Digest* d : present) placed_ranks_.push_back(d->rank);
  totals_.owner.clear();  // only the counts are kept for InfoJson
  placed_ = true;
  dirty_ = false;
  return true;
}

void PeerTier::SendDigestLocked(const Digest& mine) {
  const Catalog catalog = EncodeCatalog(mine);
  std::vector<char> with, without;  // encoded once each, when a rank needs that form
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    {
      std::lock_guard lock(mu_);
      if (gone_[r] || incompatible_[r]) continue;
    }
    const bool carry = catalog_sent_[r] != catalog.hash;
    std::vector<char>& bytes = carry ? with : without;
    if (bytes.empty()) bytes = EncodeDigest(mine, catalog, carry);
    transport_.Send(r, kPlan, bytes);
    plan_bytes_sent_ += bytes.size();
    catalog_sends_ += carry;
    catalog_sent_[r] = catalog.hash;
  }
}

void PeerTier::RefuseDigest(int r, const std::string& why) {
  stats_->peer_protocol_errors.fetch_add(1, std::memory_order_relaxed);
  if (digest_error_[r] != why) {  // logged once per reason until r sends a good digest
    spdlog::error("peer rank {}: plan digest refused: {}; its plan is left out of the placement",
                  r, why);
    digest_error_[r] = why;
  }
  {
    std::lock_guard lock(plan_mu_);
    if (!digests_[r]) return;
    digests_[r].reset();
    dirty_ = true;
  }
  plan_cv_.notify_all();
}

void PeerTier::Held(const std::string& path, const FileVersion& version) {
  bool flush;
  {
    std::lock_guard lock(mu_);
    announce_.emplace_back(path, version);
    flush = announce_.size() >= 1024;
  }
  if (flush) plan_cv_.notify_all();
}

void PeerTier::Fetched(const std::string& path, const BlobPtr& blob) {
  int owner;
  {
    std::lock_guard lock(plan_mu_);
    auto it = peer_owner_.find(path);
    if (it == peer_owner_.end()) return;
    owner = it->second;
  }
  {
    std::lock_guard lock(mu_);
    if (stop_ || !LiveLocked(owner, Clock::now())) return;
    auto h = holders_.find(path);
    if (h != holders_.end() && h->second.rank == owner) return;  // it has it already
  }
  transport_.Send(owner, kPush, EncodePush(path, *blob));
  stats_->peer_bytes_out.fetch_add(blob->size(), std::memory_order_relaxed);
}

void PeerTier::PlanLoop() {
  for (;;) {
    std::vector<std::pair<std::string, FileVersion>> batch;
    bool replan = false;
    {
      std::unique_lock lock(plan_mu_);
      plan_cv_.wait_for(lock, options_.announce_every);
      {
        std::lock_guard l(mu_);
        if (stop_) return;
        batch.swap(announce_);
      }
      if (registered_) {
        const bool ready =
            UnregisteredLocked().empty() || Clock::now() >= registered_at_ + options_.plan_timeout;
        replan = (!placed_ && ready) || (placed_ && dirty_);
        if (replan) dirty_ = false;
      }
    }
    if (!batch.empty()) Broadcast(kHave, EncodeHave(Have{std::move(batch)}));
    if (replan && replan_) replan_();
  }
}

void PeerTier::ReceiveLoop() {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
    }
    std::optional<Message> m = transport_.Receive(std::chrono::milliseconds(50));
    if (!m) continue;
    const std::string_view bytes(m->bytes.data(), m->bytes.size());
    const int src = m->source;
    if (src < 0 || src >= size_ || src == rank_) continue;
    if (uint16_t version = 0; CheckHeader(bytes, &version) != HeaderCheck::kOk) {
      Refuse(src, CheckHeader(bytes, &version), version);
      continue;
    }
    {
      std::lock_guard lock(mu_);
      if (incompatible_[src]) continue;  // one good-looking message does not make it fit
    }
    switch (m->tag) {
      case kRequest:
      case kPush: {
        std::lock_guard lock(mu_);
        requests_.push_back(std::move(*m));
        serve_cv_.notify_one();
        break;
      }
      case kReply: {
        const char* data;
        size_t n;
        auto h = DecodeReply(bytes, &data, &n);
        if (!h) break;
        std::lock_guard lock(mu_);
        auto it = pending_.find(h->id);
        if (it == pending_.end()) break;  // its reader gave up
        it->second->reply = std::move(m->bytes);
        it->second->done = true;
        reply_cv_.notify_all();
        break;
      }
      case kHave: {
        auto have = DecodeHave(bytes);
        if (!have) break;
        std::lock_guard lock(mu_);
        for (auto& [path, version] : have->files) {
          auto [it, fresh] = holders_.try_emplace(std::move(path), Holder{src, version});
          if (!fresh) holder_bytes_ -= ObjectBytes(it->first, it->second.version);
          it->second = Holder{src, version};
          holder_bytes_ += ObjectBytes(it->first, version);
        }
        break;
      }
      case kPlan: {
        std::string why;
        auto d = DecodeDigest(bytes, &catalogs_[src], &why);
        if (d && d->rank != src) why = "it names rank " + std::to_string(d->rank);
        if (!why.empty()) {
          RefuseDigest(src, why);
          break;
        }
        digest_error_[src].clear();
        {
          std::lock_guard lock(plan_mu_);
          if (digests_[src] && digests_[src]->generation >= d->generation) break;
          digests_[src] = std::move(*d);
          dirty_ = true;
        }
        {
          std::lock_guard lock(mu_);
          gone_[src] = false;  // a rank that registers is back
          down_until_[src] = {};
        }
        plan_cv_.notify_all();
        break;
      }
      case kBye: {
        {
          std::lock_guard lock(mu_);
          gone_[src] = true;
        }
        {
          std::lock_guard lock(plan_mu_);
          dirty_ = true;
        }
        plan_cv_.notify_all();
        break;
      }
      default:
        break;
    }
  }
}

void PeerTier::ServeLoop() {
  for (;;) {
    Message m;
    {
      std::unique_lock lock(mu_);
      serve_cv_.wait(lock, [&] { return stop_ || !requests_.empty(); });
      if (stop_) return;
      m = std::move(requests_.front());
      requests_.pop_front();
    }
    const std::string_view bytes(m.bytes.data(), m.bytes.size());
    if (m.tag == kPush) {
      ReplyHeader h;
      const char* data;
      size_t n;
      auto path = DecodePush(bytes, &h, &data, &n);
      if (!path) continue;
      stats_->peer_bytes_in.fetch_add(n, std::memory_order_relaxed);
      auto blob = Blob::Allocate(n, h.version);
      std::memcpy(blob->mutable_data(), data, n);
      blob->Seal();
      if (n != ObjectBytes(*path, h.version) || blob->hash() != h.hash) {
        Damaged(m.source, *path);
        continue;
      }
      if (adopt_) adopt_(*path, std::move(blob));
      continue;
    }
    auto q = DecodeRequest(bytes);
    if (!q) continue;
    ReplyHeader h{q->id, 0, 0, q->version};
    auto r = lookup_ ? lookup_(q->path, q->version) : Result<BlobPtr>(Miss());
    if (r.ok() && r.value()->version() == q->version) {
      const Blob& b = *r.value();
      h.found = 1;
      h.hash = b.hash();
      transport_.Send(m.source, kReply, EncodeReply(h, b.data(), b.size()));
      stats_->peer_bytes_out.fetch_add(b.size(), std::memory_order_relaxed);
    } else {
      transport_.Send(m.source, kReply, EncodeReply(h, nullptr, 0));
    }
  }
}

Result<BlobPtr> PeerTier::Get(std::string_view path, const FileVersion& version) {
  int holder;
  uint64_t id;
  auto slot = std::make_shared<Pending>();
  {
    std::lock_guard lock(mu_);
    auto it = holders_.find(std::string(path));
    if (stop_ || it == holders_.end() || it->second.version != version ||
        !LiveLocked(it->second.rank, Clock::now())) {
      return Miss();
    }
    holder = it->second.rank;
    id = ++next_id_;
    pending_.emplace(id, slot);
  }
  transport_.Send(holder, kRequest, EncodeRequest({id, version, std::string(path)}));
  std::vector<char> reply;
  {
    std::unique_lock lock(mu_);
    const bool answered =
        reply_cv_.wait_for(lock, options_.peer_timeout, [&] { return stop_ || slot->done; });
    pending_.erase(id);
    if (!answered || !slot->done) {
      lock.unlock();
      stats_->peer_errors.fetch_add(1, std::memory_order_relaxed);
      if (!answered) MarkDown(holder);
      return Status::Error(Code::kUnavailable,
                           "peer " + std::to_string(holder) + " did not answer");
    }
    reply = std::move(slot->reply);
  }
  const char* data;
  size_t n;
  auto h = DecodeReply(std::string_view(reply.data(), reply.size()), &data, &n);
  if (h && !h->found) {
    std::lock_guard lock(mu_);
    auto it = holders_.find(std::string(path));
    if (it != holders_.end() && it->second.rank == holder) {
      holder_bytes_ -= ObjectBytes(it->first, it->second.version);
      holders_.erase(it);
    }
    return Miss();
  }
  if (!h || h->version != version || n != ObjectBytes(path, version)) {
    Damaged(holder, path);
    return Miss();
  }
  auto blob = Blob::Allocate(n, version);
  std::memcpy(blob->mutable_data(), data, n);
  blob->Seal();
  if (blob->hash() != h->hash) {
    Damaged(holder, path);
    return Miss();  // damaged on the way: never served
  }
  stats_->peer_bytes_in.fetch_add(n, std::memory_order_relaxed);
  return BlobPtr(std::move(blob));
}

void PeerTier::Damaged(int r, std::string_view key) {
  stats_->peer_errors.fetch_add(1, std::memory_order_relaxed);
  if (uint64_t more = 0; damage_log_.Allow(&more)) {
    spdlog::warn("data of {} from peer rank {} failed its version, size or hash check: "
                 "discarded, read elsewhere{}",
                 DisplayKey(key), r,
                 more ? fmt::format(" ({} more since the last line)", more) : "");
  }
}

Status PeerTier::Put(std::string_view, BlobPtr) {
  return Status::Error(Code::kNoSpace, "peers fill their own tiers");
}

bool PeerTier::Contains(std::string_view path, const FileVersion& version) {
  std::lock_guard lock(mu_);
  auto it = holders_.find(std::string(path));
  return it != holders_.end() && it->second.version == version &&
         LiveLocked(it->second.rank, Clock::now());
}

uint64_t PeerTier::used_bytes() const {
  std::lock_guard lock(mu_);
  return holder_bytes_;
}

uint64_t PeerTier::capacity() const {
  std::lock_guard lock(plan_mu_);
  uint64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || !digests_[r]) continue;
    for (uint64_t c : digests_[r]->tier_capacity) total += c;
  }
  return total;
}

std::string PeerTier::InfoJson() const {
  using nlohmann::json;
  std::lock_guard lock(plan_mu_);
  json registered = json::array(), down = json::array(), generations = json::array();
  {
    std::lock_guard l(mu_);
    const auto now = Clock::now();
    for (int r = 0; r < size_; ++r) {
      if (digests_[r]) registered.push_back(r);
      generations.push_back(digests_[r] ? digests_[r]->generation : 0);
      if (r != rank_ && !LiveLocked(r, now)) down.push_back(r);
    }
  }
  json from = json::object();
  for (const auto& [r, files] : local_.from_peer_files) from[std::to_string(r)] = files;
  json j = {
      {"rank", rank_},
      {"ranks", size_},
      {"registered", registered},
      {"generations", generations},
      {"plan_bytes_sent", plan_bytes_sent_},
      {"catalogs_sent", catalog_sends_},
      {"unreachable", down},
      // Live ranks with no plan: this node waits for them (state "waiting for plans") until
      // plan_timeout after its own registration, then places without them.
      {"unregistered", UnregisteredLocked()},
      {"waiting_seconds", registered_ && !placed_
                              ? std::chrono::duration<double>(Clock::now() - registered_at_).count()
                              : 0.0},
      {"plan_timeout", std::chrono::duration<double>(options_.plan_timeout).count()},
      {"state", !registered_ ? "no plan"
                : placed_    ? "placed"
                             : "waiting for plans"},
      {"placed_with", placed_ranks_},
      {"owned", {{"objects", local_.owned_files}, {"bytes", local_.owned_bytes}}},
      {"from_peers",
       {{"objects", local_.from_peers_files},
        {"bytes", local_.from_peers_bytes},
        {"by_rank", from}}},
      {"unowned", {{"objects", local_.unowned_files}, {"bytes", local_.unowned_bytes}}},
      {"cluster_objects", totals_.files},
      {"cluster_bytes", totals_.bytes},
      {"predicted_cluster_backing_bytes", totals_.predicted_backing_bytes}};
  return j.dump();
}

}  // namespace clairfs::cluster
