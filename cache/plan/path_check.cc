#include "cache/plan/path_check.h"

#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <thread>

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
  // Called once per write() of a manifest, each adding a few thousand paths: the outcomes grow
  // geometrically, never by exactly what is added (which would copy them all at every call).
  if (const size_t need = out->paths.size() + paths.size(); need > out->paths.capacity()) {
    out->paths.reserve(std::max(need, 2 * out->paths.capacity()));
  }
  // What a thread found that is not a plain outcome: a bad path, or a canonical path other
  // than the one written (stored once the threads are done: the arena has one writer).
  struct Bad {
    uint32_t i;
    std::string why;
  };
  struct Rewritten {
    uint32_t i;
    std::string canonical;
    FileVersion version;
  };
  for (size_t begin = 0; begin < paths.size(); begin += kBatch) {
    const size_t n = std::min(kBatch, paths.size() - begin);
    const size_t base = out->paths.size();
    out->paths.resize(base + n);  // each thread fills its own elements
    const size_t nthreads = n >= kParallelFrom ? most : 1;
    std::vector<std::vector<Bad>> bad(nthreads);
    std::vector<std::vector<Rewritten>> rewritten(nthreads);
    // Thread t checks the paths whose directory (as written) hashes to t, so that each
    // directory is opened by one thread per batch (Backing::LstatMany opens each directory of
    // its batch once): a manifest checked in many small batches, one per write(), opens each
    // directory once per batch, not once per thread and batch.
    std::vector<std::vector<uint32_t>> index(nthreads);
    for (size_t i = 0; i < n; ++i) {
      const std::string_view p = paths[begin + i];
      const size_t slash = p.rfind('/');
      const size_t t = nthreads == 1 ? 0
                                     : std::hash<std::string_view>{}(slash == std::string_view::npos
                                                                         ? std::string_view()
                                                                         : p.substr(0, slash)) %
                                           nthreads;
      index[t].push_back(static_cast<uint32_t>(i));
    }
    // A few large directories (a flat dataset) would leave threads idle: then round robin.
    size_t largest = 0;
    for (const auto& x : index) largest = std::max(largest, x.size());
    if (nthreads > 1 && largest > 2 * (n / nthreads)) {
      for (auto& x : index) x.clear();
      for (size_t i = 0; i < n; ++i) index[i % nthreads].push_back(static_cast<uint32_t>(i));
    }
    auto work = [&](size_t t) {
      std::vector<std::string_view> mine;
      mine.reserve(index[t].size());
      for (uint32_t i : index[t]) mine.push_back(paths[begin + i]);
      std::vector<Result<std::string>> res;
      std::vector<struct stat> st;
      resolvers[t].ResolveMany(mine, true, &res, &st);
      for (size_t k = 0; k < mine.size(); ++k) {
        const uint32_t i = index[t][k];
        if (!res[k].ok() || !S_ISREG(st[k].st_mode)) {
          bad[t].push_back({i, Describe(res[k].status(), st[k])});
        } else if (res[k].value() == mine[k]) {
          out->paths[base + i] = {mine[k], VersionOf(st[k])};
        } else {
          rewritten[t].push_back({i, std::move(res[k].value()), VersionOf(st[k])});
        }
      }
    };
    std::vector<std::thread> threads;
    for (size_t t = 1; t < nthreads; ++t) threads.emplace_back(work, t);
    work(0);
    for (auto& th : threads) th.join();
    std::vector<Bad> errors;
    for (size_t t = 0; t < nthreads; ++t) {
      for (Rewritten& r : rewritten[t]) {
        out->paths[base + r.i] = {out->rewritten->Add(r.canonical), r.version};
      }
      std::move(bad[t].begin(), bad[t].end(), std::back_inserter(errors));
    }
    std::sort(errors.begin(), errors.end(), [](const Bad& a, const Bad& b) { return a.i < b.i; });
    for (Bad& e : errors)
      out->errors.emplace_back(static_cast<uint32_t>(base + e.i), std::move(e.why));
  }
}

}  // namespace clairfs
