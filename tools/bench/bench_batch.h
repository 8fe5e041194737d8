// The throughput mode through the batch path (docs/batch-path.md) instead of open/read/close:
// --via batch. Each reader thread has its own connection (batch/client/batch_client.h) and
// buffer, claims the next --batch-samples entries of the epoch at once from the shared counter
// and reads them in one request. Results are the throughput mode's (bench_read.h): files,
// bytes, errors, checksum with --verify (XXH3-64 of each sample's bytes, as ReadWhole hashes a
// file); without --verify every 4 KiB page of each sample is touched once, so the bytes are
// used as a reader's would be. A sample's latency is that of the request that carried it.
// A sample that did not fit what was left of the buffer (ENOBUFS) is asked for again in a
// request of its own; one larger than the whole buffer counts as an error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "batch/client/batch_client.h"
#include "bench_read.h"

namespace clairfs::bench {

class BatchBench {
 public:
  // Connects `threads` clients through root's `.clairfs/batch`, each with a buffer of
  // buffer_bytes. False with *error set when one cannot connect.
  bool Connect(const std::string& root, int threads, uint64_t buffer_bytes, std::string* error);
  // One epoch of paths (relative to root; absolute ones under root are made relative), with
  // batch_samples entries a request.
  EpochResult RunEpoch(int epoch, const std::vector<std::string>& paths, int batch_samples,
                       bool verify);

 private:
  std::string root_;
  std::vector<std::unique_ptr<batch::BatchClient>> clients_;
};

}  // namespace clairfs::bench
