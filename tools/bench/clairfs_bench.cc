// clairfs-bench: reads whole files the way a data loader's workers do, and reports per-epoch
// throughput and per-file latency; in replay mode it also runs the training loop that
// consumes them and reports how long that loop waited for data.
//
//   clairfs-bench --root DIR (--list FILE | --walk) [--threads|--workers N] [--epochs E]
//                 [--limit N] [--verify] [--json]
//                 [--replay] [--prefetch-factor F] [--batch-size B] [--compute-ms MS]
//                 [--compute-ns-per-byte NS] [--compute-only]
//                 [--stats PATH | --no-stats] [--block-dev DEV]
//                 [--via read|batch] [--batch-samples N] [--batch-buffer-mb M]
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
// Modes.
// - throughput (default): W threads claim the next index of the epoch from one atomic
//   counter and read each file as fast as they can (bench_read.h). Wall time spans the thread
//   start to the last join.
// - replay (--replay, or implied by any of --prefetch-factor, --batch-size, --compute-ms,
//   --compute-ns-per-byte): W workers read batches ahead of one consumer through a window of
//   F x W batches, delivered in order; the consumer sleeps a simulated compute per batch
//   (bench_replay.h). Adds per-epoch stall_s (consumer waiting for data) and compute_s.
// - throughput via the batch path (--via batch; --root a clairfs mount): as throughput, but each
//   thread has its own batch-path connection (found through <root>/.clairfs/batch) and claims
//   --batch-samples entries (256) at once, read in one request into its buffer
//   (--batch-buffer-mb, 64 MiB a thread; bench_batch.h). Same output, plus via and
//   batch_samples; a file's latency is its request's.
// - compute-only (--compute-only): the replay's consumer alone with every sample at hand, no
//   reads: the lower bound of the replay's epoch time. With --compute-ns-per-byte the files
//   are stat()ed once before the first epoch to learn their sizes.
// Each file is opened, read with read(2) in 1 MiB chunks into a per-thread buffer until read
// returns 0 (as Python's f.read() does), and closed; no descriptor outlives its file. Latency
// is open-to-close per file.
//
// Probes, read before and after every epoch (bench_probe.h). --stats PATH: a clairfs stats
// file; by default <root>/.clairfs/stats when it exists (--no-stats: never). The JSON has
// stats_before/stats_after and per epoch stats_delta (numeric changes, e.g. backing_bytes,
// served.ram). --block-dev DEV (e.g. loop0): per epoch device_read_bytes and device_read_ios
// from /sys/block/DEV/stat, the traffic the device saw from every reader, not only this one.
// --drop-caches N (1 or 3): before every epoch, outside its time, sync and write N to
// /proc/sys/vm/drop_caches (root), so that every epoch of one process starts with the page
// cache (and with 3 the dentries and inodes) dropped; a failed drop is an error (exit 2).
// The first epoch of a process runs slower than the next ones (native reads from the page
// cache: 0.5-0.7 of them on a 2-core machine): compare epochs of the same rank.
//
// Verification. --verify hashes every file with XXH3-64 and prints the wrapping sum of the
// hashes per epoch: independent of read order and thread count, so equal sums across runs over
// different filesystems mean the same bytes were read (modulo 2^-64 collisions).
//
// Output: a human table on stdout, or one JSON object with --json (top level: root, plan,
// mode, threads, chunk_bytes, verify, and for replays workers, prefetch_factor, batch_size,
// compute_ms, compute_ns_per_byte; per epoch: epoch, files, bytes, errors, seconds,
// files_per_s, mb_per_s (10^6 B), p50_us, p99_us, plus the mode's and probes' keys above).
// Exit status: 0 when every file was read, 1 when any file failed (counted in "errors"),
// 2 on usage or plan errors.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_batch.h"
#include "bench_plan.h"
#include "bench_probe.h"
#include "bench_read.h"
#include "bench_replay.h"
#include "bench_report.h"

