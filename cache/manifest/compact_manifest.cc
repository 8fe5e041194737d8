#include "cache/manifest/compact_manifest.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

namespace clairfs {
namespace {

static_assert(kCompactHeaderSize <= kMaxStreamName && kCompactTrailerSize <= kMaxStreamName,
              "field_ holds the largest fixed-size field");
static_assert(ManifestParser::kMaxEntries == 0xFFFFFFF0u, "the layout's limit of I and N");

constexpr uint32_t kBadItem = 0xFFFFFFFFu;  // an item with an error: no target

uint64_t Le(const char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}

// A little-endian uint32 at p (one load on a little-endian machine).
uint32_t Le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return le32toh(v);
}

std::string N(uint64_t v) { return std::to_string(v); }

}  // namespace

CompactManifestParser::CompactManifestParser() { out_.form = ManifestForm::kCompact; }

void CompactManifestParser::ItemError(std::string message) {
  ++out_.error_count;
  // One slot stays free for the structural error that may follow.
  if (out_.errors.size() + 1 < kMaxErrors) out_.errors.push_back({out_.lines, std::move(message)});
}

void CompactManifestParser::Structural(uint64_t at, std::string message) {
  ++out_.error_count;
  out_.errors.push_back({0, "at byte " + N(at) + ": " + std::move(message)});
}

void CompactManifestParser::Fail(uint64_t at, std::string message) {
  Structural(at, std::move(message));
  section_ = Section::kFailed;
}

bool CompactManifestParser::Fixed(std::string_view& bytes, size_t n) {
  const size_t take = std::min(n - field_fill_, bytes.size());
  std::memcpy(field_.data() + field_fill_, bytes.data(), take);
  field_fill_ += take;
  offset_ += take;
  bytes.remove_prefix(take);
  if (field_fill_ < n) return false;
  field_fill_ = 0;
  return true;
}

void CompactManifestParser::Feed(std::string_view bytes) {
  if (peeked_) Unpeek();
  bytes_fed_ += bytes.size();
  while (!bytes.empty()) {
    switch (section_) {
      case Section::kHeader:
        if (Fixed(bytes, kCompactHeaderSize)) Header();
        break;
      case Section::kName:
        if (Fixed(bytes, name_length_)) Name();
        break;
      case Section::kItems:
        Items(bytes);
        break;
      case Section::kEpoch:
        if (Fixed(bytes, 4)) Epoch(static_cast<uint32_t>(Le(field_.data(), 4)));
        break;
      case Section::kEntries:
        Entries(bytes);
        break;
      case Section::kTrailer:
        if (Fixed(bytes, kCompactTrailerSize)) Trailer();
        break;
      case Section::kDone:
        return Fail(offset_, "bytes after the trailer");
      case Section::kFailed:
        return;
    }
  }
}

void CompactManifestParser::Header() {
  const char* h = field_.data();
  if (std::string_view(h, kCompactMagic.size()) != kCompactMagic) {
    return Fail(0, "not a compact manifest: it does not begin with the magic \"\\0clairfs\"");
  }
  if (const uint64_t version = Le(h + 8, 4); version != kCompactVersion) {
    return Fail(
        8, "format version " + N(version) + ": this clairfs reads version " + N(kCompactVersion));
  }
  if (const uint64_t flags = Le(h + 12, 4); flags != 0) {
    return Fail(12, "flags " + N(flags) + ": no flag is defined, they must be 0");
  }
  items_ = Le(h + 16, 8);
  item_bytes_ = Le(h + 24, 8);
  epochs_ = Le(h + 32, 8);
  entries_ = Le(h + 40, 8);
  name_length_ = static_cast<uint16_t>(Le(h + 48, 2));
  const uint64_t max = ManifestParser::kMaxEntries;
  if (items_ < 1 || items_ > max) {
    return Fail(16, "item count " + N(items_) + " outside 1 to " + N(max));
  }
  if (item_bytes_ < items_ || item_bytes_ > items_ * kCompactMaxItemBytes) {
    return Fail(24, "item bytes " + N(item_bytes_) + " outside " + N(items_) + " to " +
                        N(items_ * kCompactMaxItemBytes) +
                        " (1 to 4096 bytes per item with its "
                        "NUL, for " +
                        N(items_) + " items)");
  }
  if (epochs_ < 1 || epochs_ > kCompactMaxEpochs) {
    return Fail(32, "epoch count " + N(epochs_) + " outside 1 to " + N(kCompactMaxEpochs));
  }
  if (entries_ < 1 || entries_ > max) {
    return Fail(40, "entry count " + N(entries_) + " outside 1 to " + N(max));
  }
  if (entries_ < epochs_) {
    return Fail(40, "entry count " + N(entries_) + " below the epoch count " + N(epochs_) +
                        " (every epoch has an entry)");
  }
  if (name_length_ > kMaxStreamName) {
    return Fail(48, "stream name length " + N(name_length_) + " above " + N(kMaxStreamName));
  }
  item_bytes_left_ = item_bytes_;
  section_ = name_length_ > 0 ? Section::kName : Section::kItems;
}

