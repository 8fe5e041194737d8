#include "cache/manifest/manifest.h"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace clairfs {
namespace {

// True iff line is marker, alone or followed by a space or tab and any text.
bool IsMarker(std::string_view line, std::string_view marker) {
  if (line.substr(0, marker.size()) != marker) return false;
  return line.size() == marker.size() || line[marker.size()] == ' ' || line[marker.size()] == '\t';
}

// Length of the valid UTF-8 sequence (2-4 bytes) at s[i], or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

// C1 controls (U+0080-U+009F) and the bidirectional embeddings, overrides and isolates
// (U+202A-U+202E, U+2066-U+2069): valid UTF-8 that changes what a terminal shows.
bool IsHostileCodePoint(std::string_view seq) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(seq[k]); };
  if (seq.size() == 2) return b(0) == 0xC2 && b(1) <= 0x9F;
  if (seq.size() == 3 && b(0) == 0xE2 && b(1) == 0x80) return b(2) >= 0xAA && b(2) <= 0xAE;
  if (seq.size() == 3 && b(0) == 0xE2 && b(1) == 0x81) return b(2) >= 0xA6 && b(2) <= 0xA9;
  return false;
}

// A decimal without sign or leading zero (except "0") that fits uint64_t.
bool ParseDecimal(std::string_view s, uint64_t* v) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string EscapeForReport(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  const auto escape = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t n = Utf8Length(s, i); n > 0) {
      const std::string_view seq = s.substr(i, n);
      if (IsHostileCodePoint(seq)) {
        for (char k : seq) escape(static_cast<unsigned char>(k));
      } else {
        out += seq;
      }
      i += n;
    } else {
      escape(c);
      ++i;
    }
  }
  return out;
}

std::string ManifestReport(uint64_t error_count, std::vector<ManifestError> errors,
                           ManifestForm form) {
  std::stable_sort(errors.begin(), errors.end(),
                   [](const auto& a, const auto& b) { return a.line < b.line; });
  std::string report = "manifest rejected: " + std::to_string(error_count) +
                       (error_count == 1 ? " error\n" : " errors\n");
  const size_t shown = std::min(errors.size(), ManifestParser::kMaxErrors);
  for (size_t i = 0; i < shown; ++i) {
    if (errors[i].line != 0) {
      report += (form == ManifestForm::kCompact ? "item " : "line ") +
                std::to_string(errors[i].line) + ": ";
    }
    report += EscapeForReport(errors[i].message) + "\n";
  }
  if (error_count > shown) {
    report += '(';
    report += std::to_string(error_count - shown);
    report += " more)\n";
  }
  return report;
}

void ManifestParser::Error(uint64_t line, std::string message) {
  ++out_.error_count;
  if (out_.errors.size() < kMaxErrors) out_.errors.push_back({line, std::move(message)});
}

void ManifestParser::Feed(std::string_view bytes) {
  if (peeked_) Unpeek();
  bytes_fed_ += bytes.size();
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const std::string_view part = bytes.substr(0, nl);
    if (!pending_too_long_ && pending_.size() + part.size() >= kMaxRawLine) {
      // Certain now, whatever follows: reported at once, so a write() can be refused for it.
      pending_too_long_ = true;
      pending_.clear();
      Error(out_.lines + 1, trailer_ ? "text after the '#end' trailer"
                                     : "line is longer than PATH_MAX (4096 bytes)");
    }
    if (nl == std::string_view::npos) {
      if (!pending_too_long_) pending_.append(part);
      return;
    }
    bytes.remove_prefix(nl + 1);
    ++out_.lines;
    if (pending_too_long_) {
      pending_too_long_ = false;  // reported when it grew too long
    } else if (pending_.empty()) {
      Line(part);  // the whole line is in this chunk: no copy
    } else {
      pending_.append(part);
      Line(pending_);
      pending_.clear();
    }
  }
}

