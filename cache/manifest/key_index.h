// KeyIndex: the id of a key, for keys stored elsewhere (a plan's objects), in 8 bytes per slot.
//
// Open addressing with linear probing over a power-of-two table kept at most 3/4 full: 10.7 to
// 21 bytes per key, where a std::unordered_map<std::string_view, uint32_t> costs about 56. A
// slot holds the id and 32 bits of the key's hash: a probe compares a key (through key_of,
// usually two cache misses) only when the hash bits match, so inserting a million new keys
// reads almost no stored key, and growing or erasing reads none. The keys themselves are read
// through key_of(id), so the index holds no views that a reallocation of the table of keys
// could invalidate.
//
// Erase() shifts later entries of a probe run back (no tombstones), so an index that shrinks
// and grows again (a parser that peeks and goes on) stays as fast as a fresh one.
//
// Not thread-safe for writers; concurrent Find() calls on an index nobody changes are safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/base/object.h"

namespace clairfs {

class KeyIndex {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;  // never an id

  KeyIndex() = default;
  KeyIndex(const KeyIndex&) = default;
  KeyIndex& operator=(const KeyIndex&) = default;
  // A moved-from index is empty.
  KeyIndex(KeyIndex&& o) noexcept
      : slots_(std::exchange(o.slots_, {})), size_(std::exchange(o.size_, 0)) {}
  KeyIndex& operator=(KeyIndex&& o) noexcept {
    slots_ = std::exchange(o.slots_, {});
    size_ = std::exchange(o.size_, 0);
    return *this;
  }

  // Empties the index and sizes it for n keys.
  void Reset(size_t n) {
    size_t cap = 16;
    while (4 * n > 3 * cap) cap *= 2;
    slots_.assign(cap, kEmpty);
    size_ = 0;
  }
  size_t size() const { return size_; }

  // Asks the CPU to fetch key's home slot, for a Find or insertion of key soon after: a probe
  // of a big table is a cache miss, which this overlaps with other work.
  void Prefetch(std::string_view key) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[Hash(key) & (slots_.size() - 1)]);
  }

  // The id whose key_of(id) equals key, or kNone.
  template <class KeyOf>
  uint32_t Find(std::string_view key, const KeyOf& key_of) const {
    if (slots_.empty()) return kNone;
    const uint32_t h = Hash(key);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const uint64_t s = slots_[i];
      if (s == kEmpty) return kNone;
      if (TagOf(s) == h && key_of(IdOf(s)) == key) return IdOf(s);
    }
  }
  // The id of key_of(id)'s key if the index has it already, else id, added.
  template <class KeyOf>
  uint32_t Insert(uint32_t id, const KeyOf& key_of) {
    const std::string_view key = key_of(id);
    return FindOrInsert(key, key_of, [id] { return id; });
  }

  // The id of key if the index has it, else make()'s, added: make() returns the id under which
  // key_of answers key from then on (it may add the key where key_of finds it). One probe.
  template <class KeyOf, class Make>
  uint32_t FindOrInsert(std::string_view key, const KeyOf& key_of, const Make& make) {
    if (4 * (size_ + 1) > 3 * slots_.size()) Grow();
    const uint32_t h = Hash(key);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const uint64_t s = slots_[i];
      if (s == kEmpty) {
        const uint32_t id = make();
        slots_[i] = Slot(h, id);
        ++size_;
        return id;
      }
      if (TagOf(s) == h && key_of(IdOf(s)) == key) return IdOf(s);
    }
  }

  // Removes key; key_of must still answer for every id in the index. False if absent.
  template <class KeyOf>
  bool Erase(std::string_view key, const KeyOf& key_of) {
    if (slots_.empty()) return false;
    const uint32_t h = Hash(key);
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    for (;; i = (i + 1) & mask) {
      const uint64_t s = slots_[i];
      if (s == kEmpty) return false;
      if (TagOf(s) == h && key_of(IdOf(s)) == key) break;
    }
    slots_[i] = kEmpty;
    --size_;
    // Entries after the hole whose home lies at or before it (cyclically) move into it.
    for (size_t j = (i + 1) & mask; slots_[j] != kEmpty; j = (j + 1) & mask) {
      const size_t home = TagOf(slots_[j]) & mask;
      const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      slots_[j] = kEmpty;
      i = j;
    }
    return true;
  }

 private:
  // A slot: the key's 32 hash bits (whose low bits are its home) above its id.
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // id kNone
  static uint64_t Slot(uint32_t hash, uint32_t id) { return uint64_t{hash} << 32 | id; }
  static uint32_t TagOf(uint64_t s) { return static_cast<uint32_t>(s >> 32); }
  static uint32_t IdOf(uint64_t s) { return static_cast<uint32_t>(s); }
  static uint32_t Hash(std::string_view key) {
    const uint64_t h = HashBytes(key.data(), key.size());
    return static_cast<uint32_t>(h ^ (h >> 32));
  }
  // Doubles the table; the stored hash bits place every key again without reading it.
  void Grow() {
    std::vector<uint64_t> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 16 : 2 * old.size(), kEmpty);
    const size_t mask = slots_.size() - 1;
    for (uint64_t s : old) {
      if (s == kEmpty) continue;
      size_t i = TagOf(s) & mask;
      while (slots_[i] != kEmpty) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  std::vector<uint64_t> slots_;
  size_t size_ = 0;
};

}  // namespace clairfs
