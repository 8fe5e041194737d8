// A compact-form manifest encoder for tests, written from the layout in
// docs/control-interface.md ("Compact form"); it shares no code with cache/.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace clairfs::testing {

inline const std::string kMagic("\0clairfs", 8);

// What a compact manifest says.
struct CompactManifest {
  std::string stream;                         // "" : L = 0
  std::vector<std::string> items;             // without their NUL
  std::vector<std::vector<uint32_t>> epochs;  // item indexes
};

inline void PutLe(std::string& s, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// Overwrites the n bytes at `at` with v (little-endian).
inline void SetLe(std::string& s, size_t at, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// The encoding of m, counts computed from it.
inline std::string EncodeCompact(const CompactManifest& m) {
  uint64_t item_bytes = 0, entries = 0;
  for (const auto& i : m.items) item_bytes += i.size() + 1;
  for (const auto& e : m.epochs) entries += e.size();
  std::string s = kMagic;
  PutLe(s, 1, 4);
  PutLe(s, 0, 4);
  PutLe(s, m.items.size(), 8);
  PutLe(s, item_bytes, 8);
  PutLe(s, m.epochs.size(), 8);
  PutLe(s, entries, 8);
  PutLe(s, m.stream.size(), 2);
  s += m.stream;
  for (const auto& i : m.items) s += i + std::string(1, '\0');
  for (const auto& e : m.epochs) {
    PutLe(s, e.size(), 4);
    for (uint32_t x : e) PutLe(s, x, 4);
  }
  PutLe(s, entries, 8);
  s += kMagic;
  return s;
}

// The compact form of epochs of entry lines: the items are the distinct lines in order of
// first appearance (so paths and targets come out in the order the text form gives them).
inline CompactManifest CompactOf(std::string stream,
                                 const std::vector<std::vector<std::string>>& epochs) {
  CompactManifest m;
  m.stream = std::move(stream);
  std::map<std::string, uint32_t> index;
  for (const auto& epoch : epochs) {
    m.epochs.emplace_back();
    for (const auto& line : epoch) {
      auto [it, fresh] = index.try_emplace(line, static_cast<uint32_t>(m.items.size()));
      if (fresh) m.items.push_back(line);
      m.epochs.back().push_back(it->second);
    }
  }
  return m;
}

// The text form of the same epochs of entry lines, with `#stream` if stream is not empty.
inline std::string TextOf(const std::string& stream,
                          const std::vector<std::vector<std::string>>& epochs) {
  std::string t = stream.empty() ? "" : "#stream " + stream + "\n";
  for (const auto& epoch : epochs) {
    t += "#epoch\n";
    for (const auto& line : epoch) t += line + "\n";
  }
  return t;
}

}  // namespace clairfs::testing
