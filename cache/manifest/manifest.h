// The manifest text format (docs/control-interface.md), parsed as a stream: the writer's bytes
// are consumed as they arrive, so a 10-million-line manifest is never held as text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/base/object_key.h"
#include "cache/base/string_arena.h"
#include "cache/manifest/key_index.h"
#include "cache/manifest/position_list.h"

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

// How a manifest was written: the text form, or the compact binary form
// (docs/control-interface.md; compact_manifest.h).
enum class ManifestForm : uint8_t { kText, kCompact };

// What the text says, before any path is checked against the dataset.
struct ParsedManifest {
  ManifestForm form = ManifestForm::kText;
  // The stream the manifest registers (`#stream NAME`, or the compact header's name); empty:
  // the stream named "default".
  std::string stream;
  // Distinct paths as written ("./#x" unescaped to "#x"), views into arena (which a validated
  // manifest and the plans built from it share, so a path is stored once).
  std::shared_ptr<StringArena> arena = std::make_shared<StringArena>();
  std::vector<std::string_view> paths;
  std::vector<uint64_t> path_line;      // line of the first appearance of paths[i]
  std::vector<ManifestTarget> targets;  // distinct (path, range) pairs
  PositionList sequence;                // index into targets, one per entry, in read order
  std::vector<uint32_t> epoch_begin;    // index into sequence where each epoch starts
  std::vector<ManifestError> errors;    // the first kMaxErrors lexical errors, by line
  uint64_t error_count = 0;             // all lexical errors, including those not kept
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

// `#stream NAME` before the first entry and `#epoch` names the stream the text registers
// (docs/control-interface.md, "Streams"); without it the text is the stream "default".
inline constexpr std::string_view kStreamMarker = "#stream";
inline constexpr std::string_view kDefaultStream = "default";

// Line ends and a byte order mark as Windows editors write them: each line of a text (also a
// last one without '\n') loses one trailing CR, and the first line a leading UTF-8 BOM, before
// it is read (so "#end 3\r" is a trailer, and a path ending in CR is written with a range).
// Neither applies to compact items, which are taken byte for byte.
inline constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
inline constexpr size_t kMaxStreamName = 128;
// Why name is not a valid stream name (1 to kMaxStreamName bytes of [A-Za-z0-9._@:+-], not
// beginning with '.' or '-'), or "" if it is one.
std::string StreamNameError(std::string_view name);

// One entry as a text line or a compact item states it.
struct ManifestEntry {
  std::string_view path;  // a view into the line, "./#x" unescaped to "#x"
  ByteRange range = ByteRange::Whole();
};
// Parses a line that is an entry (a text line not beginning with '#', or a compact item):
// not empty, no NUL byte, an optional range (kRangeSeparator). Returns nullptr and sets
// *entry, or the reason it is not one (the message reported for it; *entry is unspecified).
// Shared by both forms, so an item means exactly what the same text line means.
const char* ParseManifestEntry(std::string_view line, ManifestEntry* entry);

// The distinct paths and (path, range) targets of a manifest being parsed, appended to a
// ParsedManifest's paths (stored in its arena), path_line and targets.
class ManifestTargets {
 public:
  // The target of (path, range), added (with n as its line, and as its path's line if the
  // path is new) unless m has it already.
  uint32_t Add(ParsedManifest& m, std::string_view path, ByteRange range, uint64_t n);
  // Forgets every path beyond the first `paths` and every target beyond the first `targets`,
  // in m and here (targets added later than paths, as Add does).
  void Truncate(ParsedManifest& m, size_t paths, size_t targets);
  void Clear();
  // KeyIndex::Prefetch for a path to be added next.
  void Prefetch(std::string_view path) const { index_.Prefetch(path); }
  // The index of m.paths (id: index into m.paths, keys the paths' bytes), taken: this is
  // left empty and must not be used for m again.
  KeyIndex TakeIndex() { return std::move(index_); }

