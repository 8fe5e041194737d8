#include "cache/plan/plan.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <numeric>
#include <thread>

#include "cache/plan/radix_sort.h"

namespace clairfs {

namespace {

// A stream this long is counted by two threads (Plan::Finalize).
constexpr size_t kParallelCountFrom = size_t{1} << 23;

}  // namespace

void Plan::Finalize() {
  KeyIndex index;
  index.Reset(objects.size());
  const auto key_of = [&](uint32_t id) { return objects[id].key; };
  for (uint32_t i = 0; i < objects.size(); ++i) index.Insert(i, key_of);
  Finalize(std::move(index));
}

void Plan::Finalize(KeyIndex index) {
  assert(index.size() == objects.size());
  index_ = std::move(index);
  chunked_.clear();
  total_bytes_ = 0;
  whole_files_ = 0;
  for (PlanObject& o : objects) {
    total_bytes_ += o.bytes;
    if (o.path().size() == o.key.size()) {
      ++whole_files_;
    } else if (auto g = grids.find(std::string(o.path())); g != grids.end()) {
      chunked_.emplace(o.path(), ChunkedFileInfo{o.version, g->second});
    } else {
      chunked_.emplace(o.path(), ChunkedFileInfo{o.version, 0});  // held for peers, not read
    }
  }
  entries_ = range_entries_ = positions_ = span_ = 0;
  // Each object's reads and first reference, stream by stream. A pass over every position
  // touches one 8-byte count per object (not a whole PlanObject), and a long stream is
  // counted in two halves on two threads, each into counts of its own: 115 M positions over
  // 1.28 M objects are mostly cache misses, which two cores overlap.
  struct Count {
    uint32_t freq = 0;
    uint32_t first = kNoPos;  // lowest position
  };
  const size_t n = objects.size();
  for (PlanObject& o : objects) {
    o.freq = 0;
    o.first = kNoPos;
  }
  std::vector<Count> a, b;
  const auto count = [](const PositionList& seq, size_t begin, size_t end, std::vector<Count>& c) {
    uint32_t p = static_cast<uint32_t>(begin);
    seq.ForEachSpan(begin, end, [&](std::span<const uint32_t> span) {
      for (uint32_t id : span) {
        Count& k = c[id];
        if (k.freq++ == 0) k.first = p;  // positions ascend: the first seen is the lowest
        ++p;
      }
    });
  };
  for (PlanStream& s : streams) {
    entries_ += s.entries;
    range_entries_ += s.range_entries;
    const size_t len = s.sequence.size();
    positions_ += len;
    span_ = std::max<uint64_t>(span_, len);
    a.assign(n, Count{});
    const size_t half = len >= kParallelCountFrom ? len / 2 : len;
    if (half < len) {
      b.assign(n, Count{});
      std::thread other([&] { count(s.sequence, half, len, b); });
      count(s.sequence, 0, half, a);
      other.join();
    } else {
      count(s.sequence, 0, len, a);
    }
    uint32_t distinct = 0;
    for (size_t id = 0; id < n; ++id) {
      uint32_t f = a[id].freq, at = a[id].first;
      if (half < len && b[id].freq > 0) {
        f += b[id].freq;
        if (at == kNoPos) at = b[id].first;
      }
      if (f == 0) continue;
      ++distinct;
      objects[id].freq += f;
      objects[id].first = std::min(objects[id].first, at);
    }
    s.distinct = distinct;
  }
  dead_ = 0;
  for (const PlanObject& o : objects) dead_ += o.freq == 0;
}

uint32_t Plan::AddObject(std::string_view key, const FileVersion& version) {
  if (!own_) {
    own_ = std::make_shared<StringArena>();
    arenas.push_back(own_);
  }
  return AddObjectViewing(own_->Add(key), version);
}

std::shared_ptr<Plan> Plan::Clone() const {
  auto copy = std::make_shared<Plan>();
  copy->objects = objects;
  copy->arenas = arenas;
  copy->streams = streams;
  copy->chunk_size = chunk_size;
  copy->record_chunk_size = record_chunk_size;
  copy->grids = grids;
  copy->Finalize();
  return copy;
}

uint32_t Plan::Find(std::string_view key) const {
  return index_.Find(key, [&](uint32_t id) { return std::string_view(objects[id].key); });
}

int Plan::FindStream(std::string_view name) const {
  for (size_t i = 0; i < streams.size(); ++i) {
    if (streams[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

const Plan::ChunkedFileInfo* Plan::ChunkedFile(std::string_view path) const {
  auto it = chunked_.find(path);
  return it == chunked_.end() || it->second.chunk == 0 ? nullptr : &it->second;
}

uint32_t PlanStream::EpochOf(uint32_t pos) const {
  if (pos >= sequence.size()) return epochs();
  auto it = std::upper_bound(epoch_begin.begin(), epoch_begin.end(), pos);
  return static_cast<uint32_t>(it - epoch_begin.begin()) - 1;
}

Result<std::shared_ptr<const ResolvedManifest>> ResolveManifest(const ParsedManifest& m,
                                                                PathResolver& resolver,
                                                                PathChecks checks) {
  const size_t n = m.paths.size();
  if (checks.size() > n) checks = {};  // not this manifest's: check everything
  if (checks.size() < n) {
    auto resolvers = CheckResolvers(resolver);
    CheckPaths(std::span(m.paths).subspan(checks.size()), resolvers, &checks);
  }
  auto out = std::make_shared<ResolvedManifest>();
  out->lines = m.form == ManifestForm::kCompact ? 0 : m.lines;  // MergePlan reports no item
  std::vector<ManifestError> errors = m.errors;
  uint64_t error_count = m.error_count + checks.errors.size();
  // Both lists are in line order: the first kMaxErrors of each hold the first overall.
  for (const auto& [index, why] : checks.errors) {
    if (errors.size() >= m.errors.size() + ManifestParser::kMaxErrors) break;
    std::string text = "'";
    text.append(m.paths[index]).append("': ").append(why);
    errors.push_back({m.path_line[index], std::move(text)});
  }
  // Files: the distinct canonical paths in order of first appearance, compacted in place (two
  // written paths may name one file: "a/b" and "a/./b").
  std::vector<CheckedPath>& files = checks.paths;
  // The common case needs no index: every path is a regular file written canonically, so the
  // written paths (distinct) are the files, in order.
  bool plain = true;
  for (size_t i = 0; i < n && plain; ++i) {
    plain = files[i].ok() && files[i].path.data() == m.paths[i].data() &&
            files[i].path.size() == m.paths[i].size();
  }
  std::vector<uint32_t> raw_to_id;
  if (!plain) {
    raw_to_id.assign(n, kNoPos);
    KeyIndex canon;  // file id by canonical path
    canon.Reset(n);
    const auto canon_key = [&](uint32_t id) { return files[id].path; };
    uint32_t next = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!files[i].ok()) continue;
      if (const uint32_t id = canon.Find(files[i].path, canon_key); id != KeyIndex::kNone) {
        raw_to_id[i] = id;
        continue;
      }
      files[next] = files[i];
      raw_to_id[i] = next;
      canon.Insert(next++, canon_key);
    }
    files.resize(next);
  }
  out->files = std::move(files);
  // Ranges must lie inside their file. Targets are in order of first appearance; their
  // errors join the list by line.
  out->targets.reserve(m.targets.size());
  for (const ManifestTarget& t : m.targets) {
    const uint32_t file = plain ? t.path : raw_to_id[t.path];
    if (file == kNoPos) {
      out->targets.push_back({});
      continue;  // the path's own error is reported
    }
    const uint64_t size = out->files[file].version.size;
    const ByteRange& r = t.range;
    if (!r.whole() && (r.offset > size || r.length > size - r.offset)) {
      ++error_count;
      if (errors.size() < m.errors.size() + 2 * ManifestParser::kMaxErrors) {
        std::string text = "'";
        text.append(m.paths[t.path])
            .append("': range " + std::to_string(r.offset) + "+" + std::to_string(r.length) +
                    " ends past the end of the file (size " + std::to_string(size) + ")");
        errors.push_back({t.line, std::move(text)});
      }
    }
    out->targets.push_back({file, r});
  }
  if (error_count > 0) {
    return Status::Error(Code::kInvalidArgument,
                         ManifestReport(error_count, std::move(errors), m.form));
  }
  out->stream = m.stream;
  out->files_as_written = plain;
  out->arenas = {m.arena, std::move(checks.rewritten)};
  out->epoch_begin = m.epoch_begin;
  out->sequence = m.sequence;  // shares its storage
  // Entries naming a range, counted only when some target is one (a 90-epoch plan of whole
  // files has 115 M entries to skip).
  if (std::any_of(m.targets.begin(), m.targets.end(),
                  [](const ManifestTarget& t) { return !t.range.whole(); })) {
    m.sequence.ForEachBlock([&](std::span<const uint32_t> b) {
      for (uint32_t s : b) out->range_entries += !m.targets[s].range.whole();
    });
  }
  return std::shared_ptr<const ResolvedManifest>(std::move(out));
}

namespace {

std::atomic<uint64_t> next_serial{1};

}  // namespace

void Plan::DropDeadObjects() {
  std::vector<uint32_t> remap(objects.size(), kNoPos);
  std::vector<PlanObject> live;
  live.reserve(objects.size() - dead_objects());
  auto keys = std::make_shared<StringArena>();
  for (uint32_t i = 0; i < objects.size(); ++i) {
    if (objects[i].freq == 0) continue;
    remap[i] = static_cast<uint32_t>(live.size());
    live.push_back(objects[i]);
    live.back().key = keys->Add(live.back().key);
  }
  objects = std::move(live);
  arenas = {keys};
  own_ = std::move(keys);
  for (PlanStream& s : streams) s.sequence.Transform([&](uint32_t id) { return remap[id]; });
  std::unordered_map<std::string_view, bool> chunked;  // files some live chunk belongs to
  for (const PlanObject& o : objects) {
    if (o.path().size() != o.key.size()) chunked.emplace(o.path(), true);
  }
  std::erase_if(grids, [&](const auto& g) { return !chunked.contains(g.first); });
  Finalize();
}

Result<std::shared_ptr<Plan>> MergePlan(const Plan* base,
                                        std::shared_ptr<const ResolvedManifest> mp,
                                        StreamChange change, uint64_t chunk_size,
                                        uint64_t record_chunk_size, KeyIndex* files_index) {
  const ResolvedManifest& m = *mp;
  const std::string name = m.stream.empty() ? std::string(kDefaultStream) : m.stream;
  auto plan = std::make_shared<Plan>();
  plan->chunk_size = chunk_size;
  plan->record_chunk_size = record_chunk_size ? record_chunk_size : chunk_size;
  if (base) plan->grids = base->grids;
  // Each file's grid: its base's, else by whether m reads records of it.
  std::vector<uint64_t> grid_of(m.files.size(), 0);
  for (const ResolvedManifest::Target& t : m.targets) {
    if (!t.range.whole()) grid_of[t.file] = plan->record_chunk_size;
  }
  size_t known = 0;  // files base holds whole
  for (size_t f = 0; f < m.files.size(); ++f) {
    if (grid_of[f] == 0) grid_of[f] = plan->chunk_size;
    // A file base holds whole stays whole: one file is never both an object and chunks.
    if (base && base->Find(m.files[f].path) != kNoPos) {
      grid_of[f] = m.files[f].version.size;
      ++known;
    }
    if (m.files[f].version.size <= grid_of[f]) continue;
    auto [it, fresh] = plan->grids.try_emplace(std::string(m.files[f].path), grid_of[f]);
    grid_of[f] = it->second;
  }
  // Keys: base's stay where they are; a new whole file's key is its path in m's arenas, which
  // the plan keeps when most of m's files are new, else (a few new files beside many known
  // ones) the new keys are copied, so that a small change does not pin a big manifest's paths.
  if (base) plan->arenas = base->arenas;
  const bool adopt = 2 * known <= m.files.size();
  if (adopt) plan->arenas.insert(plan->arenas.end(), m.arenas.begin(), m.arenas.end());
  // Objects: base's, then m's new ones (reserved in full: no reallocation peak).
  size_t bound = base ? base->objects.size() : 0;
  for (const ResolvedManifest::Target& t : m.targets) {
    const uint64_t size = m.files[t.file].version.size;
    bound += ChunkGrid(grid_of[t.file]).Count(size, t.range);
  }
  plan->objects.reserve(bound);
  // Each target's objects, in offset order: positions of its entries.
  std::vector<uint32_t> target_begin(m.targets.size() + 1, 0);
  std::vector<uint32_t> target_objects;
  target_objects.reserve(m.targets.size());
  bool one_each = true;  // every target is one object
  bool identity = true;  // target t is object t (a first plan's usual case)
  KeyIndex ids;          // key -> object id, for every object: the plan's index in the end
  // Object t is file t (each target t a whole file t in one object): the caller's index of
  // the files is the plan's.
  bool indexed = files_index && !base && adopt && files_index->size() == m.files.size() &&
                 m.targets.size() == m.files.size();
  for (size_t t = 0; indexed && t < m.targets.size(); ++t) {
    const ResolvedManifest::Target& target = m.targets[t];
    indexed =
        target.file == t && target.range.whole() && m.files[t].version.size <= grid_of[target.file];
  }
  if (indexed) {
    ids = std::move(*files_index);
  } else {
    ids.Reset(bound);
  }
  {
    const auto key_of = [&](uint32_t id) { return plan->objects[id].key; };
    if (base) {
      for (const PlanObject& o : base->objects) {
        ids.Insert(plan->AddObjectViewing(o.key, o.version), key_of);
      }
    }
    std::string chunk_key;
    for (size_t t = 0; t < m.targets.size(); ++t) {
      const ResolvedManifest::Target& target = m.targets[t];
      const ResolvedManifest::File& f = m.files[target.file];
      ChunkGrid(grid_of[target.file]).ForEach(f.version.size, target.range, [&](ByteRange r) {
        uint32_t id;
        if (indexed) {
          id = plan->AddObjectViewing(f.path, f.version);  // indexed as file t already
        } else if (adopt && r.whole()) {
          // Added, then looked up and indexed in one probe; taken back if it was known.
          id = plan->AddObjectViewing(f.path, f.version);
          if (const uint32_t known = ids.Insert(id, key_of); known != id) {
            plan->objects.pop_back();
            id = known;
          }
        } else {
          std::string_view key = f.path;
          if (!r.whole()) key = chunk_key = ObjectKey(f.path, r);
          id = ids.Find(key, key_of);
          if (id == KeyIndex::kNone) {  // a copied key: only when it is new
            id = plan->AddObject(key, f.version);
            ids.Insert(id, key_of);
          }
        }
        target_objects.push_back(id);
        identity = identity && id == target_objects.size() - 1;
      });
      target_begin[t + 1] = static_cast<uint32_t>(target_objects.size());
      one_each = one_each && target_begin[t + 1] == t + 1;
    }
  }
  // Streams: base's, with the named one replaced, extended or created.
  PlanStream stream;
  if (base) {
    for (const PlanStream& s : base->streams) {
      if (s.name == name) {
        if (change == StreamChange::kAppend) stream = s;  // shares its positions
      } else {
        plan->streams.push_back(s);
      }
    }
  }
  if (stream.serial == 0) {
    stream.name = name;
    stream.serial = next_serial.fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t positions = stream.sequence.size();
  if (one_each) {
    positions += m.sequence.size();
  } else {
    m.sequence.ForEachBlock([&](std::span<const uint32_t> b) {
      for (uint32_t s : b) positions += target_begin[s + 1] - target_begin[s];
    });
  }
  if (positions > ManifestParser::kMaxEntries) {
    return Status::Error(
        Code::kInvalidArgument,
        ManifestReport(1,
                       {{m.lines, "the stream would exceed the maximum number of object reads (" +
                                      std::to_string(ManifestParser::kMaxEntries) + ")"}}));
  }
  const uint64_t offset = stream.sequence.size();
  stream.entries += m.sequence.size();
  stream.range_entries += m.range_entries;
  const bool keep = change == StreamChange::kAppend || !m.sequence.empty();
  if (one_each) {
    // The common case (files no larger than a chunk): m's positions are rewritten in place
    // when nothing else holds them.
    for (uint32_t e : m.epoch_begin)
      stream.epoch_begin.push_back(static_cast<uint32_t>(offset + e));
    PositionList seq = m.sequence;
    mp.reset();  // m is dangling from here on
    if (!identity) seq.Transform([&](uint32_t t) { return target_objects[t]; });
    if (stream.sequence.empty()) {
      stream.sequence = std::move(seq);
    } else {
      stream.sequence.Append(seq);
    }
  } else {
    size_t next_epoch = 0;
    uint64_t e = 0;
    m.sequence.ForEachBlock([&](std::span<const uint32_t> b) {
      for (uint32_t s : b) {
        while (next_epoch < m.epoch_begin.size() && m.epoch_begin[next_epoch] == e) {
          stream.epoch_begin.push_back(static_cast<uint32_t>(stream.sequence.size()));
          ++next_epoch;
        }
        for (uint32_t i = target_begin[s]; i < target_begin[s + 1]; ++i) {
          stream.sequence.push_back(target_objects[i]);
        }
        ++e;
      }
    });
  }
  if (keep) plan->streams.push_back(std::move(stream));
  std::sort(plan->streams.begin(), plan->streams.end(),
            [](const PlanStream& a, const PlanStream& b) { return a.name < b.name; });
  plan->Finalize(std::move(ids));
  if (plan->dead_objects() > plan->objects.size() / 2) plan->DropDeadObjects();
  return plan;
}

Status StreamRoom(const Plan* base, const ResolvedManifest& m, StreamChange change,
                  uint32_t max_streams, std::span<const std::string_view> reserved) {
  const bool adds = change == StreamChange::kAppend || !m.sequence.empty();
  const std::string name = m.stream.empty() ? std::string(kDefaultStream) : m.stream;
  const auto in_base = [&](std::string_view n) { return base && base->FindStream(n) >= 0; };
  size_t taken = base ? base->streams.size() : 0;
  for (std::string_view r : reserved) {
    if (r == name) return Status::Ok();
    if (!in_base(r)) ++taken;
  }
  if (!adds || taken < max_streams || in_base(name)) return Status::Ok();
  return Status::Error(
      Code::kInvalidArgument,
      ManifestReport(1, {{0, "stream '" + name + "' would be stream " + std::to_string(taken + 1) +
                                 "; the plan holds at most " + std::to_string(max_streams) +
                                 " (cache.max_streams): remove a stream (clairfs.unregister, or a "
                                 "replacement naming it with no entries) or wait until an idle one "
                                 "leaves (cache.stream_idle)"}}));
}

std::shared_ptr<Plan> RemoveStream(const Plan& base, std::string_view name) {
  if (base.FindStream(name) < 0) return nullptr;
  auto plan = std::make_shared<Plan>();
  plan->arenas = base.arenas;
  plan->objects.reserve(base.objects.size());
  for (const PlanObject& o : base.objects) plan->AddObjectViewing(o.key, o.version);
  for (const PlanStream& s : base.streams) {
    if (s.name != name) plan->streams.push_back(s);
  }
  plan->chunk_size = base.chunk_size;
  plan->record_chunk_size = base.record_chunk_size;
  plan->grids = base.grids;
  plan->Finalize();
  if (plan->dead_objects() > plan->objects.size() / 2) plan->DropDeadObjects();
  return plan;
}

Result<std::shared_ptr<Plan>> BuildPlan(const ParsedManifest& m, PathResolver& resolver,
                                        const Plan* base, StreamChange change, uint64_t chunk_size,
                                        uint64_t record_chunk_size) {
  auto resolved = ResolveManifest(m, resolver);
  if (!resolved.ok()) return resolved.status();
  return MergePlan(base, std::move(resolved.value()), change, chunk_size, record_chunk_size);
}

void PlaceObjects(Plan& plan, const PlacementLimits& limits) {
  const size_t ntiers = limits.tier_capacity.size();
  std::vector<uint32_t> order;
  order.reserve(plan.objects.size());
  for (uint32_t i = 0; i < plan.objects.size(); ++i) {
    if (plan.objects[i].freq > 0) order.push_back(i);
  }
  // Sorted on keys of their own (most read first, then by first reference, then by id), not
  // through the objects: a big plan's sort then runs in the caches.
  std::vector<std::pair<uint64_t, uint32_t>> keyed;
  keyed.reserve(order.size());
  for (uint32_t id : order) {
    const PlanObject& o = plan.objects[id];
    keyed.emplace_back((uint64_t{~o.freq} << 32) | o.first, id);
  }
  StableSortByKey(keyed);  // ids ascend in keyed: equal keys stay by id, as pairs sort
  for (size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].second;
  keyed = {};
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
  // Each tier's objects by (first reference, id). Already so when every object is read
  // equally often (each file once an epoch): the placement order was by first reference.
  std::vector<std::pair<uint64_t, uint32_t>> by_first;  // (first << 32 | id, id): unique keys
  for (auto& ids : plan.tier_order) {
    by_first.clear();
    by_first.reserve(ids.size());
    for (uint32_t id : ids) by_first.emplace_back(uint64_t{plan.objects[id].first} << 32 | id, id);
    if (std::is_sorted(by_first.begin(), by_first.end())) continue;
    StableSortByKey(by_first);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = by_first[i].second;
  }
}

PlanSummary Summarize(const Plan& plan, const PlacementLimits& limits) {
  PlanSummary s;
  for (const PlanStream& st : plan.streams) s.epochs = std::max<uint64_t>(s.epochs, st.epochs());
  s.streams = plan.streams.size();
  s.entries = plan.entries();
  s.range_entries = plan.range_entries();
  s.positions = plan.positions();
  s.chunk_size = plan.chunk_size;
  s.record_chunk_size = plan.record_chunk_size;
  for (size_t t = 0; t < limits.tier_capacity.size(); ++t) {
    s.tiers.push_back({t < limits.tier_names.size() ? limits.tier_names[t] : "tier", 0, 0,
                       limits.tier_capacity[t]});
  }
  s.staging.capacity = limits.staging_capacity;
  KeyIndex chunked;  // chunked files read, by a chunk's object id
  chunked.Reset(plan.chunked_files());
  const auto path_of = [&](uint32_t id) { return plan.objects[id].path(); };
  for (uint32_t id = 0; id < plan.objects.size(); ++id) {
    const PlanObject& o = plan.objects[id];
    if (o.freq == 0) continue;
    ++s.objects;
    const bool chunk = o.path().size() != o.key.size();
    s.chunks += chunk;
    if (!chunk || chunked.Insert(id, path_of) == id) {  // a whole file, or a new chunked one
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
    if (at.InTier() && o.kept_in < s.tiers.size()) {
      ++s.tiers[o.kept_in].kept_objects;
      s.tiers[o.kept_in].kept_bytes += o.bytes;
    }
    s.predicted_backing_bytes += at.InTier() ? o.bytes : at == kPeer ? 0 : o.bytes * o.freq;
  }
  return s;
}

}  // namespace clairfs
