#include "cache/manifest/position_list.h"

#include <algorithm>

namespace clairfs {

void PositionList::truncate(size_t n) {
  if (n >= size_) return;
  const size_t keep = (n + kBlock - 1) >> kBlockBits;
  blocks_.resize(keep);
  if (keep > 0 && (n & (kBlock - 1)) != 0) {
    Own(keep - 1);
    blocks_.back()->resize(WordsFor(n & (kBlock - 1), width_));
  }
  size_ = n;
}

void PositionList::Widen(uint32_t width) {
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const size_t n = b + 1 < blocks_.size() ? kBlock : size_ - (b << kBlockBits);
    auto wide = std::make_shared<Block>();
    if (b > 0) wide->reserve(WordsFor(kBlock, width));
    wide->resize(WordsFor(n, width), 0);
    const Block& old = *blocks_[b];
    for (size_t i = 0; i < n; ++i) Set(*wide, i, width, Get(old, i, width_));
    blocks_[b] = std::move(wide);
  }
  width_ = width;
}

void PositionList::Append(const PositionList& other) {
  if (other.width_ > width_) Widen(other.width_);
  if ((size_ & (kBlock - 1)) == 0 && other.width_ == width_) {
    for (const auto& b : other.blocks_) blocks_.push_back(b);
    size_ += other.size_;
    // The last shared block may be partial: it is copied before a push_back changes it.
    return;
  }
  other.ForEachBlock(
      [&](std::span<const uint32_t> s) { Extend(s.size(), [&](size_t k) { return s[k]; }); });
}

size_t PositionList::capacity_bytes() const {
  size_t n = 0;
  for (const auto& b : blocks_) n += b->capacity() * sizeof(uint64_t);
  return n;
}

std::vector<uint32_t> PositionList::ToVector() const {
  std::vector<uint32_t> out;
  out.reserve(size_);
  ForEachBlock([&](std::span<const uint32_t> s) { out.insert(out.end(), s.begin(), s.end()); });
  return out;
}

PositionList PositionList::Of(const std::vector<uint32_t>& values) {
  PositionList l;
  for (uint32_t v : values) l.push_back(v);
  return l;
}

bool PositionList::operator==(const PositionList& o) const {
  if (size_ != o.size_) return false;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b] == o.blocks_[b] && width_ == o.width_) continue;  // shared
    const size_t n = b + 1 < blocks_.size() ? kBlock : size_ - (b << kBlockBits);
    for (size_t i = 0; i < n; ++i) {
      if (Get(*blocks_[b], i, width_) != Get(*o.blocks_[b], i, o.width_)) return false;
    }
  }
  return true;
}

}  // namespace clairfs
