// InodeTable: the kernel's node ids for dataset objects. Holds a path per node, never a file
// descriptor, so a million files cost memory only while the kernel remembers them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cache/object.h"

namespace clairfs {

class InodeTable {
 public:
  static constexpr uint64_t kRootId = 1;
  static constexpr uint64_t kFirstDynamicId = 64;  // ids below are reserved (control files)

  InodeTable();
  // The id of the object (dev, ino) found at path, with one more lookup reference. Hard links
  // share an id and keep the first path seen. Thread-safe.
  uint64_t Acquire(const std::string& path, dev_t dev, ino_t ino);
  // Drops n lookup references; the node is forgotten at zero. The root is never forgotten.
  void Forget(uint64_t id, uint64_t n);
  // The canonical path of id; false if the id is unknown.
  bool Path(uint64_t id, std::string* path) const;
  // Records version as the last one opened and returns the previous (or {} if none).
  FileVersion SwapOpenVersion(uint64_t id, const FileVersion& version);
  size_t size() const;

 private:
  struct Node {
    std::string path;
    dev_t dev = 0;
    ino_t ino = 0;
    uint64_t nlookup = 0;
    FileVersion opened;
  };
  struct Key {
    dev_t dev;
    ino_t ino;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.ino * 31 + k.dev); }
  };
  mutable std::mutex mu_;  // leaf lock
  std::unordered_map<uint64_t, Node> nodes_;
  std::unordered_map<Key, uint64_t, KeyHash> by_key_;
  uint64_t next_id_ = kFirstDynamicId;
};

}  // namespace clairfs
