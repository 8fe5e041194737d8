// PositionList: an append-only list of uint32 values (object or target ids, one per position
// of an access string), bit-packed at the width its largest value needs, in blocks of kBlock
// values.
//
// Why packed: a 90-epoch ImageNet plan has 115 M positions whose values are below 1.28 M
// (21 bits): 2.6 bytes per position instead of 4, 300 MB instead of 460. The width only
// grows: a value that does not fit re-encodes the list at the wider width (a text manifest's
// target ids grow one at a time, so that happens while its first epoch is parsed).
//
// Why blocks: a std::vector doubling its way to 115 M holds old and new storage at once, and
// every copy of a plan would copy them all. Here growth never copies more than one block, and
// a copy shares the full blocks of the list it was copied from (copy on write: a block another
// list shares is copied before it is changed), so appending epochs to a plan, or cloning it,
// costs only the new positions.
//
// Thread-safety: like a std::vector of const values. Concurrent readers of lists sharing
// blocks are safe; a list is changed by one thread at a time, and a block is changed in place
// only while no other list holds it.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace clairfs {

class PositionList {
 public:
  static constexpr size_t kBlockBits = 20;
  static constexpr size_t kBlock = size_t{1} << kBlockBits;  // values per full block
  // ForEachSpan hands values over in spans of at most this many.
  static constexpr size_t kSpan = 4096;

  PositionList() = default;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Bits per value (1 to 32).
  uint32_t width() const { return width_; }
  uint32_t operator[](size_t i) const {
    return Get(*blocks_[i >> kBlockBits], i & (kBlock - 1), width_);
  }