void CompactManifestParser::Name() {
  const std::string_view name(field_.data(), name_length_);
  if (std::string why = StreamNameError(name); !why.empty()) {
    return Fail(kCompactHeaderSize, why);
  }
  out_.stream = std::string(name);
  section_ = Section::kItems;
}

void CompactManifestParser::Items(std::string_view& bytes) {
  while (!bytes.empty() && item_bytes_left_ > 0 && section_ == Section::kItems) {
    const std::string_view chunk =
        bytes.substr(0, std::min<uint64_t>(bytes.size(), item_bytes_left_));
    const size_t nul = chunk.find('\0');
    const std::string_view part = chunk.substr(0, nul);
    if (item_length_ < ManifestParser::kMaxLine) {
      item_.append(part.substr(0, ManifestParser::kMaxLine - item_length_));
    }
    item_length_ += part.size();
    const size_t used = nul == std::string_view::npos ? chunk.size() : nul + 1;
    bytes.remove_prefix(used);
    offset_ += used;
    item_bytes_left_ -= used;
    if (nul != std::string_view::npos) {
      // The next item's index slot is fetched while this one is added.
      const std::string_view next = bytes.substr(0, std::min<uint64_t>(bytes.size(), 256));
      if (const size_t end = next.find('\0'); end != std::string_view::npos) {
        targets_.Prefetch(next.substr(0, end));
      }
      EndItem();
    }
  }
  if (section_ == Section::kItems && item_bytes_left_ == 0) EndItems();
}

void CompactManifestParser::EndItem() {
  const uint64_t k = ++out_.lines;
  uint32_t target = kBadItem;
  if (item_length_ >= ManifestParser::kMaxLine) {
    ItemError("item is longer than PATH_MAX (4096 bytes)");
  } else if (item_.find('\n') != std::string::npos) {
    ItemError("item contains a line feed");
  } else if (!item_.empty() && item_[0] == '#') {
    ItemError("item begins with '#' (a path beginning with '#' is written './#...')");
  } else {
    ManifestEntry entry;
    if (const char* why = ParseManifestEntry(item_, &entry)) {
      ItemError(why);
    } else {
      target = targets_.Add(out_, entry.path, entry.range, k);
    }
  }
  items_are_targets_ = items_are_targets_ && target == item_target_.size();
  item_target_.push_back(target);
  item_.clear();
  item_length_ = 0;
  if (k == items_ && item_bytes_left_ > 0) {
    Fail(offset_, "the item section goes on after its " + N(items_) +
                      " items (the header gives "
                      "it " +
                      N(item_bytes_) + " bytes)");
  }
}

void CompactManifestParser::EndItems() {
  if (out_.lines < items_) {
    return Fail(offset_, "the item section's " + N(item_bytes_) + " bytes end after " +
                             N(out_.lines) + " of its " + N(items_) + " items" +
                             (item_length_ > 0 ? " (the last one has no terminating NUL)" : ""));
  }
  section_ = Section::kEpoch;
}

void CompactManifestParser::Epoch(uint32_t count) {
  const uint64_t at = offset_ - 4;
  const uint64_t e = ++epochs_seen_;
  if (count == 0) return Fail(at, "epoch " + N(e) + " has no entries (count 0)");
  if (count > entries_ - entries_seen_) {
    return Fail(at, "epoch " + N(e) + " counts " + N(count) + " entries, more than the " +
                        N(entries_ - entries_seen_) + " left of the header's " + N(entries_));
  }
  out_.epoch_begin.push_back(static_cast<uint32_t>(out_.sequence.size()));
  epoch_left_ = count;
  section_ = Section::kEntries;
}

void CompactManifestParser::Entries(std::string_view& bytes) {
  while (!bytes.empty() && section_ == Section::kEntries) {
    // The common case, in a tight loop: whole indexes inside the epoch (its last one, which
    // ends the epoch, and any index out of range go through Entry()).
    if (field_fill_ == 0 && epoch_left_ > 1 && bytes.size() >= 8) {
      const uint64_t n = std::min<uint64_t>(bytes.size() / 4, epoch_left_ - 1);
      const char* p = bytes.data();
      uint64_t done = 0;
      if (items_are_targets_) {  // distinct, valid items: an index is its target
        while (done < n && Le32(p + 4 * done) < items_) ++done;
        out_.sequence.Extend(done, [p](size_t k) { return Le32(p + 4 * k); });
      } else {
        for (; done < n; ++done, p += 4) {
          const auto index = static_cast<uint32_t>(Le(p, 4));
          if (index >= items_) break;
          if (const uint32_t t = item_target_[index]; t != kBadItem) out_.sequence.push_back(t);
        }
      }
      offset_ += 4 * done;
      entries_seen_ += done;
      epoch_left_ -= done;
      bytes.remove_prefix(4 * done);
      if (done == n) continue;
    }
    if (field_fill_ == 0 && bytes.size() >= 4) {  // no copy
      offset_ += 4;
      const auto index = static_cast<uint32_t>(Le(bytes.data(), 4));
      bytes.remove_prefix(4);
      Entry(index);
    } else if (Fixed(bytes, 4)) {
      Entry(static_cast<uint32_t>(Le(field_.data(), 4)));
    }
  }
}

