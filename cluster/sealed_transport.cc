#include "cluster/sealed_transport.h"

#include <cstring>

#include "cache/base/log.h"

namespace clairfs::cluster {
namespace {

constexpr uint32_t kSealMagic = 0x4c414553;  // "SEAL" in memory order

// The fields of a seal, in the order of the trailer (sealed_transport.h).
struct Trailer {
  uint32_t magic = kSealMagic;
  uint64_t cluster = 0;
  uint64_t session = 0;
  uint64_t counter = 0;
};
constexpr size_t kFieldBytes = kSealBytes - kMacBytes;

uint64_t Session(const std::string& nonce) {
  uint64_t s = 0;
  std::memcpy(&s, nonce.data(), sizeof(s));
  return s;
}

uint64_t Pair(int rank, int tag) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 32) | static_cast<uint32_t>(tag);
}

void PutFields(const Trailer& t, char* out) {
  std::memcpy(out, &t.magic, 4);
  std::memcpy(out + 4, &t.cluster, 8);
  std::memcpy(out + 12, &t.session, 8);
  std::memcpy(out + 20, &t.counter, 8);
}

Trailer GetFields(const char* in) {
  Trailer t;
  std::memcpy(&t.magic, in, 4);
  std::memcpy(&t.cluster, in + 4, 8);
  std::memcpy(&t.session, in + 12, 8);
  std::memcpy(&t.counter, in + 20, 8);
  return t;
}

template <typename T>
std::string_view Bytes(const T& v) {
  return {reinterpret_cast<const char*>(&v), sizeof(v)};
}

}  // namespace

const char* RefusalName(Refusal r) {
  switch (r) {
    case Refusal::kUnsealed:
      return "unsealed";
    case Refusal::kOtherCluster:
      return "other_cluster";
    case Refusal::kOtherSession:
      return "other_session";
    case Refusal::kForged:
      return "forged";
    case Refusal::kReplayed:
      return "replayed";
  }
  return "unknown";
}

std::string SealedTransport::Hello(const ClusterKey& key, const std::string& nonce) {
  const uint64_t id = key.id();
  std::string hello(Bytes(id));
  hello += nonce;
  return hello;
}

Result<std::unique_ptr<SealedTransport>> SealedTransport::Create(
    Transport& inner, std::shared_ptr<const ClusterKey> key, std::string nonce,
    const std::vector<std::string>& hellos) {
  if (nonce.size() != kNonceBytes) {
    return Status::Error(Code::kInvalidArgument, "a session nonce has 16 bytes");
  }
  if (hellos.size() != static_cast<size_t>(inner.size())) {
    return Status::Error(Code::kInvalidArgument, std::to_string(hellos.size()) +
                                                     " ranks' hellos for " +
                                                     std::to_string(inner.size()) + " ranks");
  }
  std::vector<std::string> nonces;
  for (size_t r = 0; r < hellos.size(); ++r) {
    const std::string& h = hellos[r];
    uint64_t id = 0;
    if (h.size() == kHelloBytes) std::memcpy(&id, h.data(), sizeof(id));
    if (h.size() != kHelloBytes || id != key->id()) {
      return Status::Error(
          Code::kInvalidArgument,
          "rank " + std::to_string(r) +
              (h.size() != kHelloBytes
                   ? " sent a malformed hello (another clairfs build?)"
                   : " was given another cluster key: cluster.key_file must hold the same "
                     "secret on every node of the cluster"));
    }
    nonces.push_back(h.substr(8));
  }
  if (nonces[static_cast<size_t>(inner.rank())] != nonce) {
    return Status::Error(Code::kInvalidArgument, "this rank's hello is not its own");
  }
  return std::unique_ptr<SealedTransport>(
      new SealedTransport(inner, std::move(key), std::move(nonces)));
}

