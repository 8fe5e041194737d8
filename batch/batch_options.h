// BatchOptions: the batch.* keys (docs/configuration.md, docs/batch-path.md): the daemon's
// Unix socket beside the control mount that serves a data loader's samples a batch at a time.
// A plain struct with only standard headers (conf/ parses straight into it).
#pragma once

#include <chrono>
#include <cstdint>

namespace clairfs {

struct BatchOptions {
  bool enabled = true;                   // batch.enabled: false leaves the socket out
  uint32_t max_clients = 256;            // batch.max_clients: connections at once
  uint32_t max_clients_per_user = 64;    // batch.max_clients_per_user: of one uid at once
  uint32_t max_samples = 65536;          // batch.max_samples: samples in one request
  uint64_t max_buffer_bytes = 1ull << 30;  // batch.max_buffer_bytes: a client's buffer
  // batch.send_timeout (seconds in the file): a client that does not take a reply (or send
  // the rest of a frame it began) within this long is cut off.
  std::chrono::milliseconds send_timeout{10'000};

  bool operator==(const BatchOptions&) const = default;
};

}  // namespace clairfs
