#include "cache/plan.h"

#include <algorithm>
#include <numeric>
#include <thread>

namespace clairfs {

void Plan::Finalize() {
  index_.clear();
  index_.reserve(files.size());
  total_bytes_ = 0;
  for (uint32_t i = 0; i < files.size(); ++i) {
    files[i].freq = 0;
    files[i].first = kNoPos;
    index_.emplace(files[i].path, i);
    total_bytes_ += files[i].version.size;
  }
  next_same.assign(sequence.size(), kNoPos);
  std::vector<uint32_t> last(files.size(), kNoPos);
  for (uint32_t p = 0; p < sequence.size(); ++p) {
    PlanFile& f = files[sequence[p]];
    ++f.freq;
    if (f.first == kNoPos) f.first = p;
    if (last[sequence[p]] != kNoPos) next_same[last[sequence[p]]] = p;
    last[sequence[p]] = p;
  }
}

std::shared_ptr<Plan> Plan::Clone() const {
  auto copy = std::make_shared<Plan>();
  copy->files = files;
  copy->sequence = sequence;
  copy->epoch_begin = epoch_begin;
  copy->Finalize();
  return copy;
}

uint32_t Plan::Find(std::string_view path) const {
  auto it = index_.find(path);
  return it == index_.end() ? kNoPos : it->second;
}

uint32_t Plan::EpochOf(uint32_t pos) const {
  if (pos >= sequence.size()) return epochs();
  auto it = std::upper_bound(epoch_begin.begin(), epoch_begin.end(), pos);
  return static_cast<uint32_t>(it - epoch_begin.begin()) - 1;
}

namespace {

std::string Describe(const Status& s, const struct stat* st) {
  if (!s.ok()) return s.message();
  if (S_ISDIR(st->st_mode)) return "is a directory";
  return "not a regular file";
}

}  // namespace

namespace {

std::string Report(uint64_t error_count, std::vector<ManifestError> errors) {
  std::stable_sort(errors.begin(), errors.end(),
                   [](const auto& a, const auto& b) { return a.line < b.line; });
  std::string report = "manifest rejected: " + std::to_string(error_count) +
                       (error_count == 1 ? " error\n" : " errors\n");
  const size_t shown = std::min(errors.size(), ManifestParser::kMaxErrors);
  for (size_t i = 0; i < shown; ++i) {
    report +=
        "line " + std::to_string(errors[i].line) + ": " + EscapeForReport(errors[i].message) + "\n";
  }
  if (error_count > shown) {
    report += '(';
    report += std::to_string(error_count - shown);
    report += " more)\n";
  }
  return report;
}

}  // namespace

Result<std::shared_ptr<const ResolvedManifest>> ResolveManifest(const ParsedManifest& m,
                                                                PathResolver& resolver) {
  auto out = std::make_shared<ResolvedManifest>();
  out->lines = m.lines;
  out->files.reserve(m.paths.size());  // no reallocation: canon keeps views
  std::unordered_map<std::string_view, uint32_t> canon;
  canon.reserve(m.paths.size());
  std::vector<ManifestError> errors = m.errors;
  uint64_t error_count = m.error_count;
  std::vector<uint32_t> raw_to_id(m.paths.size(), kNoPos);
  // Resolving means a few system calls per path: batches are resolved by several threads, each
  // with its own resolver, then merged in manifest order, so the result does not depend on
  // the thread count.
  struct Resolved {
    Result<std::string> path{Status::Error(Code::kUnavailable, "")};
    FileVersion version;
    bool regular = false;
    std::string why;  // when not a regular file
  };
  constexpr size_t kBatch = 1 << 16;
  const size_t nthreads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  std::vector<PathResolver> resolvers;
  for (size_t t = 0; t < nthreads; ++t) resolvers.push_back(resolver.Fork());
  std::vector<Resolved> batch;
  for (size_t begin = 0; begin < m.paths.size(); begin += kBatch) {
    const size_t n = std::min(kBatch, m.paths.size() - begin);
    batch.assign(n, Resolved{});
    auto work = [&](size_t t) {
      for (size_t i = t; i < n; i += nthreads) {
        struct stat st {};
        Resolved& r = batch[i];
        r.path = resolvers[t].Resolve(m.paths[begin + i], true, &st);
        r.regular = r.path.ok() && S_ISREG(st.st_mode);
        if (r.regular) {
          r.version = VersionOf(st);
        } else {
          r.why = Describe(r.path.status(), &st);
        }
      }
    };
    std::vector<std::thread> threads;
    for (size_t t = 1; t < std::min(nthreads, n); ++t) threads.emplace_back(work, t);
    work(0);
    for (auto& th : threads) th.join();
    for (size_t i = 0; i < n; ++i) {
      Resolved& r = batch[i];
      if (!r.regular) {
        ++error_count;
        // Both lists are in line order: the first kMaxErrors of each hold the first overall.
        if (errors.size() < m.errors.size() + ManifestParser::kMaxErrors) {
          errors.push_back({m.path_line[begin + i], "'" + m.paths[begin + i] + "': " + r.why});
        }
        continue;
      }
      auto it = canon.find(r.path.value());
      if (it != canon.end()) {
        raw_to_id[begin + i] = it->second;
        continue;
      }
      out->files.push_back({std::move(r.path.value()), r.version});
      raw_to_id[begin + i] = static_cast<uint32_t>(out->files.size() - 1);
      canon.emplace(out->files.back().path, raw_to_id[begin + i]);
    }
  }
  if (error_count > 0) return Status::Error(Code::kInvalidArgument, Report(error_count, errors));
  out->epoch_begin = m.epoch_begin;
  out->sequence.reserve(m.sequence.size());
  for (uint32_t s : m.sequence) out->sequence.push_back(raw_to_id[s]);
  return std::shared_ptr<const ResolvedManifest>(std::move(out));
}

Result<std::shared_ptr<Plan>> MergePlan(const Plan* base, const ResolvedManifest& m) {
  const size_t base_entries = base ? base->sequence.size() : 0;
  if (base_entries + m.sequence.size() > ManifestParser::kMaxEntries) {
    return Status::Error(
        Code::kInvalidArgument,
        Report(1, {{m.lines, "the plan would exceed the maximum number of entries"}}));
  }
  auto plan = std::make_shared<Plan>();
  const size_t base_files = base ? base->files.size() : 0;
  plan->files.reserve(base_files + m.files.size());  // no reallocation: canon keeps views
  std::unordered_map<std::string_view, uint32_t> canon;
  if (base) {
    canon.reserve(base_files);
    for (const PlanFile& f : base->files) {
      plan->files.push_back({f.path, f.version});
      canon.emplace(plan->files.back().path, static_cast<uint32_t>(plan->files.size() - 1));
    }
    plan->sequence = base->sequence;
    plan->epoch_begin = base->epoch_begin;
  }
  std::vector<uint32_t> id(m.files.size());
  for (size_t i = 0; i < m.files.size(); ++i) {
    auto it = base ? canon.find(m.files[i].path) : canon.end();
    if (it != canon.end()) {
      id[i] = it->second;
    } else {
      plan->files.push_back({m.files[i].path, m.files[i].version});
      id[i] = static_cast<uint32_t>(plan->files.size() - 1);
    }
  }
  const auto offset = static_cast<uint32_t>(plan->sequence.size());
  for (uint32_t b : m.epoch_begin) plan->epoch_begin.push_back(offset + b);
  plan->sequence.reserve(plan->sequence.size() + m.sequence.size());
  for (uint32_t s : m.sequence) plan->sequence.push_back(id[s]);
  plan->Finalize();
  return plan;
}

Result<std::shared_ptr<Plan>> BuildPlan(const ParsedManifest& m, PathResolver& resolver,
                                        const Plan* base) {
  auto resolved = ResolveManifest(m, resolver);
  if (!resolved.ok()) return resolved.status();
  return MergePlan(base, *resolved.value());
}

void PlaceFiles(Plan& plan, const PlacementLimits& limits) {
  const size_t ntiers = limits.tier_capacity.size();
  std::vector<uint32_t> order;
  order.reserve(plan.files.size());
  for (uint32_t i = 0; i < plan.files.size(); ++i) {
    if (plan.files[i].freq > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const PlanFile& x = plan.files[a];
    const PlanFile& y = plan.files[b];
    return x.freq != y.freq ? x.freq > y.freq : x.first < y.first;
  });
  std::vector<uint64_t> used(ntiers, 0);
  plan.tier_order.assign(ntiers, {});
  for (uint32_t id : order) {
    PlanFile& f = plan.files[id];
    f.place = kStaging;
    const uint64_t size = f.version.size;
    if (size > limits.max_file_size) {
      f.place = kDirect;
      continue;
    }
    for (size_t t = 0; t < ntiers; ++t) {
      if (used[t] + size <= limits.tier_capacity[t]) {
        used[t] += size;
        f.place = Placement::Tier(t);
        plan.tier_order[t].push_back(id);
        break;
      }
    }
    if (f.place == kStaging && size > limits.staging_capacity) f.place = kDirect;
  }
  for (auto& ids : plan.tier_order) {
    std::sort(ids.begin(), ids.end(),
              [&](uint32_t a, uint32_t b) { return plan.files[a].first < plan.files[b].first; });
  }
}

PlanSummary Summarize(const Plan& plan, const PlacementLimits& limits) {
  PlanSummary s;
  s.epochs = plan.epochs();
  s.entries = plan.sequence.size();
  for (size_t t = 0; t < limits.tier_capacity.size(); ++t) {
    s.tiers.push_back({t < limits.tier_names.size() ? limits.tier_names[t] : "tier", 0, 0,
                       limits.tier_capacity[t]});
  }
  s.staging.capacity = limits.staging_capacity;
  for (const PlanFile& f : plan.files) {
    if (f.freq == 0) continue;
    ++s.files;
    s.bytes += f.version.size;
    const uint64_t size = f.version.size;
    const Placement& at = f.place;
    PlanSummary::Part* part = at.InTier() && at.tier < s.tiers.size() ? &s.tiers[at.tier]
                              : at == kDirect                         ? &s.direct
                              : at == kPeer                           ? &s.peer
                                                                      : &s.staging;
    ++part->files;
    part->bytes += size;
    s.predicted_backing_bytes += at.InTier() ? size : at == kPeer ? 0 : size * f.freq;
  }
  return s;
}

}  // namespace clairfs
