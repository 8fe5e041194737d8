#include "cache/plan.h"

#include <algorithm>
#include <numeric>
#include <thread>

namespace clairfs {

void Plan::Finalize() {
  index_.clear();
  index_.reserve(objects.size());
  chunked_.clear();
  total_bytes_ = 0;
  whole_files_ = 0;
  for (uint32_t i = 0; i < objects.size(); ++i) {
    PlanObject& o = objects[i];
    o.freq = 0;
    o.first = kNoPos;
    index_.emplace(o.key, i);
    total_bytes_ += o.bytes;
    if (o.path().size() == o.key.size()) {
      ++whole_files_;
    } else if (auto g = grids.find(std::string(o.path())); g != grids.end()) {
      chunked_.emplace(o.path(), ChunkedFileInfo{o.version, g->second});
    } else {
      chunked_.emplace(o.path(), ChunkedFileInfo{o.version, 0});  // held for peers, not read
    }
  }
  next_same.assign(sequence.size(), kNoPos);
  std::vector<uint32_t> last(objects.size(), kNoPos);
  for (uint32_t p = 0; p < sequence.size(); ++p) {
    PlanObject& o = objects[sequence[p]];
    ++o.freq;
    if (o.first == kNoPos) o.first = p;
    if (last[sequence[p]] != kNoPos) next_same[last[sequence[p]]] = p;
    last[sequence[p]] = p;
  }
}

std::shared_ptr<Plan> Plan::Clone() const {
  auto copy = std::make_shared<Plan>();
  copy->objects = objects;
  copy->sequence = sequence;
  copy->epoch_begin = epoch_begin;
  copy->chunk_size = chunk_size;
  copy->record_chunk_size = record_chunk_size;
  copy->grids = grids;
  copy->entries = entries;
  copy->range_entries = range_entries;
  copy->Finalize();
  return copy;
}

uint32_t Plan::Find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? kNoPos : it->second;
}

const Plan::ChunkedFileInfo* Plan::ChunkedFile(std::string_view path) const {
  auto it = chunked_.find(path);
  return it == chunked_.end() || it->second.chunk == 0 ? nullptr : &it->second;
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
  // Ranges must lie inside their file. Targets are in order of first appearance; their
  // errors join the list by line.
  out->targets.reserve(m.targets.size());
  for (const ManifestTarget& t : m.targets) {
    const uint32_t file = raw_to_id[t.path];
    if (file == kNoPos) {
      out->targets.push_back({});
      continue;  // the path's own error is reported
    }
    const uint64_t size = out->files[file].version.size;
    const ByteRange& r = t.range;
    if (!r.whole() && (r.offset > size || r.length > size - r.offset)) {
      ++error_count;
      if (errors.size() < m.errors.size() + 2 * ManifestParser::kMaxErrors) {
        errors.push_back({t.line, "'" + m.paths[t.path] + "': range " + std::to_string(r.offset) +
                                      "+" + std::to_string(r.length) +
                                      " ends past the end of the file (size " +
                                      std::to_string(size) + ")"});
      }
    }
    out->targets.push_back({file, r});
  }
  if (error_count > 0) return Status::Error(Code::kInvalidArgument, Report(error_count, errors));
  out->epoch_begin = m.epoch_begin;
  out->sequence = m.sequence;
  for (uint32_t s : m.sequence) out->range_entries += !m.targets[s].range.whole();
  return std::shared_ptr<const ResolvedManifest>(std::move(out));
}

