#include "cache/plan/merge.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "cache/manifest/manifest.h"

namespace clairfs {

namespace {

std::atomic<uint64_t> next_serial{1};

// The objects each of m's targets reads, in offset order: the positions of its entries.
struct TargetObjects {
  std::vector<uint32_t> begin;  // target t reads ids[begin[t]] up to ids[begin[t + 1]]
  std::vector<uint32_t> ids;    // object ids
  bool one_each = true;         // every target is one object
  bool identity = true;         // target t is object t (a first plan's usual case)
  KeyIndex index;               // key -> object id, for every object: the plan's index
};

// Each of m's files' grid: the size of the chunks its objects are cut in. A file base holds
// whole stays whole (its grid is its size: one file is never both an object and chunks). A file
// larger than its grid keeps the grid plan.grids has for it (base's), else takes
// plan.record_chunk_size if some target of m reads a range of it, plan.chunk_size if none does,
// and is entered in plan.grids. known: set to how many of m's files base holds whole.
std::vector<uint64_t> FileGrids(Plan& plan, const Plan* base, const ResolvedManifest& m,
                                size_t& known) {
  std::vector<uint64_t> grid_of(m.files.size(), 0);
  for (const ResolvedManifest::Target& t : m.targets) {
    if (!t.range.whole()) grid_of[t.file] = plan.record_chunk_size;
  }
  known = 0;
  for (size_t f = 0; f < m.files.size(); ++f) {
    if (grid_of[f] == 0) grid_of[f] = plan.chunk_size;
    if (base && base->Find(m.files[f].path) != kNoPos) {
      grid_of[f] = m.files[f].version.size;
      ++known;
    }
    if (m.files[f].version.size <= grid_of[f]) continue;
    auto [it, fresh] = plan.grids.try_emplace(std::string(m.files[f].path), grid_of[f]);
    grid_of[f] = it->second;
  }
  return grid_of;
}

// Whether each target t of m reads the whole of file t, in one object: then with no base, the
// plan's objects are m's files in order, and an index of the files' paths is the plan's.
bool FilesAreObjects(const ResolvedManifest& m, const std::vector<uint64_t>& grid_of) {
  if (m.targets.size() != m.files.size()) return false;
  for (size_t t = 0; t < m.targets.size(); ++t) {
    const ResolvedManifest::Target& target = m.targets[t];
    if (target.file != t || !target.range.whole() || m.files[t].version.size > grid_of[t]) {
      return false;
    }
  }
  return true;
}

// Adds the plan's objects: base's (same ids), then each target's that neither base nor an
// earlier target has. adopt: a new whole file's key views its path in m's arenas (which
// plan.arenas holds), else it is copied into the plan's own arena, as a chunk's key always is.
// files_index: as MergePlan's.
TargetObjects AddObjects(Plan& plan, const Plan* base, const ResolvedManifest& m,
                         const std::vector<uint64_t>& grid_of, bool adopt, KeyIndex* files_index) {
  // Reserved in full: no reallocation peak.
  size_t bound = base ? base->objects.size() : 0;
  for (const ResolvedManifest::Target& t : m.targets) {
    bound += ChunkGrid(grid_of[t.file]).Count(m.files[t.file].version.size, t.range);
  }
  plan.objects.reserve(bound);
  TargetObjects out;
  out.begin.assign(m.targets.size() + 1, 0);
  out.ids.reserve(m.targets.size());
  const bool indexed = files_index && !base && adopt && files_index->size() == m.files.size() &&
                       FilesAreObjects(m, grid_of);
  if (indexed) {
    out.index = std::move(*files_index);
  } else {
    out.index.Reset(bound);
  }
  KeyIndex& index = out.index;
  const auto key_of = [&](uint32_t id) { return plan.objects[id].key; };
  if (base) {
    for (const PlanObject& o : base->objects) {
      index.Insert(plan.AddObjectViewing(o.key, o.version), key_of);
    }
  }
  bool one_each = true, identity = true;
  std::string chunk_key;
  for (size_t t = 0; t < m.targets.size(); ++t) {
    const ResolvedManifest::Target& target = m.targets[t];
    const ResolvedManifest::File& f = m.files[target.file];
    ChunkGrid(grid_of[target.file]).ForEach(f.version.size, target.range, [&](ByteRange r) {
      uint32_t id;
      if (indexed) {
        id = plan.AddObjectViewing(f.path, f.version);  // indexed as file t already
      } else if (adopt && r.whole()) {
        // Added, then looked up and indexed in one probe; taken back if it was known.
        id = plan.AddObjectViewing(f.path, f.version);
        if (const uint32_t known = index.Insert(id, key_of); known != id) {
          plan.objects.pop_back();
          id = known;
        }
      } else {
        std::string_view key = f.path;
        if (!r.whole()) key = chunk_key = ObjectKey(f.path, r);
        id = index.Find(key, key_of);
        if (id == KeyIndex::kNone) {  // a copied key: only when it is new
          id = plan.AddObject(key, f.version);
          index.Insert(id, key_of);
        }
      }
      out.ids.push_back(id);
      identity = identity && id == out.ids.size() - 1;
    });
    out.begin[t + 1] = static_cast<uint32_t>(out.ids.size());
    one_each = one_each && out.begin[t + 1] == t + 1;
  }
  out.one_each = one_each;
  out.identity = identity;
  return out;
}

// Copies base's streams other than the one named name into plan; returns the stream the
// manifest changes: base's when it appends to it (sharing its positions), else a new one with
// a serial of its own.
PlanStream TakeStreams(Plan& plan, const Plan* base, const std::string& name, StreamChange change) {
  PlanStream stream;
  if (base) {
    for (const PlanStream& s : base->streams) {
      if (s.name == name) {
        if (change == StreamChange::kAppend) stream = s;
      } else {
        plan.streams.push_back(s);
      }
    }
  }
  if (stream.serial == 0) {
    stream.name = name;
    stream.serial = next_serial.fetch_add(1, std::memory_order_relaxed);
  }
  return stream;
}

// kInvalidArgument (a report) when stream with m's entries appended would have more than
// ManifestParser::kMaxEntries positions.
Status CheckLength(const PlanStream& stream, const ResolvedManifest& m,
                   const TargetObjects& objects) {
  uint64_t positions = stream.sequence.size();
  if (objects.one_each) {
    positions += m.sequence.size();
  } else {
    m.sequence.ForEachBlock([&](std::span<const uint32_t> b) {
      for (uint32_t s : b) positions += objects.begin[s + 1] - objects.begin[s];
    });
  }
  if (positions <= ManifestParser::kMaxEntries) return Status::Ok();
  return Status::Error(
      Code::kInvalidArgument,
      ManifestReport(1, {{m.lines, "the stream would exceed the maximum number of object reads (" +
                                       std::to_string(ManifestParser::kMaxEntries) + ")"}}));
}

// Appends m's entries to stream, each as the positions of the objects it reads, and m's epochs
// after the stream's. m is released before its positions are rewritten: when this held the
// last reference, they are rewritten in place.
void AppendEntries(PlanStream& stream, std::shared_ptr<const ResolvedManifest> mp,
                   const TargetObjects& objects) {
  const ResolvedManifest& m = *mp;
  stream.entries += m.sequence.size();
  stream.range_entries += m.range_entries;
  if (objects.one_each) {  // the common case: files no larger than a chunk
    const uint64_t offset = stream.sequence.size();
    for (uint32_t e : m.epoch_begin) {
      stream.epoch_begin.push_back(static_cast<uint32_t>(offset + e));
    }
    PositionList seq = m.sequence;
    mp.reset();  // m is dangling from here on
    if (!objects.identity) seq.Transform([&](uint32_t t) { return objects.ids[t]; });
    if (stream.sequence.empty()) {
      stream.sequence = std::move(seq);
    } else {
      stream.sequence.Append(seq);
    }
    return;
  }
  size_t next_epoch = 0;
  uint64_t e = 0;
  m.sequence.ForEachBlock([&](std::span<const uint32_t> b) {
    for (uint32_t s : b) {
      while (next_epoch < m.epoch_begin.size() && m.epoch_begin[next_epoch] == e) {
        stream.epoch_begin.push_back(static_cast<uint32_t>(stream.sequence.size()));
        ++next_epoch;
      }
      for (uint32_t i = objects.begin[s]; i < objects.begin[s + 1]; ++i) {
        stream.sequence.push_back(objects.ids[i]);
      }
      ++e;
    }
  });
}

}  // namespace

Result<std::shared_ptr<Plan>> MergePlan(const Plan* base,
                                        std::shared_ptr<const ResolvedManifest> mp,
                                        StreamChange change, uint64_t chunk_size,
                                        uint64_t record_chunk_size, KeyIndex* files_index) {
  const ResolvedManifest& m = *mp;
  auto plan = std::make_shared<Plan>();
  plan->chunk_size = chunk_size;
  plan->record_chunk_size = record_chunk_size ? record_chunk_size : chunk_size;
  if (base) plan->grids = base->grids;
  size_t known = 0;  // m's files base holds whole
  const std::vector<uint64_t> grid_of = FileGrids(*plan, base, m, known);
  // Keys: base's stay where they are; a new whole file's key is its path in m's arenas, which
  // the plan keeps when most of m's files are new, else (a few new files beside many known
  // ones) the new keys are copied, so that a small change does not pin a big manifest's paths.
  if (base) plan->arenas = base->arenas;
  const bool adopt = 2 * known <= m.files.size();
  if (adopt) plan->arenas.insert(plan->arenas.end(), m.arenas.begin(), m.arenas.end());
  TargetObjects objects = AddObjects(*plan, base, m, grid_of, adopt, files_index);
  const std::string name = m.stream.empty() ? std::string(kDefaultStream) : m.stream;
  PlanStream stream = TakeStreams(*plan, base, name, change);
  if (Status length = CheckLength(stream, m, objects); !length.ok()) return length;
  // A replacement with no entries removes the stream.
  const bool keep = change == StreamChange::kAppend || !m.sequence.empty();
  AppendEntries(stream, std::move(mp), objects);  // m is dangling from here on
  if (keep) plan->streams.push_back(std::move(stream));
  std::sort(plan->streams.begin(), plan->streams.end(),
            [](const PlanStream& a, const PlanStream& b) { return a.name < b.name; });
  plan->Finalize(std::move(objects.index));
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

}  // namespace clairfs
