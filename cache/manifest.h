// The manifest text format (docs/control-interface.md), parsed as a stream: the writer's bytes
// are consumed as they arrive, so a 10-million-line manifest is never held as text.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/object_key.h"

namespace clairfs {

struct ManifestError {
  uint64_t line = 0;  // 1-based
  std::string message;
};

// What an entry reads: a path and a range of it (ByteRange::Whole() for a whole-file entry).
struct ManifestTarget {
  uint32_t path = 0;  // index into ParsedManifest::paths
  ByteRange range;
  uint64_t line = 0;  // of its first appearance
};

// What the text says, before any path is checked against the dataset.
struct ParsedManifest {
  std::deque<std::string> paths;          // distinct paths as written ("./#x" unescaped to "#x")
  std::vector<uint64_t> path_line;        // line of the first appearance of paths[i]
  std::vector<ManifestTarget> targets;    // distinct (path, range) pairs
  std::vector<uint32_t> sequence;         // index into targets, one per entry, in read order
  std::vector<uint32_t> epoch_begin;  // index into sequence where each epoch starts
  std::vector<ManifestError> errors;  // the first kMaxErrors lexical errors, by line
  uint64_t error_count = 0;           // all lexical errors, including those not kept
  uint64_t lines = 0;
  bool ok() const { return error_count == 0; }
};

// A range entry is the path, a TAB, then "<offset>+<length>" (decimal, no sign, no leading
// zero; length >= 1; offset + length must not overflow): the path is everything before the
// line's last TAB. A line with a TAB whose suffix is not such a range is an error, so a path
// containing a TAB is always written with a range. Whether the range lies inside the file is
// checked when the path is resolved (ResolveManifest).
inline constexpr char kRangeSeparator = '\t';

// The end-of-text markers: a text whose first line is kBeginMarker must end with a trailer
// line "#end <entries>" (kEndMarker, a space, the entry count in decimal), and a trailer, when
// present, must be the last line and count the text's entries. A text cut off anywhere (a
// writer killed mid-write) thus fails validation.
inline constexpr std::string_view kBeginMarker = "#begin";
inline constexpr std::string_view kEndMarker = "#end";

class ManifestParser {
 public:
  static constexpr size_t kMaxErrors = 20;
  static constexpr size_t kMaxLine = 4096;  // PATH_MAX, including the terminating NUL
  static constexpr uint64_t kMaxEntries = 0xFFFFFFF0u;

  ManifestParser() = default;
  ManifestParser(const ManifestParser&) = delete;  // index_ holds views into out_.paths
  ManifestParser& operator=(const ManifestParser&) = delete;
  ManifestParser(ManifestParser&&) = default;
  ManifestParser& operator=(ManifestParser&&) = default;

  // Consumes the next bytes of the text; lines may be split anywhere between calls.
  void Feed(std::string_view bytes);
  // What the text says if it ended here, without ending it: the next Feed() continues the
  // text as if Peek() had not been called. The reference is valid until the next call.
  const ParsedManifest& Peek();
  // Ends the text (a last line without '\n' counts) and returns what it said.
  ParsedManifest Finish() &&;
  uint64_t bytes_fed() const { return bytes_fed_; }

 private:
  // What EndText() changed, so that Unpeek() can take it back.
  struct Mark {
    size_t paths, targets, sequence, epochs, errors;
    uint64_t error_count, lines;
    bool epoch_open, header, trailer;
  };
  void EndText();
  void Unpeek();
  void Line(std::string_view line);
  void Trailer(uint64_t n, std::string_view line);
  void Error(uint64_t line, std::string message);
  // The target of (path, range) for line n, added if new.
  uint32_t Target(std::string_view path, ByteRange range, uint64_t n);
  struct RangeKey {
    uint32_t path;
    uint64_t offset, length;
    bool operator==(const RangeKey&) const = default;
  };
  struct RangeHash {
    size_t operator()(const RangeKey& k) const {
      return std::hash<uint64_t>()(k.offset * 0x9E3779B97F4A7C15ull ^ k.length) ^ k.path;
    }
  };
  ParsedManifest out_;
  std::unordered_map<std::string_view, uint32_t> index_;  // views into out_.paths
  std::vector<uint32_t> whole_target_;  // per path: its whole-file target, or 0xFFFFFFFF
  std::unordered_map<RangeKey, uint32_t, RangeHash> range_index_;
  std::string pending_;
  bool pending_too_long_ = false;
  bool epoch_open_ = false;  // an epoch has begun (explicitly or by its first entry)
  bool header_ = false;      // line 1 was kBeginMarker: a trailer is required
  bool trailer_ = false;     // a trailer line was seen: nothing may follow it
  bool peeked_ = false;      // out_ holds EndText()'s changes, recorded in mark_
  Mark mark_{};
  uint64_t bytes_fed_ = 0;
};

// s with every byte that is not printable ASCII or part of valid UTF-8 written as \xNN, and
// '\' as \\; C1 controls and bidirectional overrides, valid UTF-8 that a terminal would act
// on, are escaped byte by byte too. For every message that quotes user input.
std::string EscapeForReport(std::string_view s);

}  // namespace clairfs
