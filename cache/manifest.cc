#include "cache/manifest.h"

#include <cstring>

namespace clairfs {
namespace {

bool IsEpochMarker(std::string_view line) {
  constexpr std::string_view kMarker = "#epoch";
  if (line.substr(0, kMarker.size()) != kMarker) return false;
  return line.size() == kMarker.size() || line[kMarker.size()] == ' ' ||
         line[kMarker.size()] == '\t';
}

}  // namespace

void ManifestParser::Error(uint64_t line, std::string message) {
  ++out_.error_count;
  if (out_.errors.size() < kMaxErrors) out_.errors.push_back({line, std::move(message)});
}

void ManifestParser::Feed(std::string_view bytes) {
  bytes_fed_ += bytes.size();
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const std::string_view part = bytes.substr(0, nl);
    if (!pending_too_long_ && pending_.size() + part.size() >= kMaxLine) {
      pending_too_long_ = true;
      pending_.clear();
    }
    if (nl == std::string_view::npos) {
      if (!pending_too_long_) pending_.append(part);
      return;
    }
    bytes.remove_prefix(nl + 1);
    ++out_.lines;
    if (pending_too_long_) {
      Error(out_.lines, "line is longer than PATH_MAX (4096 bytes)");
      pending_too_long_ = false;
    } else if (pending_.empty()) {
      Line(part);  // the whole line is in this chunk: no copy
    } else {
      pending_.append(part);
      Line(pending_);
      pending_.clear();
    }
  }
}

void ManifestParser::Line(std::string_view line) {
  const uint64_t n = out_.lines;
  if (line.empty()) return Error(n, "empty path");
  if (std::memchr(line.data(), '\0', line.size()) != nullptr) {
    return Error(n, "path contains a NUL byte");
  }
  if (line[0] == '#') {
    if (!IsEpochMarker(line)) return;  // a comment
    if (epoch_open_ &&
        (out_.epoch_begin.empty() || out_.epoch_begin.back() == out_.sequence.size())) {
      return Error(n, "epoch " + std::to_string(out_.epoch_begin.size()) + " is empty");
    }
    epoch_open_ = true;
    out_.epoch_begin.push_back(static_cast<uint32_t>(out_.sequence.size()));
    return;
  }
  if (line.substr(0, 2) == "./" && line.size() > 2 && line[2] == '#') line.remove_prefix(2);
  if (!epoch_open_) {
    epoch_open_ = true;
    out_.epoch_begin.push_back(0);
  }
  if (out_.sequence.size() >= kMaxEntries) return Error(n, "too many entries");
  auto it = index_.find(line);
  uint32_t id;
  if (it != index_.end()) {
    id = it->second;
  } else {
    id = static_cast<uint32_t>(out_.paths.size());
    out_.paths.emplace_back(line);
    out_.path_line.push_back(n);
    index_.emplace(out_.paths.back(), id);
  }
  out_.sequence.push_back(id);
}

ParsedManifest ManifestParser::Finish() && {
  if (pending_too_long_) {
    ++out_.lines;
    Error(out_.lines, "line is longer than PATH_MAX (4096 bytes)");
  } else if (!pending_.empty()) {
    ++out_.lines;
    Line(pending_);
  }
  if (!out_.epoch_begin.empty() && out_.epoch_begin.back() == out_.sequence.size()) {
    Error(out_.lines, "epoch " + std::to_string(out_.epoch_begin.size()) + " is empty");
  }
  index_.clear();
  return std::move(out_);
}

}  // namespace clairfs