SealedTransport::SealedTransport(Transport& inner, std::shared_ptr<const ClusterKey> key,
                                 std::vector<std::string> nonces)
    : inner_(inner), key_(std::move(key)), nonces_(std::move(nonces)) {}

bool SealedTransport::Seal(int src, int dst, int tag, uint64_t counter, std::string_view bytes,
                           Mac* out) const {
  const auto s = static_cast<uint32_t>(src), d = static_cast<uint32_t>(dst);
  const int32_t t = tag;
  const uint64_t id = key_->id();
  return key_->Sign({"clairfs seal", Bytes(id), Bytes(s), nonces_[src], Bytes(d), nonces_[dst],
                     Bytes(t), Bytes(counter), bytes},
                    out);
}

void SealedTransport::Send(int dst, int tag, std::vector<char> bytes) {
  if (dst < 0 || dst >= size() || dst == rank()) return;
  std::lock_guard lock(send_mu_);
  const uint64_t counter = ++sent_[Pair(dst, tag)];
  Mac mac;
  if (!Seal(rank(), dst, tag, counter, {bytes.data(), bytes.size()}, &mac)) {
    if (log_.Allow()) LogError("peer: libcrypto failed to seal a message; not sent");
    return;
  }
  Trailer t;
  t.cluster = key_->id();
  t.session = Session(nonces_[dst]);
  t.counter = counter;
  const size_t at = bytes.size();
  bytes.resize(at + kSealBytes);
  PutFields(t, bytes.data() + at);
  std::memcpy(bytes.data() + at + kFieldBytes, mac.data(), mac.size());
  inner_.Send(dst, tag, std::move(bytes));
}

std::optional<Message> SealedTransport::Receive(std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    std::optional<Message> m = inner_.Receive(std::max(left, std::chrono::milliseconds(0)));
    if (!m) return m;
    const int src = m->source;
    std::vector<char>& b = m->bytes;
    if (src < 0 || src >= size() || src == rank() || b.size() < kSealBytes) {
      Refuse(Refusal::kUnsealed, src, m->tag);
      continue;
    }
    const size_t at = b.size() - kSealBytes;
    const Trailer t = GetFields(b.data() + at);
    if (t.magic != kSealMagic) {
      Refuse(Refusal::kUnsealed, src, m->tag);
      continue;
    }
    if (t.cluster != key_->id()) {
      Refuse(Refusal::kOtherCluster, src, m->tag);
      continue;
    }
    if (t.session != Session(nonces_[rank()])) {
      Refuse(Refusal::kOtherSession, src, m->tag);
      continue;
    }
    Mac mac;
    if (!Seal(src, rank(), m->tag, t.counter, {b.data(), at}, &mac) ||
        !SameMac(mac, reinterpret_cast<const unsigned char*>(b.data() + at + kFieldBytes))) {
      Refuse(Refusal::kForged, src, m->tag);
      continue;
    }
    bool replayed = false;
    {
      std::lock_guard lock(receive_mu_);
      uint64_t& last = accepted_[Pair(src, m->tag)];
      replayed = t.counter <= last;
      if (!replayed) last = t.counter;
    }
    if (replayed) {
      Refuse(Refusal::kReplayed, src, m->tag);
      continue;
    }
    b.resize(at);
    return m;
  }
}

void SealedTransport::Refuse(Refusal why, int source, int tag) {
  refused_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  if (ClusterStats::PeerRefused* s = stats_.load()) {
    ClusterStats::Counter* const by_reason[] = {&s->unsealed, &s->other_cluster, &s->other_session,
                                                &s->forged, &s->replayed};  // Refusal's order
    by_reason[static_cast<size_t>(why)]->fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t suppressed = 0;
  if (log_.Allow(&suppressed)) {
    LogWarn("peer: refused a message from rank {} (tag {}): {}{}", source, tag, RefusalName(why),
            suppressed ? " (" + std::to_string(suppressed) + " more refusals not logged)"
                       : std::string());
  }
}

}  // namespace clairfs::cluster
