// clairfs-bench: reads whole files the way a data loader's worker processes do, and reports
// per-epoch throughput and per-file latency.
//
//   clairfs-bench --root DIR (--list FILE | --walk) [--threads N] [--epochs E] [--limit N]
//                 [--verify] [--json]
//
// Plan. --list FILE holds paths relative to --root, one per line, in read order. Lines starting
// with '#' are skipped, except that a line "#epoch" begins a new epoch section, so a clairfs
// manifest (docs/control-interface.md) is a valid list; a path starting with '#' is written
// "./#name" there and opens as such here. Epoch e (0-based) reads section e % S of the S
// sections; a plain list (S == 1) is thus one epoch repeated. --epochs defaults to S.
// --walk reads every regular file under --root, sorted by path, as one section.
// --limit N keeps the first N entries of every section. Absolute paths in a list are opened as
// given, not below --root.
//
// Reading. W threads (--threads) claim the next index of the epoch from one atomic counter, so
// files are started in plan order but finish out of order, as with a multi-worker loader.
// Each claimed file is opened, read with read(2) in 1 MiB chunks into a per-thread buffer until
// read returns 0 (as Python's f.read() does), and closed. No descriptor outlives its file.
// Latency is open-to-close per file; wall time spans the thread start to the last join.
//
// Verification. --verify hashes every file with XXH3-64 and prints the wrapping sum of the
// hashes per epoch: independent of read order and thread count, so equal sums across runs over
// different filesystems mean the same bytes were read (modulo 2^-64 collisions).
//
// Output: a human table on stdout, or one JSON object with --json. Exit status: 0 when every
// file was read, 1 when any file failed (counted in "errors"), 2 on usage or plan errors.
//
// Extension point (not built yet): a training-loop replay would replace RecordSample() with a
// push into a bounded queue drained by a consumer that simulates per-sample compute time; the
// plan, the claiming loop and the per-file reader stay as they are.

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kChunkBytes = size_t{1} << 20;  // read(2) size; one call for files <= 1 MiB

struct Options {
  std::string root;     // directory every plan path is relative to
  std::string list;     // plan file; empty when walk is set
  bool walk = false;    // plan = sorted regular files under root
  int threads = 1;      // concurrent reader threads, >= 1
  int epochs = 0;       // 0: one per section of the plan
  size_t limit = 0;     // 0: no limit; else first `limit` entries per section
  bool verify = false;  // hash every file with XXH3-64
  bool json = false;    // JSON instead of the human table
};

// Epoch sections of relative paths, in read order. Never empty after a successful load.
using Plan = std::vector<std::vector<std::string>>;

// Parses a list or clairfs manifest. Returns false and sets *error on I/O failure or when no
// section holds a path. Empty sections (e.g. a leading "#epoch") are dropped.
bool LoadList(const std::string& path, Plan* plan, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot open list " + path + ": " + std::strerror(errno);
    return false;
  }
  plan->assign(1, {});
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (line == "#epoch" && !plan->back().empty()) plan->emplace_back();
      continue;
    }
    plan->back().push_back(std::move(line));
  }
  if (plan->back().empty()) plan->pop_back();
  if (plan->empty()) {
    *error = "list " + path + " holds no paths";
    return false;
  }
  return true;
}

// Collects the regular files under root (symlinks followed for files, not for directories).
bool WalkRoot(const std::string& root, Plan* plan, std::string* error) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) {
      files.push_back(it->path().lexically_relative(root).string());
    }
  }
  if (ec) {
    *error = "walking " + root + ": " + ec.message();
    return false;
  }
  if (files.empty()) {
    *error = "no regular files under " + root;
    return false;
  }
  std::sort(files.begin(), files.end());
  plan->assign(1, std::move(files));
  return true;
}

// Outcome of reading one file. error is 0 or the errno of the failing call.
struct Sample {
  uint64_t bytes = 0;
  uint64_t hash = 0;  // XXH3-64 of the content when verifying, else 0
  int64_t latency_ns = 0;
  int error = 0;
};

