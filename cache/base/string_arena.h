// StringArena: append-only storage for many short strings (a manifest's paths, a plan's
// object keys), so that a million paths cost their bytes rather than a heap allocation and a
// std::string each (about 80 bytes for a 37-byte ImageNet path).
//
// Contract: a string added keeps its address until the arena is destroyed or rolled back past
// it, so views into it stay valid while the arena lives. Arenas are shared by shared_ptr: the
// parser fills one, the validated manifest and the plans whose keys view its strings hold it,
// so a path written once in a manifest is stored once from parsing to the installed plan.
// Strings are stored back to back in chunks; a chunk's unused tail (at most one string's
// length) is the only waste.
//
// Not thread-safe for writers; concurrent readers of strings nobody rolls back are safe.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace clairfs {

class StringArena {
 public:
  static constexpr size_t kChunk = size_t{256} << 10;

  StringArena() = default;
  StringArena(const StringArena&) = delete;  // views point into this arena's chunks
  StringArena& operator=(const StringArena&) = delete;

  // A copy of s in the arena.
  std::string_view Add(std::string_view s) {
    if (chunks_.empty() || s.size() > chunk_size_.back() - used_) {
      const size_t n = std::max(kChunk, s.size());
      chunks_.push_back(std::make_unique_for_overwrite<char[]>(n));
      chunk_size_.push_back(n);
      used_ = 0;
    }
    char* at = chunks_.back().get() + used_;
    if (!s.empty()) std::memcpy(at, s.data(), s.size());
    used_ += s.size();
    bytes_ += s.size();
    return {at, s.size()};
  }

  // A point to roll back to: every string added after it is forgotten by Rollback().
  struct Mark {
    size_t chunks = 0, used = 0, bytes = 0;
  };
  Mark mark() const { return {chunks_.size(), used_, bytes_}; }
  void Rollback(const Mark& m) {
    chunks_.resize(m.chunks);
    chunk_size_.resize(m.chunks);
    used_ = m.used;
    bytes_ = m.bytes;
  }

  // Bytes of the strings held, and of the chunks holding them.
  size_t bytes() const { return bytes_; }
  size_t capacity_bytes() const {
    size_t n = 0;
    for (size_t c : chunk_size_) n += c;
    return n;
  }

 private:
  std::vector<std::unique_ptr<char[]>> chunks_;
  std::vector<size_t> chunk_size_;
  size_t used_ = 0;   // bytes used in the last chunk
  size_t bytes_ = 0;  // of all strings
};

}  // namespace clairfs
