// The manifest text format (docs/control-interface.md), parsed as a stream: the writer's bytes
// are consumed as they arrive, so a 10-million-line manifest is never held as text.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace clairfs {

struct ManifestError {
  uint64_t line = 0;  // 1-based
  std::string message;
};

// What the text says, before any path is checked against the dataset.
struct ParsedManifest {
  std::deque<std::string> paths;      // distinct paths as written ("./#x" unescaped to "#x")
  std::vector<uint64_t> path_line;    // line of the first appearance of paths[i]
  std::vector<uint32_t> sequence;     // index into paths, one per entry, in read order
  std::vector<uint32_t> epoch_begin;  // index into sequence where each epoch starts
  std::vector<ManifestError> errors;  // the first kMaxErrors lexical errors, by line
  uint64_t error_count = 0;           // all lexical errors, including those not kept
  uint64_t lines = 0;
  bool ok() const { return error_count == 0; }
};

class ManifestParser {
 public:
  static constexpr size_t kMaxErrors = 20;
  static constexpr size_t kMaxLine = 4096;  // PATH_MAX, including the terminating NUL
  static constexpr uint64_t kMaxEntries = 0xFFFFFFF0u;

  // Consumes the next bytes of the text; lines may be split anywhere between calls.
  void Feed(std::string_view bytes);
  // Ends the text (a last line without '\n' counts) and returns what it said.
  ParsedManifest Finish() &&;
  uint64_t bytes_fed() const { return bytes_fed_; }

 private:
  void Line(std::string_view line);
  void Error(uint64_t line, std::string message);
  ParsedManifest out_;
  std::unordered_map<std::string_view, uint32_t> index_;  // views into out_.paths
  std::string pending_;
  bool pending_too_long_ = false;
  bool epoch_open_ = false;  // an epoch has begun (explicitly or by its first entry)
  uint64_t bytes_fed_ = 0;
};

}  // namespace clairfs