  void push_back(uint32_t v) {
    if (v > Mask(width_)) Widen(BitsFor(v));
    Block& b = Last();
    const size_t at = size_ & (kBlock - 1);
    b.resize(WordsFor(at + 1, width_), 0);
    Set(b, at, width_, v);
    ++size_;
  }
  // Appends n values, gen(0) to gen(n - 1) in order (each called once): push_back in bulk.
  template <class F>
  void Extend(size_t n, F gen) {
    size_t i = 0;
    while (i < n) {
      Block* b = &Last();
      const size_t at = size_ & (kBlock - 1);
      const size_t take = std::min(kBlock - at, n - i);
      b->resize(WordsFor(at + take, width_), 0);
      size_t k = 0;
      for (; k < take; ++k) {
        const uint32_t v = gen(i + k);
        if (v > Mask(width_)) {  // rare: re-encode, then go on at the new width
          size_ += k;
          Widen(BitsFor(v));
          b = blocks_.back().get();
          b->resize(WordsFor(at + take, width_), 0);
          size_ -= k;
        }
        Set(*b, at + k, width_, v);
      }
      size_ += take;
      i += take;
    }
  }
  // Shrinks to n values (n <= size()).
  void truncate(size_t n);
  void clear() {
    blocks_.clear();
    size_ = 0;
    width_ = 1;
  }
  // Appends every value of other, sharing its full blocks when this list ends on a block
  // boundary and both have the same width.
  void Append(const PositionList& other);
  // Replaces each value v by f(v), in place where no other list shares the block.
  template <class F>
  void Transform(F f) {
    for (size_t b = 0; b < blocks_.size(); ++b) {
      Own(b);
      const size_t n = b + 1 < blocks_.size() ? kBlock : size_ - (b << kBlockBits);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t v = f(Get(*blocks_[b], i, width_));
        if (v > Mask(width_)) Widen(BitsFor(v));  // keeps every value; blocks stay owned
        Set(*blocks_[b], i, width_, v);
      }
    }
  }
  // The values in order, as spans of at most kSpan: f(std::span<const uint32_t>).
  template <class F>
  void ForEachBlock(F f) const {
    ForEachSpan(0, size_, f);
  }
  // The values of [begin, end) in order, as spans of at most kSpan.
  template <class F>
  void ForEachSpan(size_t begin, size_t end, F f) const {
    uint32_t buf[kSpan];
    while (begin < end) {
      const Block& b = *blocks_[begin >> kBlockBits];
      const size_t at = begin & (kBlock - 1);
      const size_t n = std::min({end - begin, kBlock - at, kSpan});
      Decode(b, at, n, width_, buf);
      f(std::span<const uint32_t>(buf, n));
      begin += n;
    }
  }
  // Forward iteration by value (for range-for; ForEachBlock is faster).
  class const_iterator {
   public:
    using value_type = uint32_t;
    using difference_type = std::ptrdiff_t;
    const_iterator() = default;
    const_iterator(const PositionList* l, size_t i) : l_(l), i_(i) {}
    uint32_t operator*() const { return (*l_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator t = *this;
      ++i_;
      return t;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }

   private:
    const PositionList* l_ = nullptr;
    size_t i_ = 0;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }
  // Bytes of storage held (shared blocks counted in full).
  size_t capacity_bytes() const;
  std::vector<uint32_t> ToVector() const;
  static PositionList Of(const std::vector<uint32_t>& values);
  bool operator==(const PositionList& o) const;

 private:
  // A block: its values packed at the list's width from bit 0, in 64-bit words, with one
  // spare word so that a value's bits can always be read as two words.
  using Block = std::vector<uint64_t>;

  static constexpr uint64_t Mask(uint32_t width) { return (uint64_t{1} << width) - 1; }
  static uint32_t BitsFor(uint32_t v) { return v == 0 ? 1 : 32 - std::countl_zero(v); }
  static size_t WordsFor(size_t values, uint32_t width) { return (values * width + 63) / 64 + 1; }
  static uint32_t Get(const Block& b, size_t i, uint32_t width) {
    const size_t bit = i * width;
    const size_t w = bit >> 6;
    const unsigned __int128 x = (static_cast<unsigned __int128>(b[w + 1]) << 64) | b[w];
    return static_cast<uint32_t>(static_cast<uint64_t>(x >> (bit & 63)) & Mask(width));
  }
  static void Set(Block& b, size_t i, uint32_t width, uint32_t v) {
    const size_t bit = i * width;
    const size_t w = bit >> 6;
    const unsigned shift = bit & 63;
    unsigned __int128 x = (static_cast<unsigned __int128>(b[w + 1]) << 64) | b[w];
    x &= ~(static_cast<unsigned __int128>(Mask(width)) << shift);
    x |= static_cast<unsigned __int128>(v) << shift;
    b[w] = static_cast<uint64_t>(x);
    b[w + 1] = static_cast<uint64_t>(x >> 64);
  }
  // Values [at, at + n) of b into out.
  static void Decode(const Block& b, size_t at, size_t n, uint32_t width, uint32_t* out) {
    for (size_t k = 0; k < n; ++k) out[k] = Get(b, at + k, width);
  }
  // The block the next value goes to, owned: a new one when the list ends on a boundary.
  Block& Last() {
    if ((size_ & (kBlock - 1)) == 0) {
      blocks_.push_back(std::make_shared<Block>());
      // A list past its first block is a big one: its blocks are allocated whole (no copies
      // while one grows); the first grows as needed, so that small lists stay small.
      if (blocks_.size() > 1) blocks_.back()->reserve(WordsFor(kBlock, width_));
    } else {
      Own(blocks_.size() - 1);
    }
    return *blocks_.back();
  }
  // Makes block b this list's own (copied if shared).
  void Own(size_t b) {
    if (blocks_[b].use_count() > 1) blocks_[b] = std::make_shared<Block>(*blocks_[b]);
  }
  // Re-encodes every block at width (> width_); the blocks become this list's own.
  void Widen(uint32_t width);

  std::vector<std::shared_ptr<Block>> blocks_;
  size_t size_ = 0;
  uint32_t width_ = 1;
};

}  // namespace clairfs
