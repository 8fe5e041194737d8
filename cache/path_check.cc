#include "cache/path_check.h"

#include <sys/stat.h>

#include <algorithm>

namespace clairfs {
namespace {

std::string Describe(const Status& s, const struct stat& st) {
  if (!s.ok()) return s.message();
  if (S_ISDIR(st.st_mode)) return "is a directory";
  return "not a regular file";
}

// Paths checked at a time: bounds the transient state (about 600 bytes per path).
constexpr size_t kBatch = size_t{1} << 15;
// A batch smaller than this is checked on the calling thread alone: a small manifest (most
// registrations, every append of a few paths) does not pay for starting threads.
constexpr size_t kParallelFrom = size_t{1} << 10;
// PathCheckAhead waits for this many new paths before it checks them (or for Take()).
constexpr size_t kAheadBatch = size_t{1} << 13;

}  // namespace

std::vector<PathResolver> CheckResolvers(const PathResolver& resolver) {
  const size_t n = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  std::vector<PathResolver> out;
  for (size_t t = 0; t < n; ++t) out.push_back(resolver.Fork());
  return out;
}

void CheckPaths(std::span<const std::string_view> paths, std::vector<PathResolver>& resolvers,
                PathChecks* out) {
  const size_t most = std::max<size_t>(1, resolvers.size());
  out->paths.reserve(out->paths.size() + paths.size());
  struct Outcome {
    Result<std::string> path{Status::Error(Code::kUnavailable, "")};
    struct stat st {};
  };
  std::vector<Outcome> batch;
  for (size_t begin = 0; begin < paths.size(); begin += kBatch) {
    const size_t n = std::min(kBatch, paths.size() - begin);
    batch.assign(n, Outcome{});
    const size_t nthreads = n >= kParallelFrom ? most : 1;
    // Thread t checks paths begin + t, begin + t + nthreads, ...
    auto work = [&](size_t t) {
      std::vector<std::string_view> mine;
      for (size_t i = t; i < n; i += nthreads) mine.push_back(paths[begin + i]);
      std::vector<Result<std::string>> res;
      std::vector<struct stat> st;
      resolvers[t].ResolveMany(mine, true, &res, &st);
      for (size_t k = 0; k < mine.size(); ++k) {
        batch[t + k * nthreads] = {std::move(res[k]), st[k]};
      }
    };
    std::vector<std::thread> threads;
    for (size_t t = 1; t < nthreads; ++t) threads.emplace_back(work, t);
    work(0);
    for (auto& th : threads) th.join();
    for (size_t i = 0; i < n; ++i) {
      const Outcome& o = batch[i];
      const auto index = static_cast<uint32_t>(out->paths.size());
      if (!o.path.ok() || !S_ISREG(o.st.st_mode)) {
        out->errors.emplace_back(index, Describe(o.path.status(), o.st));
        out->paths.push_back({});
        continue;
      }
      const std::string_view written = paths[begin + i];
      const std::string& canonical = o.path.value();
      out->paths.push_back(
          {canonical == written ? written : out->rewritten->Add(canonical), VersionOf(o.st)});
    }
  }
}

PathCheckAhead::~PathCheckAhead() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void PathCheckAhead::Add(std::span<const std::string_view> paths) {
  if (paths.empty()) return;
  {
    std::lock_guard l(mu_);
    if (stop_) return;
    todo_.insert(todo_.end(), paths.begin(), paths.end());
    queued_ = todo_.size();
  }
  if (!worker_.joinable()) worker_ = std::thread([this] { Run(); });
  cv_.notify_all();
}

void PathCheckAhead::Run() {
  std::unique_lock l(mu_);
  for (;;) {
    cv_.wait(l, [&] {
      const size_t pending = todo_.size() - checks_.size();
      return stop_ || pending >= kAheadBatch || (flush_ && pending > 0);
    });
    if (stop_ && !flush_) return;
    if (todo_.size() == checks_.size()) return;  // flushed, stopping
    // The views are copied: Add() may grow todo_ meanwhile.
    std::vector<std::string_view> batch(todo_.begin() + checks_.size(), todo_.end());
    busy_ = true;
    l.unlock();
    CheckPaths(batch, resolvers_, &checks_);
    l.lock();
    busy_ = false;
    errors_found_ = checks_.errors.size();
    cv_.notify_all();
  }
}

size_t PathCheckAhead::errors_found() const {
  std::lock_guard l(mu_);
  return errors_found_;
}

PathChecks PathCheckAhead::Take() {
  std::unique_lock l(mu_);
  flush_ = true;
  stop_ = true;  // nothing more is queued; the worker checks what is and returns
  cv_.notify_all();
  cv_.wait(l, [&] { return !busy_ && checks_.size() == todo_.size(); });
  PathChecks out = std::move(checks_);
  todo_ = {};
  checks_ = {};
  l.unlock();
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  return out;
}

}  // namespace clairfs
