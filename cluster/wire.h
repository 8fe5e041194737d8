// Internal to the peer protocol (protocol.cc, plan_parts.cc, node_report.cc): the low-level
// encoding of values as bytes, below the protocol: it knows no message, tag or header (those are
// protocol.h's; message_codec.h joins the two). Fixed-width values are little-endian in native
// layout; varints are unsigned LEB128 (7 bits a byte, low bits first).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cache/base/object.h"

namespace clairfs::cluster::wire {

// Appends to a byte buffer.
class Writer {
 public:
  template <typename T>
  void Put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const char* p = reinterpret_cast<const char*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void PutVarint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void PutString(std::string_view s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    PutBytes(s.data(), s.size());
  }
  void PutBytes(const char* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  size_t size() const { return out_.size(); }
  std::vector<char> Take() { return std::move(out_); }

 private:
  std::vector<char> out_;
};

// Reads a byte range; every Get checks the bounds, so a truncated or garbled input fails
// (returns false) instead of reading past its end.
class Reader {
 public:
  Reader() = default;  // empty: every Get fails
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // At most 10 bytes; a value that does not fit 64 bits fails.
  bool GetVarint(uint64_t* v) {
    uint64_t out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ == in_.size()) return false;
      const auto b = static_cast<uint8_t>(in_[pos_++]);
      if (shift == 63 && b > 1) return false;
      out |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) {
        *v = out;
        return true;
      }
    }
    return false;
  }
  // n bytes, as a view into the input.
  bool GetView(size_t n, std::string_view* s) {
    if (in_.size() - pos_ < n) return false;
    *s = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool GetString(std::string* s) {
    uint32_t n;
    std::string_view v;
    if (!Get(&n) || !GetView(n, &v)) return false;
    s->assign(v);
    return true;
  }
  std::string_view Rest() const { return in_.substr(pos_); }
  size_t left() const { return in_.size() - pos_; }
  bool Done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

inline constexpr size_t kVersionBytes = 32;  // size, mtime, ctime, inode number

inline void PutVersion(Writer& w, const FileVersion& v) {
  w.Put(v.size);
  w.Put(v.mtime_ns);
  w.Put(v.ctime_ns);
  w.Put(v.ino);
}

inline bool GetVersion(Reader& r, FileVersion* v) {
  return r.Get(&v->size) && r.Get(&v->mtime_ns) && r.Get(&v->ctime_ns) && r.Get(&v->ino);
}

}  // namespace clairfs::cluster::wire
