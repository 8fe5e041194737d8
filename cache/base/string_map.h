// StringMap: an unordered_map keyed by std::string that is also searched by std::string_view
// (heterogeneous lookup), so that looking up a key viewed elsewhere (a plan's object key)
// allocates nothing.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace clairfs {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

}  // namespace clairfs
