// Object keys: the unit the cache places, fetches, stores, verifies and shares is an object,
// a byte range of one version of a file. A file no larger than the chunk size is one object
// holding the whole file; a larger file is cut into chunks on a fixed grid (chunk k holds bytes
// [k*C, min((k+1)*C, size))), each its own object.
//
// A key names the file and the range: the whole-file object's key is the file's canonical path;
// a chunk's key is the path, a NUL byte, then "<offset>+<length>" in decimal. Paths contain no
// NUL, so the two never collide, and a key says exactly which bytes its object holds: a tier,
// a peer or a reader can check an object's size against its key (ObjectBytes), and a chunk
// made under another chunk size has another key (or, at the same offset and length, the same
// bytes). The version (cache/base/object.h) is always the whole file's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cache/base/object.h"

namespace clairfs {

// A byte range of a file; length 0 means the whole file (ByteRange::Whole()).
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  static constexpr ByteRange Whole() { return {0, 0}; }
  bool whole() const { return length == 0; }
  bool operator==(const ByteRange&) const = default;
};

// The key of the object holding range of path (the bare path for ByteRange::Whole()).
std::string ObjectKey(std::string_view path, ByteRange range);

struct ObjectRef {
  std::string_view path;  // a view into the key
  ByteRange range;        // Whole() for a whole-file object
};
// The parts of key; nullopt if its range part is malformed (keys from the network are parsed
// with this before use).
std::optional<ObjectRef> ParseObjectKey(std::string_view key);
// The path part of key (all of it for a whole-file object).
std::string_view KeyPath(std::string_view key);
// The number of bytes the object of key holds at version: the file's size for a whole-file
// object, else the range's length. 0 for a malformed key.
uint64_t ObjectBytes(std::string_view key, const FileVersion& version);
// key for logs and reports: the path, and "[offset+length]" for a chunk.
std::string DisplayKey(std::string_view key);

// The fixed grid that cuts files into chunks. chunk > 0.
class ChunkGrid {
 public:
  explicit ChunkGrid(uint64_t chunk) : chunk_(chunk) {}
  uint64_t chunk() const { return chunk_; }
  // Whether a file of size bytes is cut into chunks (else it is one whole-file object).
  bool Chunked(uint64_t size) const { return size > chunk_; }
  // Calls f(ByteRange) for each object of a file of size bytes that range overlaps, in order:
  // {Whole()} for an unchunked file, else the chunks. range must lie inside the file.
  template <typename F>
  void ForEach(uint64_t size, ByteRange range, F&& f) const {
    if (!Chunked(size)) return (void)f(ByteRange::Whole());
    const uint64_t end = range.whole() ? size : range.offset + range.length;
    for (uint64_t k = (range.whole() ? 0 : range.offset) / chunk_; k * chunk_ < end; ++k) {
      f(Chunk(size, k));
    }
  }
  // How many objects ForEach(size, range, f) calls f with.
  uint64_t Count(uint64_t size, ByteRange range) const {
    if (!Chunked(size)) return 1;
    const uint64_t begin = range.whole() ? 0 : range.offset;
    const uint64_t end = range.whole() ? size : range.offset + range.length;
    return end <= begin ? 0 : (end - 1) / chunk_ - begin / chunk_ + 1;
  }
  // Chunk k of a chunked file of size bytes.
  ByteRange Chunk(uint64_t size, uint64_t k) const {
    const uint64_t off = k * chunk_;
    return {off, std::min(chunk_, size - off)};
  }

 private:
  uint64_t chunk_;
};

}  // namespace clairfs
