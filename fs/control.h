// ControlPlane: the files of <mount>/.clairfs/ (docs/control-interface.md), without FUSE.
//   manifest  write: a plan, validated as a whole when the writer flushes (close)
//   errors    read: the report of the last manifest commit (empty if it was accepted)
//   stats     read: JSON counters        plan  read: JSON summary of the active plan
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/manifest.h"
#include "cache/prefetcher.h"
#include "cache/stats.h"

namespace clairfs {

class ControlPlane {
 public:
  // One open of the manifest for writing. Each writer has its own parser, so concurrent
  // writers never mix their texts; commits are serialized.
  class Writer {
   public:
    explicit Writer(bool append, bool truncate) : append_(append), truncate_(truncate) {}

   private:
    friend class ControlPlane;
    std::mutex mu_;  // taken before ControlPlane::commit_mu_
    ManifestParser parser_;
    bool append_;
    bool truncate_;  // opened with O_TRUNC: even an empty text replaces the plan
    bool dirty_ = false;
    bool committed_ = false;  // something was committed through this writer
    Status last_;
  };

  ControlPlane(const Backing& backing, Prefetcher& prefetcher, Stats& stats,
               std::vector<std::string> root_aliases);

  std::unique_ptr<Writer> OpenWriter(bool append, bool truncate);
  void Write(Writer& w, std::string_view bytes);
  // Validates and installs what w wrote since its last commit. Returns the validation result;
  // an invalid manifest leaves the active plan in place. With nothing new written it returns
  // the previous result, except that at the final close (last) an O_TRUNC writer that never
  // wrote clears the plan. (Shells dup and close the descriptor before writing, so an
  // earlier flush with no data must not count.)
  Status Commit(Writer& w, bool last);

  // A JSON object text shown as "cluster" in the plan (cluster/ provides it). Before serving.
  void SetClusterInfo(std::function<std::string()> info) { cluster_info_ = std::move(info); }

  std::string StatsJson() const;
  std::string PlanJson() const;
  std::string ErrorsText() const;

 private:
  const Backing& backing_;
  Prefetcher& prefetcher_;
  Stats& stats_;
  const std::vector<std::string> aliases_;
  std::function<std::string()> cluster_info_;
  std::mutex commit_mu_;          // serializes plan building and installation
  mutable std::mutex errors_mu_;  // leaf
  std::string errors_;
};

}  // namespace clairfs
