// The compact (binary) manifest form (docs/control-interface.md, "Compact form"), parsed as a
// stream, and ManifestInput, which tells the two forms apart by their first byte.
//
// Layout, all integers little-endian: a 50-byte header (magic "\0clairfs", u32 version 1, u32
// flags 0, u64 item count I, u64 item bytes B, u64 epoch count E, u64 entry count N, u16
// stream name length L), the L-byte stream name, B bytes of I NUL-terminated items (each an
// entry line of the text form), E epochs (u32 count n >= 1, then n u32 item indexes < I),
// and a 16-byte trailer (u64 N again, the magic again). Nothing may follow.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cache/manifest/manifest.h"
#include "cache/manifest/manifest_stream_parser.h"

namespace clairfs {

inline constexpr std::string_view kCompactMagic{"\0clairfs", 8};
inline constexpr uint32_t kCompactVersion = 1;
inline constexpr size_t kCompactHeaderSize = 50;  // up to and including L
inline constexpr size_t kCompactTrailerSize = 16;
inline constexpr uint64_t kCompactMaxEpochs = uint64_t{1} << 20;
inline constexpr uint64_t kCompactMaxItemBytes = 4096;  // per item on average: B <= I * 4096

// Parses the compact form into a ParsedManifest with form kCompact: stream is the header's
// name ("" for L = 0), paths/targets come from the items in item order (distinct paths and
// (path, range) pairs, as the text form dedups them), sequence holds one target per entry,
// epoch_begin where each epoch starts, lines is the number of items parsed, and path_line
// and ManifestTarget::line hold the 1-based number of the first item naming them.
//
// Errors: an item that is not a valid text entry line, begins with '#', holds a line feed or
// is 4096 bytes or longer is an item error (line = its item number; the text form's message
// where one applies). Anything else (header fields, name, section sizes, indexes, counts,
// a missing or wrong trailer, bytes after it) is a structural error: line = 0, a message
// beginning "at byte N: " (N: offset of the offending field or byte), and the parser
// interprets nothing after it (bytes are still counted). errors keeps at most kMaxErrors:
// the first kMaxErrors - 1 item errors and the structural one; error_count counts all.
//
// Memory: the item strings (as paths), 4 bytes per item and per entry; nothing is ever
// reserved from a count the header declares, so a header promising 2^32 items costs nothing
// until the bytes arrive.
// A ManifestStreamParser (manifest_stream_parser.h).
class CompactManifestParser {
 public:
  static constexpr size_t kMaxErrors = ManifestParser::kMaxErrors;

  CompactManifestParser();
  CompactManifestParser(const CompactManifestParser&) = delete;  // targets_ views out_.paths
  CompactManifestParser& operator=(const CompactManifestParser&) = delete;
  CompactManifestParser(CompactManifestParser&&) = default;
  CompactManifestParser& operator=(CompactManifestParser&&) = default;

  // Consumes the next bytes; the input may be split anywhere between calls.
  void Feed(std::string_view bytes);
  // What the input says if it ended here, without ending it (an input that has not reached
  // the end of its trailer is rejected as cut off); the next Feed() continues as if Peek()
  // had not been called. The reference is valid until the next call.
  const ParsedManifest& Peek();
  // Ends the input and returns what it said.
  ParsedManifest Finish() &&;
  uint64_t bytes_fed() const { return bytes_fed_; }
  // The distinct paths of the items parsed so far (as ManifestParser::paths()).
  const std::vector<std::string_view>& paths() const { return out_.paths; }
  // What the bytes fed so far said (as ManifestParser::parsed()): every error recorded by
  // Feed() is final, only Peek()'s cut-off error is taken back by the next Feed().
  const ParsedManifest& parsed() const { return out_; }
  // As ManifestParser::TakePathIndex.
  KeyIndex TakePathIndex() && { return targets_.TakeIndex(); }

 private:
  enum class Section : uint8_t {
    kHeader,
    kName,
    kItems,
    kEpoch,
    kEntries,
    kTrailer,
    kDone,
    kFailed
  };
  // Moves bytes into field_ until it holds n (<= field_.size()) bytes; true when it does, and
  // the next field starts empty.
  bool Fixed(std::string_view& bytes, size_t n);
  void Header();
  void Name();
  void Items(std::string_view& bytes);
  void EndItem();
  void EndItems();
  void Epoch(uint32_t count);
  void Entries(std::string_view& bytes);
  void Entry(uint32_t index);
  void Trailer();
  void ItemError(std::string message);
  // Records a structural error at byte at; Fail() also stops interpreting.
  void Structural(uint64_t at, std::string message);
  void Fail(uint64_t at, std::string message);
  // Why the input is incomplete, if it ended at offset_.
  std::string CutOff() const;
  void Unpeek();

  ParsedManifest out_;
  ManifestTargets targets_;  // of out_
  Section section_ = Section::kHeader;
  uint64_t offset_ = 0;  // of the next byte the parser interprets
  // A fixed-size field (header, name, count, index, trailer) being assembled.
  std::array<char, kMaxStreamName> field_{};
  size_t field_fill_ = 0;
  // The header's counts.
  uint64_t items_ = 0, item_bytes_ = 0, epochs_ = 0, entries_ = 0;
  uint16_t name_length_ = 0;
  std::string name_;
  // The item section: bytes of it still to come, the item being assembled (its first
  // ManifestParser::kMaxLine bytes) and its full length.
  uint64_t item_bytes_left_ = 0;
  std::string item_;
  uint64_t item_length_ = 0;
  std::vector<uint32_t> item_target_;  // per item parsed: its target, or kBadItem
  bool items_are_targets_ = true;      // item_target_[i] == i for every item so far
  // The epochs: how many began, entries read so far, entries of the current epoch to come.
  uint64_t epochs_seen_ = 0, entries_seen_ = 0;
  uint32_t epoch_left_ = 0;
  bool peeked_ = false;  // out_ holds Peek()'s cut-off error, if any
  bool peek_error_ = false;
  uint64_t bytes_fed_ = 0;
};

static_assert(ManifestStreamParser<CompactManifestParser>);

// A manifest in either form: the first byte chooses (NUL: compact, anything else: text);
// before any byte it is an empty text. A ManifestStreamParser (manifest_stream_parser.h), as
// each of the two it holds.
class ManifestInput {
 public:
  void Feed(std::string_view bytes);
  const ParsedManifest& Peek();
  ParsedManifest Finish() &&;
  uint64_t bytes_fed() const;
  const std::vector<std::string_view>& paths() const;
  const ParsedManifest& parsed() const;
  KeyIndex TakePathIndex() &&;

 private:
  std::variant<ManifestParser, CompactManifestParser> parser_;
};

static_assert(ManifestStreamParser<ManifestInput>);

}  // namespace clairfs
