// PeerServer: answers the other nodes. A kRequest is answered at once, from this node's local
// tiers only (never waiting on the backing store or another peer), with the bytes and their
// xxh3 or "not here". A kPush (a file another node read from the backing store that this node
// owns) is checked (peer_bytes.h) and offered to this node's tiers.
//
// Thread-safe. The receiving thread queues messages (Enqueue); serve_threads threads answer
// them. Lock order: only the queue's lock (a leaf); the lookup and adopt callbacks are called
// with no lock held.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cache/base/object.h"
#include "cache/base/stats.h"
#include "cache/base/status.h"
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

  // Everything given must outlive the server.
  PeerServer(Transport& transport, Stats* stats, PeerDamage& damage);
  ~PeerServer();

  // Starts `threads` (at least one) serving threads. Called once, before Enqueue.
  void Start(LocalLookup lookup, Adopt adopt, int threads);
  // A kRequest or kPush whose header was checked.
  void Enqueue(Message m);
  // Drops the queued messages and joins the threads. Idempotent.
  void Stop();

 private:
  void ServeLoop();
  void Serve(const Message& m);
  void Keep(const Message& m);  // a kPush

  Transport& transport_;
  Stats* const stats_;
  PeerDamage& damage_;
  LocalLookup lookup_;
  Adopt adopt_;
  MessageQueue requests_;  // kRequest and kPush, for the serving threads
  std::vector<std::thread> threads_;
};

}  // namespace clairfs::cluster
