// KeyIndex: the id of a key, for keys stored elsewhere (a plan's objects), in 4 bytes per slot.
//
// Open addressing with linear probing over a power-of-two table kept at most half full: 8 to
// 16 bytes per key, where a std::unordered_map<std::string_view, uint32_t> costs about 56.
// The keys themselves are read through key_of(id), so the index holds no views that a
// reallocation of the table of keys could invalidate.
//
// Erase() shifts later entries of a probe run back (no tombstones), so an index that shrinks
// and grows again (a parser that peeks and goes on) stays as fast as a fresh one.
//
// Not thread-safe for writers; concurrent Find() calls on an index nobody changes are safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "cache/object.h"

namespace clairfs {

class KeyIndex {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  // Empties the index and sizes it for n keys.
  void Reset(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, kNone);
    size_ = 0;
  }
  size_t size() const { return size_; }

  // The id whose key_of(id) equals key, or kNone.
  template <class KeyOf>
  uint32_t Find(std::string_view key, const KeyOf& key_of) const {
    if (slots_.empty()) return kNone;
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(key);; i = (i + 1) & mask) {
      const uint32_t id = slots_[i];
      if (id == kNone || key_of(id) == key) return id;
    }
  }
  // The id of key_of(id)'s key if the index has it already, else id, added.
  template <class KeyOf>
  uint32_t Insert(uint32_t id, const KeyOf& key_of) {
    if (2 * (size_ + 1) > slots_.size()) Grow(key_of);
    const std::string_view key = key_of(id);
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(key);; i = (i + 1) & mask) {
      if (slots_[i] == kNone) {
        slots_[i] = id;
        ++size_;
        return id;
      }
      if (key_of(slots_[i]) == key) return slots_[i];
    }
  }

  // The id of key if the index has it, else make()'s, added: make() returns the id under which
  // key_of answers key from then on (it may add the key where key_of finds it). One probe.
  template <class KeyOf, class Make>
  uint32_t FindOrInsert(std::string_view key, const KeyOf& key_of, const Make& make) {
    if (2 * (size_ + 1) > slots_.size()) Grow(key_of);
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(key);; i = (i + 1) & mask) {
      if (slots_[i] == kNone) {
        const uint32_t id = make();
        slots_[i] = id;
        ++size_;
        return id;
      }
      if (key_of(slots_[i]) == key) return slots_[i];
    }
  }

  // Removes key; key_of must still answer for every id in the index. False if absent.
  template <class KeyOf>
  bool Erase(std::string_view key, const KeyOf& key_of) {
    if (slots_.empty()) return false;
    const size_t mask = slots_.size() - 1;
    size_t i = Home(key);
    for (;; i = (i + 1) & mask) {
      if (slots_[i] == kNone) return false;
      if (key_of(slots_[i]) == key) break;
    }
    slots_[i] = kNone;
    --size_;
    // Entries after the hole whose home lies at or before it (cyclically) move into it.
    for (size_t j = (i + 1) & mask; slots_[j] != kNone; j = (j + 1) & mask) {
      const size_t home = Home(key_of(slots_[j]));
      const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      slots_[j] = kNone;
      i = j;
    }
    return true;
  }

 private:
  size_t Home(std::string_view key) const {
    return HashBytes(key.data(), key.size()) & (slots_.size() - 1);
  }
  template <class KeyOf>
  void Grow(const KeyOf& key_of) {
    std::vector<uint32_t> old;
    old.swap(slots_);
    Reset(old.empty() ? 8 : old.size());
    for (uint32_t id : old) {
      if (id != kNone) Insert(id, key_of);
    }
  }
  std::vector<uint32_t> slots_;
  size_t size_ = 0;
};

}  // namespace clairfs