// Reads one whole file relative to root_fd through buffer (kChunkBytes). Thread-compatible:
// each thread passes its own buffer and state.
Sample ReadWhole(int root_fd, const std::string& path, char* buffer, XXH3_state_t* state) {
  Sample s;
  const auto start = Clock::now();
  if (state != nullptr) XXH3_64bits_reset(state);
  const int fd = openat(root_fd, path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    s.error = errno;
  } else {
    for (;;) {
      const ssize_t n = read(fd, buffer, kChunkBytes);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        s.error = errno;
        break;
      }
      s.bytes += static_cast<uint64_t>(n);
      if (state != nullptr) XXH3_64bits_update(state, buffer, static_cast<size_t>(n));
    }
    if (close(fd) != 0 && s.error == 0) s.error = errno;
  }
  if (state != nullptr && s.error == 0) s.hash = XXH3_64bits_digest(state);
  s.latency_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  return s;
}

// Per-thread accumulator; merged after the threads joined, so it needs no locking.
struct WorkerStats {
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
  uint64_t hash_sum = 0;            // wrapping sum of per-file hashes
  std::vector<int64_t> latency_ns;  // one entry per successfully read file
  std::string first_error;          // "path: strerror" of this thread's first failure
};

void RecordSample(const std::string& path, const Sample& s, WorkerStats* w) {
  if (s.error != 0) {
    if (w->errors++ == 0) w->first_error = path + ": " + std::strerror(s.error);
    return;
  }
  ++w->files;
  w->bytes += s.bytes;
  w->hash_sum += s.hash;
  w->latency_ns.push_back(s.latency_ns);
}

struct EpochResult {
  int epoch = 0;
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
  uint64_t checksum = 0;
  double seconds = 0;
  double p50_us = 0;
  double p99_us = 0;
  std::string first_error;

  double FilesPerSecond() const { return seconds > 0 ? files / seconds : 0; }
  double MegabytesPerSecond() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

// Nearest-rank percentile q in [0, 1] of sorted values, in microseconds; 0 when empty.
double PercentileUs(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return static_cast<double>(sorted[rank - 1]) / 1e3;
}

// Reads every path of one section with opt.threads threads and returns the merged result.
EpochResult RunEpoch(int epoch, int root_fd, const std::vector<std::string>& paths,
                     const Options& opt) {
  std::atomic<size_t> next{0};
  std::vector<WorkerStats> stats(static_cast<size_t>(opt.threads));
  const auto start = Clock::now();
  {
    std::vector<std::jthread> workers;
    for (auto& w : stats) {
      workers.emplace_back([&next, &paths, &opt, root_fd, &w] {
        auto buffer = std::make_unique<char[]>(kChunkBytes);
        XXH3_state_t* state = opt.verify ? XXH3_createState() : nullptr;
        w.latency_ns.reserve(paths.size() / static_cast<size_t>(opt.threads) + 16);
        for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < paths.size();) {
          RecordSample(paths[i], ReadWhole(root_fd, paths[i], buffer.get(), state), &w);
        }
        if (state != nullptr) XXH3_freeState(state);
      });
    }
  }  // jthreads join here
  EpochResult r;
  r.epoch = epoch;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<int64_t> latencies;
  for (auto& w : stats) {
    r.files += w.files;
    r.bytes += w.bytes;
    r.errors += w.errors;
    r.checksum += w.hash_sum;
    if (r.first_error.empty()) r.first_error = w.first_error;
    latencies.insert(latencies.end(), w.latency_ns.begin(), w.latency_ns.end());
  }
  std::sort(latencies.begin(), latencies.end());
  r.p50_us = PercentileUs(latencies, 0.50);
  r.p99_us = PercentileUs(latencies, 0.99);
  return r;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

void PrintJson(const Options& opt, const std::vector<EpochResult>& results) {
  nlohmann::json out;
  out["root"] = opt.root;
  out["plan"] = opt.walk ? std::string("walk") : opt.list;
  out["threads"] = opt.threads;
  out["chunk_bytes"] = kChunkBytes;
  out["verify"] = opt.verify;
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
    if (opt.verify) e["checksum"] = Hex(r.checksum);
    if (!r.first_error.empty()) e["first_error"] = r.first_error;
    out["epochs"].push_back(std::move(e));
  }
  std::printf("%s\n", out.dump(2).c_str());
}

