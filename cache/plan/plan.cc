#include "cache/plan/plan.h"

#include <algorithm>
#include <cassert>
#include <span>
#include <thread>

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

}  // namespace clairfs
