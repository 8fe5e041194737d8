// The reference model of the manifest rules (docs/control-interface.md), written down again for
// the manifest fuzzer: its own line parser and a plain resolver over a fixed node map, sharing
// no code with cache/. manifest_fuzz_test.cc compares the real parser and plan with it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace clairfs::manifest_model {

enum class Kind { kFile, kDir, kLink, kFifo };
struct Node {
  Kind kind;
  std::string target;  // symlinks
};

// The absolute paths under which manifests name the tree's root.
extern const std::vector<std::string> kAliases;

// The tree, as the model sees it; the test adds the same nodes to its MemBacking.
std::map<std::string, Node> Tree();

// The kernel's lookup over the node map, confined to the tree: the canonical path of the
// regular file a manifest path names, or nothing.
std::optional<std::string> ModelResolve(const std::map<std::string, Node>& tree, std::string path);

struct ModelResult {
  bool ok = true;
  uint64_t first_error_line = UINT64_MAX;
  // Where the first line with an error decided by the line alone (no path lookup, not the end
  // of the text) ends, just past its '\n': a write() reaching it must fail.
  uint64_t first_lexical_end = UINT64_MAX;
  std::vector<std::string> entries;  // canonical paths
  std::vector<uint32_t> epochs;
};

// What the manifest rules make of text over tree.
ModelResult Model(const std::map<std::string, Node>& tree, std::string_view text);

// The entry lines of a text, by epoch: its compact form (tests/unit/compact_encode.h) says
// the same if the text is valid.
std::vector<std::vector<std::string>> EntryLines(std::string_view text);

}  // namespace clairfs::manifest_model