void PrintTable(const Options& opt, const std::vector<EpochResult>& results) {
  std::printf("root %s, plan %s, %d thread(s), %zu KiB reads\n", opt.root.c_str(),
              opt.walk ? "walk" : opt.list.c_str(), opt.threads, kChunkBytes / 1024);
  std::printf("%5s %9s %14s %6s %9s %11s %9s %9s %9s%s\n", "epoch", "files", "bytes", "errors",
              "seconds", "files/s", "MB/s", "p50_us", "p99_us", opt.verify ? "  checksum" : "");
  for (const auto& r : results) {
    std::printf("%5d %9" PRIu64 " %14" PRIu64 " %6" PRIu64 " %9.3f %11.0f %9.1f %9.1f %9.1f",
                r.epoch, r.files, r.bytes, r.errors, r.seconds, r.FilesPerSecond(),
                r.MegabytesPerSecond(), r.p50_us, r.p99_us);
    if (opt.verify) std::printf("  %s", Hex(r.checksum).c_str());
    std::printf("\n");
    if (!r.first_error.empty()) std::printf("      first error: %s\n", r.first_error.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"clairfs-bench: whole-file read throughput, data-loader style"};
  app.add_option("--root", opt.root, "Directory the plan's paths are relative to")
      ->required()
      ->check(CLI::ExistingDirectory);
  auto* list = app.add_option("--list", opt.list,
                              "Paths relative to --root, one per line; '#' lines skipped, "
                              "'#epoch' starts the next epoch's section (clairfs manifest)");
  auto* walk = app.add_flag("--walk", opt.walk, "Read every regular file under --root, sorted");
  list->excludes(walk);
  walk->excludes(list);
  app.add_option("--threads", opt.threads, "Reader threads")->check(CLI::Range(1, 4096));
  app.add_option("--epochs", opt.epochs, "Epochs (default: sections in the list, walk: 1)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--limit", opt.limit, "Read only the first N entries of each section");
  app.add_flag("--verify", opt.verify, "XXH3-64 every file; print the order-free sum");
  app.add_flag("--json", opt.json, "Print one JSON object instead of a table");
  CLI11_PARSE(app, argc, argv);
  if (!opt.walk && opt.list.empty()) {
    std::fprintf(stderr, "clairfs-bench: one of --list FILE or --walk is required\n");
    return 2;
  }

  Plan plan;
  std::string error;
  if (!(opt.walk ? WalkRoot(opt.root, &plan, &error) : LoadList(opt.list, &plan, &error))) {
    std::fprintf(stderr, "clairfs-bench: %s\n", error.c_str());
    return 2;
  }
  if (opt.limit > 0) {
    for (auto& section : plan) section.resize(std::min(section.size(), opt.limit));
  }
  if (opt.epochs == 0) opt.epochs = static_cast<int>(plan.size());

  const int root_fd = open(opt.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    std::fprintf(stderr, "clairfs-bench: open %s: %s\n", opt.root.c_str(), std::strerror(errno));
    return 2;
  }
  std::vector<EpochResult> results;
  bool failed = false;
  for (int e = 0; e < opt.epochs; ++e) {
    results.push_back(RunEpoch(e, root_fd, plan[static_cast<size_t>(e) % plan.size()], opt));
    failed = failed || results.back().errors > 0;
  }
  close(root_fd);
  if (opt.json) {
    PrintJson(opt, results);
  } else {
    PrintTable(opt, results);
  }
  return failed ? 1 : 0;
}