void ManifestParser::Trailer(uint64_t n, std::string_view line) {
  trailer_ = true;
  std::string_view digits = line.substr(std::min(line.size(), kEndMarker.size() + 1));
  uint64_t count = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
  if (line.size() <= kEndMarker.size() || line[kEndMarker.size()] != ' ' || digits.empty() ||
      ec != std::errc() || end != digits.data() + digits.size() ||
      (digits.size() > 1 && digits[0] == '0')) {
    return Error(n, "malformed trailer: expected '#end <number of entries>'");
  }
  if (count != out_.sequence.size()) {
    return Error(n, "the trailer counts " + std::to_string(count) + " entries, the text has " +
                        std::to_string(out_.sequence.size()) + " (cut off or mangled)");
  }
}

const char* ParseManifestEntry(std::string_view line, ManifestEntry* entry) {
  if (line.empty()) return "empty path";
  if (std::memchr(line.data(), '\0', line.size()) != nullptr) return "path contains a NUL byte";
  ByteRange range = ByteRange::Whole();
  if (const size_t tab = line.rfind(kRangeSeparator); tab != std::string_view::npos) {
    const std::string_view suffix = line.substr(tab + 1);
    const size_t plus = suffix.find('+');
    if (plus == std::string_view::npos || !ParseDecimal(suffix.substr(0, plus), &range.offset) ||
        !ParseDecimal(suffix.substr(plus + 1), &range.length)) {
      return "malformed range after the last TAB: expected '<offset>+<length>' in decimal (a "
             "path containing a TAB needs a range)";
    }
    if (range.length == 0) return "empty range (length 0)";
    if (range.offset > UINT64_MAX - range.length) {
      return "range overflows (offset + length > 2^64 - 1)";
    }
    line = line.substr(0, tab);
    if (line.empty()) return "empty path";
  }
  if (line.substr(0, 2) == "./" && line.size() > 2 && line[2] == '#') line.remove_prefix(2);
  entry->path = line;
  entry->range = range;
  return nullptr;
}

void ManifestParser::Line(std::string_view line) {
  const uint64_t n = out_.lines;
  if (n == 1 && line.starts_with(kByteOrderMark)) line.remove_prefix(kByteOrderMark.size());
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // a CRLF line end
  if (trailer_) return Error(n, "text after the '#end' trailer");
  if (line.size() >= kMaxLine) return Error(n, "line is longer than PATH_MAX (4096 bytes)");
  // A '#' line with a NUL byte is no marker or comment: ParseManifestEntry rejects it.
  if (!line.empty() && line[0] == '#' && std::memchr(line.data(), '\0', line.size()) == nullptr) {
    if (IsMarker(line, kEndMarker)) return Trailer(n, line);
    if (IsMarker(line, kBeginMarker)) {
      if (n != 1) return Error(n, "'#begin' is allowed only on the first line");
      header_ = true;
      return;
    }
    if (IsMarker(line, kStreamMarker)) return StreamLine(n, line);
    if (!IsMarker(line, "#epoch")) return;  // a comment
    if (epoch_open_ &&
        (out_.epoch_begin.empty() || out_.epoch_begin.back() == out_.sequence.size())) {
      return Error(n, "epoch " + std::to_string(out_.epoch_begin.size()) + " is empty");
    }
    epoch_open_ = true;
    out_.epoch_begin.push_back(static_cast<uint32_t>(out_.sequence.size()));
    return;
  }
  ManifestEntry entry;
  if (const char* why = ParseManifestEntry(line, &entry)) return Error(n, why);
  if (out_.sequence.size() >= kMaxEntries) return Error(n, "too many entries");
  if (!epoch_open_) {
    epoch_open_ = true;
    out_.epoch_begin.push_back(0);
  }
  out_.sequence.push_back(targets_.Add(out_, entry.path, entry.range, n));
}

void ManifestParser::StreamLine(uint64_t n, std::string_view line) {
  if (stream_line_ != 0) {
    return Error(
        n, "a second '#stream' line (the first is line " + std::to_string(stream_line_) + ")");
  }
  stream_line_ = n;
  if (epoch_open_) return Error(n, "'#stream' must come before the first entry and '#epoch'");
  std::string_view name = line.substr(kStreamMarker.size());
  while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
  while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
  if (std::string why = StreamNameError(name); !why.empty()) return Error(n, why);
  out_.stream = std::string(name);
}

