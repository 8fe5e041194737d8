#include "cluster/peer_server.h"

#include <algorithm>

#include "cluster/protocol.h"

namespace clairfs::cluster {

PeerServer::PeerServer(Transport& transport, ClusterStats* stats, PeerDamage& damage)
    : transport_(transport), stats_(stats), damage_(damage) {}

PeerServer::~PeerServer() { Stop(); }

void PeerServer::Start(LocalLookup lookup, Adopt adopt, int threads, Fetch fetch) {
  lookup_ = std::move(lookup);
  adopt_ = std::move(adopt);
  fetch_ = std::move(fetch);
  for (int i = 0; i < std::max(1, threads); ++i) {
    threads_.emplace_back([this] { ServeLoop(requests_); });
  }
  for (int i = 0; i < kFetchThreads; ++i) threads_.emplace_back([this] { ServeLoop(fetches_); });
}

void PeerServer::Enqueue(Message m) {
  if (m.tag == kFetch) {
    fetches_.Push(std::move(m));
  } else {
    requests_.Push(std::move(m));
  }
}

void PeerServer::Stop() {
  requests_.Close();
  fetches_.Close();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void PeerServer::ServeLoop(MessageQueue& queue) {
  while (std::optional<Message> m = queue.Pop()) {
    if (m->tag == kPush) {
      Keep(*m);
    } else {
      Serve(*m, m->tag == kFetch && fetch_ ? &fetch_ : nullptr);
    }
  }
}

void PeerServer::Keep(const Message& m) {
  ReplyHeader h;
  const char* data;
  size_t n;
  auto key = DecodePush(std::string_view(m.bytes.data(), m.bytes.size()), &h, &data, &n);
  if (!key) return;
  stats_->peer_bytes_in.fetch_add(n, std::memory_order_relaxed);
  BlobPtr blob = CheckedBlob(*key, h.version, data, n, h.hash);
  if (!blob) {
    damage_.Report(m.source, *key);
    return;
  }
  if (adopt_) adopt_(*key, std::move(blob));
}

void PeerServer::Serve(const Message& m, const Fetch* fetch) {
  auto q = DecodeRequest(std::string_view(m.bytes.data(), m.bytes.size()));
  if (!q) return;
  ReplyHeader h{q->id, 0, 0, q->version};
  auto r = lookup_ ? lookup_(q->key, q->version)
                   : Result<BlobPtr>(Status::Error(Code::kNotFound, "no local lookup"));
  if (!r.ok() && fetch) r = (*fetch)(q->key, q->version);
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

}  // namespace clairfs::cluster
