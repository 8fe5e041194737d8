#include "cluster/peer_reader.h"

namespace clairfs::cluster {

namespace {
Status Miss() { return Status::Error(Code::kNotFound, "no peer holds it"); }
}  // namespace

PeerReader::PeerReader(Transport& transport, PeerDirectory& directory, PeerLiveness& liveness,
                       std::chrono::milliseconds peer_timeout, ClusterStats* stats,
                       PeerDamage& damage)
    : transport_(transport),
      directory_(directory),
      liveness_(liveness),
      peer_timeout_(peer_timeout),
      stats_(stats),
      damage_(damage) {}

bool PeerReader::Contains(std::string_view key, const FileVersion& version) {
  return directory_.Holder(key, version).has_value();
}

void PeerReader::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  reply_cv_.notify_all();
}

void PeerReader::OnReply(Message m) {
  const char* data;
  size_t n;
  auto h = DecodeReply(std::string_view(m.bytes.data(), m.bytes.size()), &data, &n);
  if (!h) return;
  std::lock_guard lock(mu_);
  auto it = pending_.find(h->id);
  if (it == pending_.end()) return;  // its reader gave up
  it->second->reply = std::move(m.bytes);
  it->second->done = true;
  reply_cv_.notify_all();
}

Result<BlobPtr> PeerReader::Get(std::string_view key, const FileVersion& version) {
  const std::optional<int> holder = directory_.Holder(key, version);
  if (!holder) return Miss();
  return Ask(*holder, kRequest, key, version, peer_timeout_, true, true);
}

Result<BlobPtr> PeerReader::GetFromHolder(std::string_view key, const FileVersion& version) {
  const std::optional<int> holder = holder_of_ ? holder_of_(std::string(key)) : std::nullopt;
  if (!holder || !liveness_.Live(*holder)) return Miss();
  return Ask(*holder, kFetch, key, version, kFetchWaitFactor * peer_timeout_, false, false);
}

Result<BlobPtr> PeerReader::Ask(int holder, int tag, std::string_view key,
                                const FileVersion& version, std::chrono::milliseconds wait,
                                bool mark_down, bool forget) {
  {
    std::lock_guard lock(mu_);
    if (stop_) return Miss();
  }
  uint64_t id;
  auto slot = std::make_shared<Pending>();
  {
    std::lock_guard lock(mu_);
    id = ++next_id_;
    pending_.emplace(id, slot);
  }
  transport_.Send(holder, tag, EncodeRequest({id, version, std::string(key)}));
  std::vector<char> reply;
  {
    std::unique_lock lock(mu_);
    const bool answered = reply_cv_.wait_for(lock, wait, [&] { return stop_ || slot->done; });
    pending_.erase(id);
    if (!answered || !slot->done) {
      lock.unlock();
      stats_->peer_errors.fetch_add(1, std::memory_order_relaxed);
      if (!answered && mark_down) liveness_.MarkDown(holder);
      return Status::Error(Code::kUnavailable,
                           "peer " + std::to_string(holder) + " did not answer");
    }
    reply = std::move(slot->reply);
  }
  const char* data;
  size_t n;
  auto h = DecodeReply(std::string_view(reply.data(), reply.size()), &data, &n);
  if (h && !h->found) {
    if (forget) directory_.Forget(key, holder);
    return Miss();
  }
  BlobPtr blob;
  if (h && h->version == version) blob = CheckedBlob(key, version, data, n, h->hash);
  if (!blob) {
    damage_.Report(holder, key);
    return Miss();
  }
  stats_->peer_bytes_in.fetch_add(n, std::memory_order_relaxed);
  return blob;
}

}  // namespace clairfs::cluster
