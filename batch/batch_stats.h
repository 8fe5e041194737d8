// The batch path's counters (batch/batch_server.h), updated lock-free by its threads and read by
// .clairfs/stats (the `batch` group) and metrics (control/node_stats.h).
#pragma once

#include <atomic>
#include <cstdint>

namespace clairfs {

struct BatchStats {
  using Counter = std::atomic<uint64_t>;
  Counter connections{0};          // connections served (accepted within the limits)
  Counter refused_connections{0};  // connections closed at once: max_clients, per user
  Counter requests{0};             // kRead requests answered with a kReadReply
  Counter samples{0};              // samples served (error 0)
  Counter bytes{0};                // bytes written into clients' buffers
  Counter denied{0};               // samples refused for access (EACCES)
  Counter errors{0};               // samples failed otherwise (ENOENT, ELOOP, ENOBUFS, EIO...)
  Counter protocol_errors{0};      // frames refused (kError sent or connection cut off)
};

}  // namespace clairfs