Result<std::shared_ptr<Plan>> MergePlan(const Plan* base, const ResolvedManifest& m,
                                        uint64_t chunk_size, uint64_t record_chunk_size) {
  auto plan = std::make_shared<Plan>();
  plan->chunk_size = chunk_size;
  plan->record_chunk_size = record_chunk_size ? record_chunk_size : chunk_size;
  if (base) plan->grids = base->grids;
  // Each file's grid: its base's, else by whether m reads records of it.
  std::vector<uint64_t> grid_of(m.files.size(), 0);
  for (const ResolvedManifest::Target& t : m.targets) {
    if (!t.range.whole()) grid_of[t.file] = plan->record_chunk_size;
  }
  for (size_t f = 0; f < m.files.size(); ++f) {
    if (grid_of[f] == 0) grid_of[f] = plan->chunk_size;
    // A file base holds whole stays whole: one file is never both an object and chunks.
    if (base && base->Find(m.files[f].path) != kNoPos) grid_of[f] = m.files[f].version.size;
    if (m.files[f].version.size <= grid_of[f]) continue;
    auto [it, fresh] = plan->grids.try_emplace(m.files[f].path, grid_of[f]);
    grid_of[f] = it->second;
  }
  std::unordered_map<std::string, uint32_t> ids;  // key -> object id
  if (base) {
    plan->objects.reserve(base->objects.size());
    ids.reserve(base->objects.size());
    for (const PlanObject& o : base->objects) {
      ids.emplace(o.key, static_cast<uint32_t>(plan->objects.size()));
      plan->objects.push_back(PlanObject::Of(o.key, o.version));
    }
    plan->sequence = base->sequence;
    plan->epoch_begin = base->epoch_begin;
    plan->entries = base->entries;
    plan->range_entries = base->range_entries;
  }
  // Each target's objects, in offset order: positions of its entries.
  std::vector<uint32_t> target_begin(m.targets.size() + 1, 0);
  std::vector<uint32_t> target_objects;
  for (size_t t = 0; t < m.targets.size(); ++t) {
    const ResolvedManifest::Target& target = m.targets[t];
    const ResolvedManifest::File& f = m.files[target.file];
    ChunkGrid(grid_of[target.file]).ForEach(f.version.size, target.range, [&](ByteRange r) {
      std::string key = ObjectKey(f.path, r);
      auto [it, fresh] = ids.try_emplace(key, static_cast<uint32_t>(plan->objects.size()));
      if (fresh) plan->objects.push_back(PlanObject::Of(std::move(key), f.version));
      target_objects.push_back(it->second);
    });
    target_begin[t + 1] = static_cast<uint32_t>(target_objects.size());
  }
  uint64_t positions = plan->sequence.size();
  for (uint32_t s : m.sequence) positions += target_begin[s + 1] - target_begin[s];
  if (positions > ManifestParser::kMaxEntries) {
    return Status::Error(
        Code::kInvalidArgument,
        Report(1, {{m.lines, "the plan would exceed the maximum number of object reads (" +
                                 std::to_string(ManifestParser::kMaxEntries) + ")"}}));
  }
  plan->sequence.reserve(positions);
  size_t next_epoch = 0;
  for (size_t e = 0; e < m.sequence.size(); ++e) {
    while (next_epoch < m.epoch_begin.size() && m.epoch_begin[next_epoch] == e) {
      plan->epoch_begin.push_back(static_cast<uint32_t>(plan->sequence.size()));
      ++next_epoch;
    }
    const uint32_t s = m.sequence[e];
    for (uint32_t i = target_begin[s]; i < target_begin[s + 1]; ++i) {
      plan->sequence.push_back(target_objects[i]);
    }
  }
  plan->entries += m.sequence.size();
  plan->range_entries += m.range_entries;
  plan->Finalize();
  return plan;
}

Result<std::shared_ptr<Plan>> BuildPlan(const ParsedManifest& m, PathResolver& resolver,
                                        const Plan* base, uint64_t chunk_size,
                                        uint64_t record_chunk_size) {
  auto resolved = ResolveManifest(m, resolver);
  if (!resolved.ok()) return resolved.status();
  return MergePlan(base, *resolved.value(), chunk_size, record_chunk_size);
}

void PlaceObjects(Plan& plan, const PlacementLimits& limits) {
  const size_t ntiers = limits.tier_capacity.size();
  std::vector<uint32_t> order;
  order.reserve(plan.objects.size());
  for (uint32_t i = 0; i < plan.objects.size(); ++i) {
    if (plan.objects[i].freq > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const PlanObject& x = plan.objects[a];
    const PlanObject& y = plan.objects[b];
    return x.freq != y.freq ? x.freq > y.freq : x.first < y.first;
  });
  std::vector<uint64_t> used(ntiers, 0);
  plan.tier_order.assign(ntiers, {});
  for (uint32_t id : order) {
    PlanObject& o = plan.objects[id];
    o.place = kStaging;
    for (size_t t = 0; t < ntiers; ++t) {
      if (used[t] + o.bytes <= limits.tier_capacity[t]) {
        used[t] += o.bytes;
        o.place = Placement::Tier(t);
        plan.tier_order[t].push_back(id);
        break;
      }
    }
    if (o.place == kStaging && o.bytes > limits.staging_capacity) o.place = kDirect;
  }
  for (auto& ids : plan.tier_order) {
    std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
      return plan.objects[a].first < plan.objects[b].first;
    });
  }
}

PlanSummary Summarize(const Plan& plan, const PlacementLimits& limits) {
  PlanSummary s;
  s.epochs = plan.epochs();
  s.entries = plan.entries;
  s.range_entries = plan.range_entries;
  s.positions = plan.sequence.size();
  s.chunk_size = plan.chunk_size;
  s.record_chunk_size = plan.record_chunk_size;
  for (size_t t = 0; t < limits.tier_capacity.size(); ++t) {
    s.tiers.push_back({t < limits.tier_names.size() ? limits.tier_names[t] : "tier", 0, 0,
                       limits.tier_capacity[t]});
  }
  s.staging.capacity = limits.staging_capacity;
  std::unordered_map<std::string_view, bool> files;  // read files
  for (const PlanObject& o : plan.objects) {
    if (o.freq == 0) continue;
    ++s.objects;
    const bool chunk = o.path().size() != o.key.size();
    s.chunks += chunk;
    if (files.emplace(o.path(), chunk).second) {
      ++s.files;
      s.chunked_files += chunk;
    }
    s.bytes += o.bytes;
    const Placement& at = o.place;
    PlanSummary::Part* part = at.InTier() && at.tier < s.tiers.size() ? &s.tiers[at.tier]
                              : at == kDirect                         ? &s.direct
                              : at == kPeer                           ? &s.peer
                                                                      : &s.staging;
    ++part->objects;
    part->bytes += o.bytes;
    s.predicted_backing_bytes += at.InTier() ? o.bytes : at == kPeer ? 0 : o.bytes * o.freq;
  }
  return s;
}

}  // namespace clairfs
