#include "bench_batch.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <span>
#include <thread>

namespace clairfs::bench {
namespace {

using batch::BatchClient;

// Reads one sample's bytes as a consumer would: hashed with verify, else each page touched.
uint64_t Use(std::span<const uint8_t> bytes, bool verify, volatile uint8_t* sink) {
  if (verify) return XXH3_64bits(bytes.data(), bytes.size());
  uint8_t x = 0;
  for (size_t at = 0; at < bytes.size(); at += 4096) x ^= bytes[at];
  *sink = x;
  return 0;
}

}  // namespace

bool BatchBench::Connect(const std::string& root, int threads, uint64_t buffer_bytes,
                         std::string* error) {
  root_ = root;
  BatchClient::Options o;
  o.buffer_bytes = buffer_bytes;
  for (int t = 0; t < threads; ++t) {
    std::unique_ptr<BatchClient> c;
    if (const int e = BatchClient::ConnectMount(root, o, &c, error); e != 0) {
      *error = "batch path of " + root + ": " + *error + " (" + std::strerror(e) + ")";
      return false;
    }
    clients_.push_back(std::move(c));
  }
  return true;
}

EpochResult BatchBench::RunEpoch(int epoch, const std::vector<std::string>& paths,
                                 int batch_samples, bool verify) {
  std::atomic<size_t> next{0};
  const size_t n = static_cast<size_t>(batch_samples);
  std::vector<WorkerStats> stats(clients_.size());
  const auto start = std::chrono::steady_clock::now();
  {
    std::vector<std::jthread> workers;
    for (size_t t = 0; t < clients_.size(); ++t) {
      workers.emplace_back([&, t] {
        BatchClient& c = *clients_[t];
        WorkerStats& w = stats[t];
        volatile uint8_t sink = 0;
        std::vector<BatchClient::Item> items;
        std::vector<BatchClient::Sample> out;
        std::string why;
        // Reads items in one request and records each; returns the ones that did not fit.
        auto request = [&](std::vector<BatchClient::Item>& batch) {
          std::vector<BatchClient::Item> again;
          const auto sent = std::chrono::steady_clock::now();
          const int e = c.Read(batch, 0, batch::kToEnd, &out, &why);
          const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now() - sent)
                                 .count();
          for (size_t i = 0; i < batch.size(); ++i) {
            Sample s;
            s.latency_ns = ns;
            s.error = e != 0 ? e : out[i].error;
            if (s.error == ENOBUFS && batch.size() > 1) {
              again.push_back(std::move(batch[i]));
              continue;
            }
            if (s.error == 0) {
              s.bytes = out[i].length;
              s.hash = Use(out[i].bytes, verify, &sink);
            }
            w.Record(batch[i].path, s);
          }
          return again;
        };
        for (size_t i; (i = next.fetch_add(n, std::memory_order_relaxed)) < paths.size();) {
          items.clear();
          for (size_t k = i; k < std::min(paths.size(), i + n); ++k) {
            std::string rel = paths[k];
            if (!rel.empty() && rel.front() == '/') rel = BatchClient::RelativeTo(root_, rel);
            while (rel.starts_with("./")) rel.erase(0, 2);  // "./#name" in a list
            items.push_back({std::move(rel), 0, batch::kToEnd});
          }
          std::vector<BatchClient::Item> left = request(items);
          for (auto& one : left) {  // each alone, in the whole buffer
            std::vector<BatchClient::Item> single{std::move(one)};
            request(single);
          }
        }
      });
    }
  }  // jthreads join here
  EpochResult r;
  r.epoch = epoch;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MergeWorkers(stats, &r);
  return r;
}

}  // namespace clairfs::bench
