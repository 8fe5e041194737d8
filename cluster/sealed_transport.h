// SealedTransport: a Transport whose every message is authenticated as sent by a daemon of this
// cluster, in this session, to this receiver, once. It wraps another transport (MpiTransport;
// a LoopbackNetwork endpoint in tests): MPI over TCP authenticates nothing, and a peer request
// is answered without any user's rights, so bytes that come off the network are trusted only
// once their seal checks out (docs/permissions.md, "The cluster's messages").
//
// Every rank starts a session with a fresh nonce (RandomNonce) and learns every other rank's
// at launch, before any message (Hello, exchanged by the launcher's collective: MpiTransport's
// hellos). A message's seal is a trailer of kSealBytes after its bytes:
//   magic "SEAL" (uint32), the key's id (uint64), the receiver's session (the first 8 bytes of
//   its nonce), the counter (uint64), the MAC (32 bytes)
// where the MAC, HMAC-SHA256 under the cluster key, covers the sender's and the receiver's
// ranks and whole nonces, the tag, the counter, the key's id and the message's bytes. Counters
// of one (sender, receiver, tag) rise by one per message, and the inner transport keeps the
// order of one tag's messages between two ranks (transport.h), so an honest message is always
// newer than the last one accepted.
//
// Receive drops (and counts, and logs rate-limited) what fails, checked in this order
// (Refusal): no seal; another key's id (a daemon of another cluster); another receiver
// session (a message of an earlier run, or meant for another rank); a MAC that does not match
// (bytes changed, or sealed without this key); a counter not newer than the last accepted of
// its sender and tag (a replay). Only then are the bytes handed on, without their seal.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/base/log_limit.h"
#include "cluster/cluster_key.h"
#include "cluster/cluster_stats.h"
#include "cluster/transport.h"

namespace clairfs::cluster {

inline constexpr size_t kSealBytes = 4 + 8 + 8 + 8 + kMacBytes;
inline constexpr size_t kHelloBytes = 8 + kNonceBytes;  // the key's id, then the nonce

// In the order of ClusterStats::PeerRefused's counters.
enum class Refusal { kUnsealed, kOtherCluster, kOtherSession, kForged, kReplayed };
const char* RefusalName(Refusal r);

class SealedTransport : public Transport {
 public:
  // What a rank tells every other at launch: its key's id and its session nonce.
  static std::string Hello(const ClusterKey& key, const std::string& nonce);
  // inner: outlives this. nonce: this rank's (kNonceBytes). hellos: every rank's Hello, by
  // rank (this rank's own among them). Fails, naming the rank, when a hello is malformed or
  // carries another key's id (that rank was given another cluster.key_file).
  static Result<std::unique_ptr<SealedTransport>> Create(Transport& inner,
                                                         std::shared_ptr<const ClusterKey> key,
                                                         std::string nonce,
                                                         const std::vector<std::string>& hellos);

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void Send(int dst, int tag, std::vector<char> bytes) override;
  std::optional<Message> Receive(std::chrono::milliseconds wait) override;
  void Shutdown() override { inner_.Shutdown(); }
  void CountErrorsIn(std::atomic<uint64_t>* counter) override { inner_.CountErrorsIn(counter); }
  // Where to count refused messages besides refused() (the daemon's Stats); null: nowhere.
  void CountRefusedIn(ClusterStats::PeerRefused* counters) { stats_.store(counters); }
  uint64_t refused(Refusal r) const { return refused_[static_cast<size_t>(r)].load(); }

 private:
  SealedTransport(Transport& inner, std::shared_ptr<const ClusterKey> key,
                  std::vector<std::string> nonces);
  // The MAC of a message; false if libcrypto failed.
  bool Seal(int src, int dst, int tag, uint64_t counter, std::string_view bytes, Mac* out) const;
  void Refuse(Refusal why, int source, int tag);

  Transport& inner_;
  const std::shared_ptr<const ClusterKey> key_;
  const std::vector<std::string> nonces_;  // by rank
  std::mutex send_mu_;                     // guards sent_ and orders the inner Send calls; leaf
  std::unordered_map<uint64_t, uint64_t> sent_;      // (dst, tag) -> the last counter sealed
  std::mutex receive_mu_;                            // guards accepted_; leaf
  std::unordered_map<uint64_t, uint64_t> accepted_;  // (src, tag) -> the last counter accepted
  std::array<std::atomic<uint64_t>, 5> refused_{};
  std::atomic<ClusterStats::PeerRefused*> stats_{nullptr};
  LogLimit log_;
};

}  // namespace clairfs::cluster
