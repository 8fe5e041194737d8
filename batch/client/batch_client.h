// BatchClient: the C++ client of the batch path (docs/batch-path.md), for benchmarks, tests and
// C++ loaders. It depends only on the wire format (batch/batch_wire.h).
//
// A client owns one connection and one buffer: a memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING) of the
// size asked, sealed against shrinking and mapped MAP_SHARED | MAP_POPULATE (its pages are the
// client's, charged to its memory cgroup), handed to the server at hello. Read sends one
// request and waits for its reply; the samples' bytes are then in buffer() at each one's
// buffer_offset. Every wait (connect, send, each receive) has the client's timeout.
// Errors are positive errnos, with a message in *why. Not thread-safe: one thread per client.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "batch/batch_wire.h"

namespace clairfs::batch {

class BatchClient {
 public:
  struct Options {
    uint64_t buffer_bytes = 64ull << 20;
    std::chrono::milliseconds timeout{60'000};  // each wait for the server
  };
  // Connects to the socket at socket_path, creates the buffer and says hello. 0 or an errno
  // (a kError's from the server, ETIMEDOUT, ECONNREFUSED...).
  static int Connect(const std::string& socket_path, const Options& options,
                     std::unique_ptr<BatchClient>* out, std::string* why);
  // The same through a mount: the socket named by `<mountpoint>/.clairfs/batch` (ENOENT when
  // the daemon has no batch path).
  static int ConnectMount(const std::string& mountpoint, const Options& options,
                          std::unique_ptr<BatchClient>* out, std::string* why);
  // The socket path `<mountpoint>/.clairfs/batch` names, or an errno.
  static int SocketOf(const std::string& mountpoint, std::string* path, std::string* why);
  ~BatchClient();
  BatchClient(const BatchClient&) = delete;
  BatchClient& operator=(const BatchClient&) = delete;

  struct Item {
    std::string path;  // relative to the mount's root
    uint64_t offset = 0;
    uint64_t length = kToEnd;
  };
  struct Sample {
    int error = 0;  // 0 or a positive errno for this sample alone
    uint64_t buffer_offset = 0;
    uint64_t length = 0;
    uint64_t file_size = 0;
    std::span<const uint8_t> bytes;  // in buffer(), valid until the next Read into the window
  };
  // Reads items into [window_offset, window_offset + window_bytes) of the buffer
  // (window_bytes kToEnd: to the buffer's end). 0 with one Sample per item, or the errno of the
  // request as a whole (a kError's, or the connection's); after a kError that closes the
  // connection, or a connection failure, every later call fails (EPIPE).
  int Read(std::span<const Item> items, uint64_t window_offset, uint64_t window_bytes,
           std::vector<Sample>* out, std::string* why);

  const uint8_t* buffer() const { return buffer_; }
  uint64_t buffer_bytes() const { return buffer_bytes_; }
  uint32_t max_samples() const { return max_samples_; }
  int socket_fd() const { return fd_; }

  // Path under mountpoint (absolute or not) as a path relative to the mount's root; "" when it
  // is not under it.
  static std::string RelativeTo(std::string_view mountpoint, std::string_view path);

 private:
  BatchClient() = default;
  // Sends frame (SCM_RIGHTS of pass_fd when >= 0); 0 or an errno.
  int Send(const std::vector<uint8_t>& frame, int pass_fd, std::string* why);
  // Receives one frame: its header and body. A kError is turned into its errno and message.
  int Receive(Header* h, std::vector<uint8_t>* body, std::string* why);
  int RecvExact(uint8_t* buf, size_t n, std::string* why);

  Options options_;
  int fd_ = -1;
  int memfd_ = -1;
  uint8_t* buffer_ = nullptr;
  uint64_t buffer_bytes_ = 0;
  uint32_t max_samples_ = 0;
  uint64_t next_tag_ = 1;
  bool broken_ = false;
};

}  // namespace clairfs::batch
