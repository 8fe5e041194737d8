#include "bench_report.h"

#include <cinttypes>
#include <cstdio>

namespace clairfs::bench {

namespace {

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

// A counter from a stats delta, or -1 when absent.
double DeltaOf(const nlohmann::json& delta, const char* key) {
  if (!delta.is_object() || !delta.contains(key)) return -1;
  return delta[key].get<double>();
}

}  // namespace

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kThroughput:
      return "throughput";
    case Mode::kReplay:
      return "replay";
    case Mode::kComputeOnly:
      return "compute-only";
  }
  return "?";
}

void PrintJson(const RunInfo& info, const std::vector<EpochResult>& results) {
  nlohmann::json out;
  out["root"] = info.root;
  out["plan"] = info.plan;
  out["mode"] = ModeName(info.mode);
  out["threads"] = info.threads;
  out["chunk_bytes"] = kChunkBytes;
  out["verify"] = info.verify;
  out["via"] = info.via;
  if (info.via == "batch") out["batch_samples"] = info.batch_samples;
  if (info.mode != Mode::kThroughput) {
    out["workers"] = info.threads;
    out["prefetch_factor"] = info.replay.prefetch_factor;
    out["batch_size"] = info.replay.batch_size;
    out["compute_ms"] = info.replay.compute_ms;
    out["compute_ns_per_byte"] = info.replay.compute_ns_per_byte;
  }
  if (!info.block_dev.empty()) out["block_dev"] = info.block_dev;
  if (!info.stats_path.empty()) {
    out["stats_path"] = info.stats_path;
    out["stats_before"] = info.stats_before;
    out["stats_after"] = info.stats_after;
  }
  out["epochs"] = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json e = {{"epoch", r.epoch},
                        {"files", r.files},
                        {"bytes", r.bytes},
                        {"errors", r.errors},
                        {"seconds", r.seconds},
                        {"files_per_s", r.FilesPerSecond()},
                        {"mb_per_s", r.MegabytesPerSecond()},
                        {"p50_us", r.p50_us},
                        {"p99_us", r.p99_us}};
    if (info.mode != Mode::kThroughput) {
      e["stall_s"] = r.stall_s;
      e["compute_s"] = r.compute_s;
    }
    if (info.verify) e["checksum"] = Hex(r.checksum);
    if (r.device_read_bytes) e["device_read_bytes"] = *r.device_read_bytes;
    if (r.device_read_ios) e["device_read_ios"] = *r.device_read_ios;
    if (!info.stats_path.empty()) e["stats_delta"] = r.stats_delta;
    if (!r.first_error.empty()) e["first_error"] = r.first_error;
    out["epochs"].push_back(std::move(e));
  }
  std::printf("%s\n", out.dump(2).c_str());
}

void PrintTable(const RunInfo& info, const std::vector<EpochResult>& results) {
  const bool replay = info.mode != Mode::kThroughput;
  const bool stats = !info.stats_path.empty();
  std::printf("root %s, plan %s, mode %s, %d thread(s), %zu KiB reads", info.root.c_str(),
              info.plan.c_str(), ModeName(info.mode), info.threads, kChunkBytes / 1024);
  if (info.via == "batch") std::printf(", via batch, %d samples a request", info.batch_samples);
  if (replay) {
    std::printf(", prefetch factor %d, batch %d, compute %.3f ms/sample + %.3f ns/byte",
                info.replay.prefetch_factor, info.replay.batch_size, info.replay.compute_ms,
                info.replay.compute_ns_per_byte);
  }
  std::printf("\n%5s %9s %14s %6s %9s", "epoch", "files", "bytes", "errors", "seconds");
  if (replay) std::printf(" %9s %9s", "stall_s", "compute_s");
  std::printf(" %11s %9s %9s %9s", "files/s", "MB/s", "p50_us", "p99_us");
  if (!info.block_dev.empty()) std::printf(" %10s", "dev_MB");
  if (stats) std::printf(" %10s %8s %8s %8s %8s", "backing_MB", "ram", "ssd", "staging", "backing");
  std::printf("%s\n", info.verify ? "  checksum" : "");
  for (const auto& r : results) {
    std::printf("%5d %9" PRIu64 " %14" PRIu64 " %6" PRIu64 " %9.3f", r.epoch, r.files, r.bytes,
                r.errors, r.seconds);
    if (replay) std::printf(" %9.3f %9.3f", r.stall_s, r.compute_s);
    std::printf(" %11.0f %9.1f %9.1f %9.1f", r.FilesPerSecond(), r.MegabytesPerSecond(), r.p50_us,
                r.p99_us);
    if (!info.block_dev.empty()) {
      std::printf(" %10.1f", r.device_read_bytes ? *r.device_read_bytes / 1e6 : -1.0);
    }
    if (stats) {
      const nlohmann::json& d = r.stats_delta;
      const double backing = DeltaOf(d, "backing_bytes");
      std::printf(" %10.1f %8.0f %8.0f %8.0f %8.0f", backing < 0 ? -1.0 : backing / 1e6,
                  DeltaOf(d, "served.ram"), DeltaOf(d, "served.ssd"), DeltaOf(d, "served.staging"),
                  DeltaOf(d, "served.backing"));
    }
    if (info.verify) std::printf("  %s", Hex(r.checksum).c_str());
    std::printf("\n");
    if (!r.first_error.empty()) std::printf("      first error: %s\n", r.first_error.c_str());
  }
  if (stats)
    std::printf("stats: %s (ram..backing: opens served per source; -1: absent)\n",
                info.stats_path.c_str());
}

}  // namespace clairfs::bench