void CompactManifestParser::Entry(uint32_t index) {
  if (index >= items_) {
    return Fail(offset_ - 4, "entry " + N(entries_seen_ + 1) + " (epoch " + N(epochs_seen_) +
                                 ") is item index " + N(index) + ", the items are 0 to " +
                                 N(items_ - 1));
  }
  // An item with an error has its own report; its entries add nothing.
  if (item_target_[index] != kBadItem) out_.sequence.push_back(item_target_[index]);
  ++entries_seen_;
  if (--epoch_left_ > 0) return;
  if (epochs_seen_ < epochs_) {
    section_ = Section::kEpoch;
  } else if (entries_seen_ != entries_) {
    Fail(offset_, "the " + N(epochs_) + " epochs hold " + N(entries_seen_) +
                      " entries, the header's entry count is " + N(entries_));
  } else {
    section_ = Section::kTrailer;
  }
}

void CompactManifestParser::Trailer() {
  const uint64_t at = offset_ - kCompactTrailerSize;
  if (const uint64_t count = Le(field_.data(), 8); count != entries_) {
    return Fail(at, "the trailer counts " + N(count) + " entries, the header " + N(entries_) +
                        " (mangled?)");
  }
  if (std::string_view(field_.data() + 8, kCompactMagic.size()) != kCompactMagic) {
    return Fail(at + 8, "the trailer does not end with the magic \"\\0clairfs\" (mangled?)");
  }
  section_ = Section::kDone;
}

std::string CompactManifestParser::CutOff() const {
  std::string where;
  switch (section_) {
    case Section::kHeader:
      where = "inside the " + N(kCompactHeaderSize) + "-byte header";
      break;
    case Section::kName:
      where = "inside the stream name";
      break;
    case Section::kItems:
      where = "inside the item section, after " + N(out_.lines) + " of " + N(items_) + " items";
      break;
    case Section::kEpoch:
      where = field_fill_ == 0 && epochs_seen_ > 0
                  ? "after epoch " + N(epochs_seen_) + " of " + N(epochs_)
                  : "inside the count of epoch " + N(epochs_seen_ + 1);
      break;
    case Section::kEntries:
      where = "inside epoch " + N(epochs_seen_) + " of " + N(epochs_) + ", after entry " +
              N(entries_seen_) + " of " + N(entries_);
      break;
    default:
      where = "inside the trailer";
  }
  return "the input ends " + where + " (cut off: the trailer is missing)";
}

const ParsedManifest& CompactManifestParser::Peek() {
  if (!peeked_) {
    peeked_ = true;
    peek_error_ = section_ != Section::kDone && section_ != Section::kFailed;
    if (peek_error_) Structural(offset_, CutOff());
  }
  return out_;
}

void CompactManifestParser::Unpeek() {
  if (peek_error_) {
    out_.errors.pop_back();
    --out_.error_count;
  }
  peeked_ = false;
  peek_error_ = false;
}

ParsedManifest CompactManifestParser::Finish() && {
  Peek();
  targets_.Clear();
  return std::move(out_);
}

void ManifestInput::Feed(std::string_view bytes) {
  if (bytes.empty()) return;
  if (bytes_fed() == 0 && bytes[0] == '\0') parser_.emplace<CompactManifestParser>();
  std::visit([&](ManifestStreamParser auto& p) { p.Feed(bytes); }, parser_);
}

const ParsedManifest& ManifestInput::Peek() {
  return std::visit([](ManifestStreamParser auto& p) -> const ParsedManifest& { return p.Peek(); },
                    parser_);
}

ParsedManifest ManifestInput::Finish() && {
  return std::visit([](ManifestStreamParser auto& p) { return std::move(p).Finish(); }, parser_);
}

const std::vector<std::string_view>& ManifestInput::paths() const {
  return std::visit(
      [](const ManifestStreamParser auto& p) -> const std::vector<std::string_view>& {
        return p.paths();
      },
      parser_);
}

const ParsedManifest& ManifestInput::parsed() const {
  return std::visit(
      [](const ManifestStreamParser auto& p) -> const ParsedManifest& { return p.parsed(); },
      parser_);
}

KeyIndex ManifestInput::TakePathIndex() && {
  return std::visit([](ManifestStreamParser auto& p) { return std::move(p).TakePathIndex(); },
                    parser_);
}

uint64_t ManifestInput::bytes_fed() const {
  return std::visit([](const ManifestStreamParser auto& p) { return p.bytes_fed(); }, parser_);
}

}  // namespace clairfs
