// Helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/backing/backing.h"
#include "cache/backing/resolver.h"
#include "cache/base/object.h"
#include "cache/manifest/manifest.h"
#include "cache/plan/merge.h"
#include "cache/plan/plan.h"
#include "cache/plan/resolve.h"

namespace clairfs::testing {

// Polls pred every 2 ms until it holds (true) or limit passed (false): a wait on a condition
// with a deadline, never a sleep standing in for one.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// A sealed blob holding data, as if read from a backing file of that size and mtime.
inline BlobPtr MakeBlob(const std::string& data, int64_t mtime = 1) {
  auto b = Blob::Allocate(data.size(), {data.size(), mtime});
  std::copy(data.begin(), data.end(), b->mutable_data());
  b->Seal();
  return b;
}

// ResolveManifest then MergePlan: the plan of m over base, as the Registrar makes it (without
// its check of the room for streams).
inline Result<std::shared_ptr<Plan>> BuildPlan(const ParsedManifest& m, PathResolver& resolver,
                                               const Plan* base, StreamChange change,
                                               uint64_t chunk_size,
                                               uint64_t record_chunk_size = 0) {
  auto resolved = ResolveManifest(m, resolver);
  if (!resolved.ok()) return resolved.status();
  return MergePlan(base, std::move(resolved.value()), change, chunk_size, record_chunk_size);
}

// The plan of a manifest with an "#epoch" section per element of epochs, whose entries are
// name(i) for each i, registering stream (empty: "default"); appended to base's stream when
// base is given. A failure to build fails the test.
inline std::shared_ptr<Plan> PlanOfEpochs(const Backing& backing,
                                          const std::vector<std::vector<int>>& epochs,
                                          const std::function<std::string(int)>& name,
                                          const Plan* base = nullptr,
                                          uint64_t chunk_size = 1ull << 30,
                                          const std::string& stream = "",
                                          StreamChange change = StreamChange::kReplace) {
  std::string text = stream.empty() ? "" : "#stream " + stream + "\n";
  for (const auto& e : epochs) {
    text += "#epoch\n";
    for (int i : e) text += name(i) + "\n";
  }
  ManifestParser p;
  p.Feed(text);
  PathResolver resolver(backing, {});
  if (base && stream.empty()) change = StreamChange::kAppend;
  auto plan = BuildPlan(std::move(p).Finish(), resolver, base, change, chunk_size);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? plan.value() : nullptr;
}

// A fresh directory under /tmp, removed with everything in it when the object dies.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/clairfs-unit.XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace clairfs::testing