std::string StreamNameError(std::string_view name) {
  if (name.empty()) return "empty stream name";
  if (name.size() > kMaxStreamName) {
    return "stream name longer than " + std::to_string(kMaxStreamName) + " bytes";
  }
  if (name[0] == '.' || name[0] == '-') return "a stream name cannot begin with '.' or '-'";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-' || c == '@' || c == ':' || c == '+';
    if (!ok) return "stream name '" + std::string(name) + "' has a byte outside [A-Za-z0-9._@:+-]";
  }
  return "";
}

uint32_t ManifestTargets::Add(ParsedManifest& m, std::string_view path, ByteRange range,
                              uint64_t n) {
  constexpr uint32_t kNone = 0xFFFFFFFFu;
  const auto key_of = [&](uint32_t i) { return std::string_view(m.paths[i]); };
  const uint32_t id = index_.FindOrInsert(path, key_of, [&] {
    const auto fresh = static_cast<uint32_t>(m.paths.size());
    m.paths.push_back(m.arena->Add(path));
    m.path_line.push_back(n);
    whole_target_.push_back(kNone);
    return fresh;
  });
  const auto target = static_cast<uint32_t>(m.targets.size());
  if (range.whole()) {
    if (whole_target_[id] != kNone) return whole_target_[id];
    whole_target_[id] = target;
  } else {
    auto [pos, fresh] = range_index_.try_emplace({id, range.offset, range.length}, target);
    if (!fresh) return pos->second;
  }
  m.targets.push_back({id, range, n});
  return target;
}

void ManifestTargets::Truncate(ParsedManifest& m, size_t paths, size_t targets) {
  while (m.targets.size() > targets) {
    const ManifestTarget& t = m.targets.back();
    if (t.range.whole()) {
      whole_target_[t.path] = 0xFFFFFFFFu;
    } else {
      range_index_.erase({t.path, t.range.offset, t.range.length});
    }
    m.targets.pop_back();
  }
  const auto key_of = [&](uint32_t i) { return std::string_view(m.paths[i]); };
  while (m.paths.size() > paths) {
    index_.Erase(m.paths.back(), key_of);
    m.paths.pop_back();
    m.path_line.pop_back();
    whole_target_.pop_back();
  }
}

void ManifestTargets::Clear() {
  index_.Reset(0);
  whole_target_.clear();
  range_index_.clear();
}

void ManifestParser::EndText() {
  if (pending_too_long_) {
    ++out_.lines;  // reported by Feed
  } else if (!pending_.empty()) {
    ++out_.lines;
    Line(pending_);
  }
  if (!out_.epoch_begin.empty() && out_.epoch_begin.back() == out_.sequence.size()) {
    Error(out_.lines, "epoch " + std::to_string(out_.epoch_begin.size()) + " is empty");
  }
  if (header_ && !trailer_) {
    Error(out_.lines,
          "the text ends without the '#end' trailer its '#begin' line announced (cut off?)");
  }
}

const ParsedManifest& ManifestParser::Peek() {
  if (!peeked_) {
    mark_ = {out_.paths.size(),
             out_.targets.size(),
             out_.sequence.size(),
             out_.epoch_begin.size(),
             out_.errors.size(),
             out_.error_count,
             out_.lines,
             epoch_open_,
             header_,
             trailer_,
             stream_line_,
             out_.stream,
             out_.arena->mark()};
    EndText();
    peeked_ = true;
  }
  return out_;
}

void ManifestParser::Unpeek() {
  targets_.Truncate(out_, mark_.paths, mark_.targets);
  out_.arena->Rollback(mark_.arena);
  out_.sequence.truncate(mark_.sequence);
  out_.epoch_begin.resize(mark_.epochs);
  out_.errors.resize(mark_.errors);
  out_.error_count = mark_.error_count;
  out_.lines = mark_.lines;
  epoch_open_ = mark_.epoch_open;
  header_ = mark_.header;
  trailer_ = mark_.trailer;
  stream_line_ = mark_.stream_line;
  out_.stream = mark_.stream;
  peeked_ = false;
}

ParsedManifest ManifestParser::Finish() && {
  if (!peeked_) EndText();
  targets_.Clear();
  return std::move(out_);
}

}  // namespace clairfs
