// PositionList: an append-only list of uint32 values (object or target ids, one per position
// of an access string) stored in blocks of kBlock values.
//
// Why blocks: a 90-epoch ImageNet plan has 115 M positions. A std::vector doubling its way
// there holds old and new storage at once (up to 3x), and every copy of a plan would copy
// them all. Here growth never copies more than one block, and a copy shares the full blocks
// of the list it was copied from (copy on write: a block another list shares is copied
// before it is changed), so appending epochs to a plan, or cloning it, costs only the new
// positions.
//
// Thread-safety: like a std::vector of const values. Concurrent readers of lists sharing
// blocks are safe; a list is changed by one thread at a time, and a block is changed in place
// only while no other list holds it.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace clairfs {

class PositionList {
 public:
  static constexpr size_t kBlockBits = 20;
  static constexpr size_t kBlock = size_t{1} << kBlockBits;  // values per full block (4 MiB)

  PositionList() = default;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint32_t operator[](size_t i) const { return (*blocks_[i >> kBlockBits])[i & (kBlock - 1)]; }

  void push_back(uint32_t v) {
    if ((size_ & (kBlock - 1)) == 0) {
      blocks_.push_back(std::make_shared<std::vector<uint32_t>>());
      // A list past its first block is a big one: its blocks are allocated whole (no copies
      // while one grows); the first grows as needed, so that small lists stay small.
      if (blocks_.size() > 1) blocks_.back()->reserve(kBlock);
    } else {
      Own(blocks_.size() - 1);
    }
    blocks_.back()->push_back(v);
    ++size_;
  }
  // Appends n values, gen(0) to gen(n - 1) in order: push_back in bulk, a block at a time.
  template <class F>
  void Extend(size_t n, F gen) {
    for (size_t i = 0; i < n;) {
      if ((size_ & (kBlock - 1)) == 0) {
        blocks_.push_back(std::make_shared<std::vector<uint32_t>>());
        if (blocks_.size() > 1) blocks_.back()->reserve(kBlock);  // as push_back does
      } else {
        Own(blocks_.size() - 1);
      }
      std::vector<uint32_t>& b = *blocks_.back();
      const size_t take = std::min(kBlock - (size_ & (kBlock - 1)), n - i);
      const size_t at = b.size();
      b.resize(at + take);
      uint32_t* out = b.data() + at;
      for (size_t k = 0; k < take; ++k) out[k] = gen(i + k);
      i += take;
      size_ += take;
    }
  }
  // Shrinks to n values (n <= size()).
  void truncate(size_t n);
  void clear() {
    blocks_.clear();
    size_ = 0;
  }
  // Appends every value of other, sharing its full blocks when this list ends on a block
  // boundary.
  void Append(const PositionList& other);
  // Replaces each value v by f(v), in place where no other list shares the block.
  template <class F>
  void Transform(F f) {
    for (size_t b = 0; b < blocks_.size(); ++b) {
      Own(b);
      for (uint32_t& v : *blocks_[b]) v = f(v);
    }
  }
  // The values in order, block by block: f(std::span<const uint32_t>).
  template <class F>
  void ForEachBlock(F f) const {
    for (const auto& b : blocks_) f(std::span<const uint32_t>(*b));
  }
  // The values of [begin, end) in order, as spans.
  template <class F>
  void ForEachSpan(size_t begin, size_t end, F f) const {
    while (begin < end) {
      const auto& b = *blocks_[begin >> kBlockBits];
      const size_t at = begin & (kBlock - 1);
      const size_t n = std::min(end - begin, b.size() - at);
      f(std::span<const uint32_t>(b.data() + at, n));
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
  // Makes block b this list's own (copied if shared).
  void Own(size_t b) {
    if (blocks_[b].use_count() > 1) blocks_[b] = std::make_shared<std::vector<uint32_t>>(*blocks_[b]);
  }
  std::vector<std::shared_ptr<std::vector<uint32_t>>> blocks_;
  size_t size_ = 0;
};

}  // namespace clairfs