 private:
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
  KeyIndex index_;                      // path id by path (m.paths)
  std::vector<uint32_t> whole_target_;  // per path: its whole-file target, or 0xFFFFFFFF
  std::unordered_map<RangeKey, uint32_t, RangeHash> range_index_;
};

// The text form's parser: a ManifestStreamParser (manifest_stream_parser.h).
class ManifestParser {
 public:
  static constexpr size_t kMaxErrors = 20;
  static constexpr size_t kMaxLine = 4096;  // PATH_MAX, including the terminating NUL
  static constexpr uint64_t kMaxEntries = 0xFFFFFFF0u;
  // A line's bytes as written: at most a BOM (line 1) and a CR besides its kMaxLine - 1.
  static constexpr size_t kMaxRawLine = kMaxLine + 4;

  ManifestParser() = default;
  ManifestParser(const ManifestParser&) = delete;
  ManifestParser& operator=(const ManifestParser&) = delete;
  ManifestParser(ManifestParser&&) = default;
  ManifestParser& operator=(ManifestParser&&) = default;

  // Consumes the next bytes of the text; lines may be split anywhere between calls. Every
  // error it records is final (no later byte can take it back), so a text with
  // parsed().error_count > 0 right after Feed() is certain to be rejected.
  void Feed(std::string_view bytes);
  // What the text says if it ended here, without ending it: the next Feed() continues the
  // text as if Peek() had not been called. The reference is valid until the next call.
  const ParsedManifest& Peek();
  // Ends the text (a last line without '\n' counts) and returns what it said.
  ParsedManifest Finish() &&;
  uint64_t bytes_fed() const { return bytes_fed_; }
  // The distinct paths of the complete entries fed so far (views into the parsed arena, valid
  // as long as the text's parser or what it returns lives). Right after Feed(): none of a
  // Peek()'s additions.
  const std::vector<std::string_view>& paths() const { return out_.paths; }
  // What the complete lines fed so far said (right after Feed(): none of a Peek()'s additions).
  const ParsedManifest& parsed() const { return out_; }
  // After Peek(), the last call: an index of the paths Peek() returned (ManifestTargets::
  // TakeIndex), so that a plan whose keys are those paths need not index them again.
  KeyIndex TakePathIndex() && { return targets_.TakeIndex(); }

 private:
  // What EndText() changed, so that Unpeek() can take it back.
  struct Mark {
    size_t paths, targets, sequence, epochs, errors;
    uint64_t error_count, lines;
    bool epoch_open, header, trailer;
    uint64_t stream_line;
    std::string stream;
    StringArena::Mark arena;
  };
  void EndText();
  void Unpeek();
  void Line(std::string_view line);
  void Trailer(uint64_t n, std::string_view line);
  void StreamLine(uint64_t n, std::string_view line);
  void Error(uint64_t line, std::string message);
  ParsedManifest out_;
  ManifestTargets targets_;  // of out_
  std::string pending_;
  bool pending_too_long_ = false;
  bool epoch_open_ = false;   // an epoch has begun (explicitly or by its first entry)
  bool header_ = false;       // line 1 was kBeginMarker: a trailer is required
  bool trailer_ = false;      // a trailer line was seen: nothing may follow it
  uint64_t stream_line_ = 0;  // the line of the `#stream` line, if any
  bool peeked_ = false;       // out_ holds EndText()'s changes, recorded in mark_
  Mark mark_{};
  uint64_t bytes_fed_ = 0;
};

// The report of a rejected manifest, as `errors` shows it: "manifest rejected: N errors", then
// the first kMaxErrors of errors by line ("line N: " or, compact, "item N: "; none for line 0),
// each message escaped (EscapeForReport), and "(K more)" when error_count is larger.
std::string ManifestReport(uint64_t error_count, std::vector<ManifestError> errors,
                           ManifestForm form = ManifestForm::kText);

// s with every byte that is not printable ASCII or part of valid UTF-8 written as \xNN, and
// '\' as \\; C1 controls and bidirectional overrides, valid UTF-8 that a terminal would act
// on, are escaped byte by byte too. For every message that quotes user input.
std::string EscapeForReport(std::string_view s);

}  // namespace clairfs
