#include "cache/plan/merge.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

namespace clairfs {

namespace {

std::atomic<uint64_t> next_serial{1};

}  // namespace

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

}  // namespace clairfs
