#include "cache/base/object_key.h"

#include <charconv>

namespace clairfs {

std::string ObjectKey(std::string_view path, ByteRange range) {
  std::string key(path);
  if (range.whole()) return key;
  key.push_back('\0');
  key += std::to_string(range.offset);
  key.push_back('+');
  key += std::to_string(range.length);
  return key;
}

namespace {

// A decimal without sign or leading zero (except "0"), fitting uint64_t.
bool ParseDecimal(std::string_view s, uint64_t* v) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::optional<ObjectRef> ParseObjectKey(std::string_view key) {
  const size_t nul = key.find('\0');
  if (nul == std::string_view::npos) return ObjectRef{key, ByteRange::Whole()};
  const std::string_view range = key.substr(nul + 1);
  const size_t plus = range.find('+');
  ObjectRef ref{key.substr(0, nul), {}};
  if (plus == std::string_view::npos || !ParseDecimal(range.substr(0, plus), &ref.range.offset) ||
      !ParseDecimal(range.substr(plus + 1), &ref.range.length) || ref.range.length == 0 ||
      ref.range.offset > UINT64_MAX - ref.range.length) {
    return std::nullopt;
  }
  return ref;
}

std::string_view KeyPath(std::string_view key) { return key.substr(0, key.find('\0')); }

uint64_t ObjectBytes(std::string_view key, const FileVersion& version) {
  const auto ref = ParseObjectKey(key);
  if (!ref) return 0;
  return ref->range.whole() ? version.size : ref->range.length;
}

std::string DisplayKey(std::string_view key) {
  const size_t nul = key.find('\0');
  if (nul == std::string_view::npos) return std::string(key);
  std::string out(key.substr(0, nul));
  out += '[';
  out += key.substr(nul + 1);
  out += ']';
  return out;
}

}  // namespace clairfs
