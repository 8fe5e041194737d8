// PeerServer: answers the other nodes. A kRequest is answered at once, from this node's local
// tiers only (never waiting on the backing store or another peer), with the bytes and their
// xxh3 or "not here". A kPush (an object another node read from the backing store that this node
// owns) is checked (peer_bytes.h) and offered to this node's tiers. A kFetch (a reader ahead of
// this node's fill asks for an object the placement gives this node) is answered once the
// fetch callback has it, on kFetchThreads threads of its own, so that a wait on the backing
// store never delays a kRequest.
//
// Thread-safe. The receiving thread queues messages (Enqueue); serve_threads threads answer
// requests and pushes, kFetchThreads fetches. Lock order: only the queues' locks (leaves); the
// callbacks are called with no lock held.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cache/base/object.h"
#include "cache/base/status.h"
#include "cluster/cluster_stats.h"
#include "cluster/message_queue.h"
#include "cluster/peer_bytes.h"
#include "cluster/transport.h"

namespace clairfs::cluster {

class PeerServer {
 public:
  // This node's tiers: the bytes of key at version if a local tier holds them. Must not
  // block on the network.
  using LocalLookup = std::function<Result<BlobPtr>(const std::string&, const FileVersion&)>;
  // Offers this node's tiers an object another node pushed (Prefetcher::Adopt).
  using Adopt = std::function<void(const std::string&, BlobPtr)>;
  // The object of key at version that this node's placement holds, read from the backing
  // store now if its tiers do not have it yet (Prefetcher::FetchForPeer). Bounded.
  using Fetch = std::function<Result<BlobPtr>(const std::string&, const FileVersion&)>;
  static constexpr int kFetchThreads = 2;

  // Everything given must outlive the server.
  PeerServer(Transport& transport, ClusterStats* stats, PeerDamage& damage);
  ~PeerServer();

  // Starts `threads` (at least one) serving threads, and the fetch threads. Called once,
  // before Enqueue. fetch may be null: every kFetch is answered from the tiers alone.
  void Start(LocalLookup lookup, Adopt adopt, int threads, Fetch fetch = nullptr);
  // A kRequest, kFetch or kPush whose header was checked.
  void Enqueue(Message m);
  // Drops the queued messages and joins the threads. Idempotent.
  void Stop();

 private:
  void ServeLoop(MessageQueue& queue);
  // Answers a kRequest, or with fetch a kFetch.
  void Serve(const Message& m, const Fetch* fetch);
  void Keep(const Message& m);  // a kPush

  Transport& transport_;
  ClusterStats* const stats_;
  PeerDamage& damage_;
  LocalLookup lookup_;
  Adopt adopt_;
  Fetch fetch_;
  MessageQueue requests_;  // kRequest and kPush, for the serving threads
  MessageQueue fetches_;   // kFetch, for the fetch threads
  std::vector<std::thread> threads_;
};

}  // namespace clairfs::cluster