namespace {

using namespace clairfs::bench;

struct Options {
  std::string root;     // directory every plan path is relative to
  std::string list;     // plan file; empty when walk is set
  bool walk = false;    // plan = sorted regular files under root
  int threads = 1;      // concurrent reader threads (replay: workers), >= 1
  int epochs = 0;       // 0: one per section of the plan
  size_t limit = 0;     // 0: no limit; else first `limit` entries per section
  bool verify = false;  // hash every file with XXH3-64
  bool json = false;    // JSON instead of the human table
  bool replay = false;  // loader pipeline with a consumer
  bool compute_only = false;
  ReplayOptions replay_opt;
  std::string stats;         // stats file; "" = auto-detect under root
  bool no_stats = false;     // never read a stats file
  std::string block_dev;     // "" = no device probe
  std::string via = "read";  // throughput: "read" (open/read/close) or "batch"
  int batch_samples = 256;   // via batch: entries a request
  int batch_buffer_mb = 64;  // via batch: each thread's buffer
  int drop_caches = 0;       // 0: never; 1 or 3: written to drop_caches before every epoch
};

// Syncs and writes level to /proc/sys/vm/drop_caches; false (with errno) when it fails.
bool DropCaches(int level) {
  sync();
  const int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const char c = static_cast<char>('0' + level);
  const bool ok = write(fd, &c, 1) == 1;
  const int e = errno;
  close(fd);
  errno = e;
  return ok;
}

// Sizes of every path (0 where stat fails), for the compute-only mode's per-byte compute.
std::vector<uint64_t> SizesOf(int root_fd, const std::vector<std::string>& paths) {
  std::vector<uint64_t> sizes;
  sizes.reserve(paths.size());
  for (const auto& p : paths) {
    struct stat st {};
    sizes.push_back(fstatat(root_fd, p.c_str(), &st, 0) == 0 ? static_cast<uint64_t>(st.st_size)
                                                             : 0);
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"clairfs-bench: whole-file reads, data-loader style, with a training-loop replay"};
  app.add_option("--root", opt.root, "Directory the plan's paths are relative to")
      ->required()
      ->check(CLI::ExistingDirectory);
  auto* list = app.add_option("--list", opt.list,
                              "Paths relative to --root, one per line; '#' lines skipped, "
                              "'#epoch' starts the next epoch's section (clairfs manifest)");
  auto* walk = app.add_flag("--walk", opt.walk, "Read every regular file under --root, sorted");
  list->excludes(walk);
  walk->excludes(list);
  app.add_option("--threads,--workers", opt.threads, "Reader threads (replay: loader workers)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--epochs", opt.epochs, "Epochs (default: sections in the list, walk: 1)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--limit", opt.limit, "Read only the first N entries of each section");
  app.add_flag("--verify", opt.verify, "XXH3-64 every file; print the order-free sum");
  app.add_flag("--json", opt.json, "Print one JSON object instead of a table");
  app.add_flag("--replay", opt.replay, "Loader pipeline: workers ahead of a consuming loop");
  auto* pf = app.add_option("--prefetch-factor", opt.replay_opt.prefetch_factor,
                            "Replay: batches in flight per worker [2]")
                 ->check(CLI::Range(1, 1 << 16));
  auto* bs = app.add_option("--batch-size", opt.replay_opt.batch_size,
                            "Replay: samples per batch, read by one worker [1]")
                 ->check(CLI::Range(1, 1 << 20));
  auto* cms = app.add_option("--compute-ms", opt.replay_opt.compute_ms,
                             "Replay: simulated compute per sample, milliseconds [0]")
                  ->check(CLI::Range(0.0, 1e6));
  auto* cnb = app.add_option("--compute-ns-per-byte", opt.replay_opt.compute_ns_per_byte,
                             "Replay: simulated compute per byte read, nanoseconds [0]")
                  ->check(CLI::Range(0.0, 1e6));
  app.add_flag("--compute-only", opt.compute_only,
               "The replay's consumer alone, no reads: the lower bound of its epoch time");
  auto* stats = app.add_option("--stats", opt.stats,
                               "clairfs stats file to snapshot around every epoch "
                               "[<root>/.clairfs/stats when it exists]");
  app.add_flag("--no-stats", opt.no_stats, "Do not read a stats file")->excludes(stats);
  app.add_option("--block-dev", opt.block_dev,
                 "Block device whose read counters to snapshot around every epoch (loop0)");
  app.add_option("--via", opt.via,
                 "Throughput mode: read (open/read/close) or batch (the "
                 "batch path of the clairfs mount at --root)")
      ->check(CLI::IsMember({"read", "batch"}));
  app.add_option("--batch-samples", opt.batch_samples, "Via batch: entries a request [256]")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--drop-caches", opt.drop_caches,
                 "Before every epoch, outside its time: sync and drop_caches N (root)")
      ->check(CLI::IsMember({1, 3}));
  app.add_option("--batch-buffer-mb", opt.batch_buffer_mb,
                 "Via batch: each thread's buffer, MiB [64]")
      ->check(CLI::Range(1, 1 << 20));
  CLI11_PARSE(app, argc, argv);
  if (!opt.walk && opt.list.empty()) {
    std::fprintf(stderr, "clairfs-bench: one of --list FILE or --walk is required\n");
    return 2;
  }
  for (auto* o : {pf, bs, cms, cnb}) opt.replay = opt.replay || o->count() > 0;
  const bool via_batch = opt.via == "batch";
  if (via_batch && (opt.replay || opt.compute_only)) {
    std::fprintf(stderr, "clairfs-bench: --via batch is a throughput mode (no replay)\n");
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
  if (opt.stats.empty() && !opt.no_stats) {
    struct stat st {};
    const std::string auto_path = opt.root + "/.clairfs/stats";
    if (stat(auto_path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) opt.stats = auto_path;
  }

  RunInfo info;
  info.root = opt.root;
  info.plan = opt.walk ? std::string("walk") : opt.list;
  info.mode =
      opt.compute_only ? Mode::kComputeOnly : (opt.replay ? Mode::kReplay : Mode::kThroughput);
  info.threads = opt.threads;
  opt.replay_opt.workers = opt.threads;
  opt.replay_opt.verify = opt.verify;
  info.replay = opt.replay_opt;
  info.verify = opt.verify;
  info.via = opt.via;
  info.batch_samples = via_batch ? opt.batch_samples : 0;
  BatchBench batch;
  if (via_batch) {
    std::string why;
    if (!batch.Connect(opt.root, opt.threads, static_cast<uint64_t>(opt.batch_buffer_mb) << 20,
                       &why)) {
      std::fprintf(stderr, "clairfs-bench: %s\n", why.c_str());
      return 2;
    }
  }
  Probe probe(opt.no_stats ? std::string() : opt.stats, opt.block_dev);
  info.stats_path = probe.stats_path();
  info.block_dev = probe.block_dev();

  std::vector<std::vector<uint64_t>> sizes(plan.size());
  if (info.mode == Mode::kComputeOnly) {
    for (size_t i = 0; i < plan.size(); ++i) {
      sizes[i] = opt.replay_opt.compute_ns_per_byte > 0 ? SizesOf(root_fd, plan[i])
                                                        : std::vector<uint64_t>(plan[i].size(), 0);
    }
  }

  std::vector<EpochResult> results;
  bool failed = false;
  ProbeSnapshot before = probe.Take();
  info.stats_before = before.stats;
  for (int e = 0; e < opt.epochs; ++e) {
    const size_t section = static_cast<size_t>(e) % plan.size();
    const auto& paths = plan[section];
    if (opt.drop_caches != 0 && !DropCaches(opt.drop_caches)) {
      std::fprintf(stderr, "clairfs-bench: drop_caches %d: %s\n", opt.drop_caches,
                   std::strerror(errno));
      return 2;
    }
    EpochResult r;
    switch (info.mode) {
      case Mode::kThroughput:
        r = via_batch ? batch.RunEpoch(e, paths, opt.batch_samples, opt.verify)
                      : RunThroughputEpoch(e, root_fd, paths, opt.threads, opt.verify);
        break;
      case Mode::kReplay:
        r = RunReplayEpoch(e, root_fd, paths, opt.replay_opt);
        break;
      case Mode::kComputeOnly:
        r = RunComputeOnlyEpoch(e, sizes[section], opt.replay_opt);
        break;
    }
    ProbeSnapshot after = probe.Take();
    if (before.read_bytes && after.read_bytes) {
      r.device_read_bytes = *after.read_bytes - *before.read_bytes;
      r.device_read_ios = *after.read_ios - *before.read_ios;
    }
    r.stats_delta = NumericDelta(before.stats, after.stats);
    info.stats_after = after.stats;
    before = std::move(after);
    failed = failed || r.errors > 0;
    results.push_back(std::move(r));
  }
  close(root_fd);
  if (opt.json) {
    PrintJson(info, results);
  } else {
    PrintTable(info, results);
  }
  return failed ? 1 : 0;
}
