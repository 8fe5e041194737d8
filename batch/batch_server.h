// BatchServer: the batch path's Unix stream socket (docs/batch-path.md). A data loader connects,
// hands over its buffer (a sealed memfd) at hello, and asks for samples a batch at a time; each
// sample is read by BatchReader (batch/batch_reader.h), as the mount would serve it, straight
// into the buffer.
//
// Contract:
//  - Start makes the socket at `path` (a stale one there is unlinked first), mode 0666 when the
//    mount is allow_other, else 0600, and starts the accepting thread. A failure is returned
//    (the caller logs it and goes on without the batch path); nothing is left behind.
//  - The caller is the kernel's (SO_PEERCRED, SO_PEERGROUPS at accept), never the client's word.
//  - A connection gets a thread of its own, at most max_clients at once and
//    max_clients_per_user of one uid; one more is sent a kError (EBUSY) and closed.
//  - Every wait has a deadline or ends at Stop: a frame begun must arrive whole and a reply be
//    taken within send_timeout (SO_RCVTIMEO, SO_SNDTIMEO), else the connection is cut off.
//    Waiting for the next request has none (a loader may pause) but Stop ends it.
//  - A malformed frame gets a kError and the connection is closed (its framing is lost); a
//    request refused as a whole on its merits (no buffer, a window outside it) gets a kError
//    and the connection goes on. A client's fault never stops the server serving others.
//  - Stop shuts every socket down, joins the threads with a deadline (a thread still inside a
//    read of a stuck store after it is logged and left; its state stays alive, leaked) and
//    removes the socket. Idempotent; the destructor stops.
// Lock order: mu_ is a leaf (held only to change the connection table and counts, or to shut
// the sockets down); the threads take no other lock of the server.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <functional>

#include "batch/batch_options.h"
#include "batch/batch_reader.h"
#include "batch/batch_stats.h"
#include "cache/base/status.h"

namespace clairfs {

class BatchServer {
 public:
  // reader and stats must outlive the server. await_releases: run before each request, so
  // that a plan whose writer's close() just returned counts (Registrar::AwaitReleases); null:
  // nothing to wait for.
  BatchServer(BatchReader& reader, BatchOptions options, BatchStats& stats,
              std::function<void()> await_releases = nullptr);
  ~BatchServer();
  BatchServer(const BatchServer&) = delete;
  BatchServer& operator=(const BatchServer&) = delete;

  Status Start(const std::string& path, bool allow_other);
  // stop_deadline: how long Stop waits for the connections' threads.
  void Stop(std::chrono::milliseconds stop_deadline = std::chrono::seconds(2));

  const std::string& path() const { return path_; }
  // Connections being served now (tests wait on it).
  size_t Connections() const;

 private:
  struct Conn;
  void AcceptLoop();
  void Serve(const std::shared_ptr<Conn>& c);
  // Ends c's registration (under mu_: closes its sockets) and wakes Stop.
  void Done(const std::shared_ptr<Conn>& c);
  // Joins the threads of the connections that ended.
  void Reap();

  BatchReader& reader_;
  const BatchOptions options_;
  BatchStats& stats_;
  const std::function<void()> await_releases_;
  std::string path_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd, written once by Stop: wakes the accepting thread
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;

  mutable std::mutex mu_;  // a leaf: conns_, per_user_, live_ and each Conn's done/fd
  std::condition_variable done_cv_;  // a connection finished (with mu_)
  // Every connection whose thread was not joined yet: the acceptor joins the finished ones,
  // Stop the rest.
  std::list<std::shared_ptr<Conn>> conns_;
  std::map<uid_t, uint32_t> per_user_;  // live connections per uid
  uint32_t live_ = 0;                   // live connections
};

}  // namespace clairfs
