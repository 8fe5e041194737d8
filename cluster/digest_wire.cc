// kPlan digests on the wire: the catalog (keys and versions, front-coded) and the digest
// proper (freq and first per catalog entry). Formats and contracts: protocol.h.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "cluster/message_codec.h"
#include "cluster/protocol.h"
#include "cluster/wire.h"

namespace clairfs::cluster {
namespace {

using Bytes = wire::BasicWriter<std::string>;

// The smallest encoded entry: a shared-prefix length, a suffix length, one suffix byte (a key
// equal to a prefix of the previous one would not sort after it), four version deltas.
constexpr size_t kMinEntryBytes = 7;
// The smallest digest entry: a one-byte freq and the 4-byte first.
constexpr size_t kMinUseBytes = 5;
constexpr uint8_t kCarriesCatalog = 1;

// Indices of d.files in path order (the catalog's order).
std::vector<uint32_t> PathOrder(const Digest& d) {
  std::vector<uint32_t> order(d.files.size());
  std::iota(order.begin(), order.end(), 0u);
  const auto by_path = [&](uint32_t a, uint32_t b) { return d.files[a].path < d.files[b].path; };
  if (!std::is_sorted(order.begin(), order.end(), by_path)) {
    std::sort(order.begin(), order.end(), by_path);
  }
  return order;
}

// Differences as zigzag varints: 0 (one byte) when a field equals the previous entry's.
void PutDelta(Bytes& w, uint64_t value, uint64_t previous) {
  w.PutVarint(wire::ZigZag(static_cast<int64_t>(value - previous)));
}

bool GetDelta(wire::Reader& r, uint64_t previous, uint64_t* value) {
  uint64_t z;
  if (!r.GetVarint(&z)) return false;
  *value = previous + static_cast<uint64_t>(wire::UnZigZag(z));
  return true;
}

// The entries of an encoded catalog, checked as protocol.h says (but not its hash).
bool DecodeEntries(std::string_view bytes, std::vector<DigestFile>* out, uint64_t* count) {
  wire::Reader r(bytes);
  uint64_t n;
  if (!r.GetVarint(&n) || n > r.left() / kMinEntryBytes) return false;
  out->clear();
  out->reserve(n);
  const uint64_t key_budget = kMaxKeyExpansion * static_cast<uint64_t>(bytes.size());
  uint64_t key_bytes = 0;
  std::string_view prev;
  uint64_t v[4] = {0, 0, 0, 0};  // the previous entry's size, mtime, ctime, inode
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t shared, len;
    std::string_view suffix;
    if (!r.GetVarint(&shared) || !r.GetVarint(&len) || shared > prev.size() || len == 0 ||
        len > kMaxKeyBytes - shared || !r.GetView(len, &suffix)) {
      return false;
    }
    key_bytes += shared + len;
    if (key_bytes > key_budget) return false;
    DigestFile f;
    f.path.reserve(shared + len);
    f.path.append(prev.substr(0, shared)).append(suffix);
    if (i > 0 && !(prev < f.path)) return false;  // strictly sorted: unique keys
    for (uint64_t& field : v) {
      if (!GetDelta(r, field, &field)) return false;
    }
    f.version = {v[0], static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2]), v[3]};
    out->push_back(std::move(f));
    prev = out->back().path;  // stays valid: out was reserved, it never reallocates
  }
  if (!r.Done()) return false;
  *count = n;
  return true;
}

std::string Hex(uint64_t v) {
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

double QuantizeFirst(uint64_t position, uint64_t span) {
  if (span == 0 || position >= span) return 0xFFFFFFFFu / 4294967296.0;
  const auto q = static_cast<uint64_t>((static_cast<unsigned __int128>(position) << 32) / span);
  return static_cast<double>(std::min<uint64_t>(q, 0xFFFFFFFFu)) / 4294967296.0;
}

Catalog EncodeCatalog(const Digest& d) {
  Bytes w;
  w.PutVarint(d.files.size());
  std::string_view prev;
  const FileVersion zero{};
  const FileVersion* pv = &zero;
  for (uint32_t id : PathOrder(d)) {
    const DigestFile& f = d.files[id];
    const std::string_view key = f.path;
    const size_t shared =
        std::mismatch(prev.begin(), prev.end(), key.begin(), key.end()).first - prev.begin();
    w.PutVarint(shared);
    w.PutVarint(key.size() - shared);
    w.PutBytes(key.data() + shared, key.size() - shared);
    PutDelta(w, f.version.size, pv->size);
    PutDelta(w, static_cast<uint64_t>(f.version.mtime_ns), static_cast<uint64_t>(pv->mtime_ns));
    PutDelta(w, static_cast<uint64_t>(f.version.ctime_ns), static_cast<uint64_t>(pv->ctime_ns));
    PutDelta(w, f.version.ino, pv->ino);
    prev = key;
    pv = &f.version;
  }
  Catalog c;
  c.bytes = w.Take();
  c.hash = HashBytes(c.bytes.data(), c.bytes.size());
  c.count = d.files.size();
  return c;
}

std::optional<std::vector<DigestFile>> DecodeCatalog(const Catalog& c) {
  std::vector<DigestFile> out;
  uint64_t n;
  if (HashBytes(c.bytes.data(), c.bytes.size()) != c.hash || !DecodeEntries(c.bytes, &out, &n) ||
      n != c.count) {
    return {};
  }
  return out;
}

std::vector<char> EncodeDigest(const Digest& d, const Catalog& c, bool with_catalog) {
  wire::Writer w = MessageWriter();
  w.Put<int32_t>(d.rank);
  w.Put(d.generation);
  w.Put(c.hash);
  w.Put<uint32_t>(static_cast<uint32_t>(d.tier_capacity.size()));
  for (uint64_t cap : d.tier_capacity) w.Put(cap);
  w.Put<uint8_t>(with_catalog ? kCarriesCatalog : 0);
  if (with_catalog) {
    w.Put<uint64_t>(c.bytes.size());
    w.PutBytes(c.bytes.data(), c.bytes.size());
  }
  const std::vector<uint32_t> order = PathOrder(d);
  w.PutVarint(order.size());
  for (uint32_t id : order) w.PutVarint(d.files[id].freq);
  for (uint32_t id : order) {
    // first is a multiple of 2^-32 below 1 (QuantizeFirst); anything else is rounded down.
    const double scaled = std::clamp(d.files[id].first, 0.0, 1.0) * 4294967296.0;
    w.Put<uint32_t>(static_cast<uint32_t>(std::min(scaled, 4294967295.0)));
  }
  return w.Take();
}

std::optional<Digest> DecodeDigest(std::string_view bytes, std::optional<Catalog>* held,
                                   std::string* error) {
  wire::Reader r = MessageReader(bytes);
  Digest d;
  int32_t rank;
  uint64_t hash;
  uint32_t ntiers;
  uint8_t flags;
  const auto malformed = [&](const char* what) {
    *error = std::string("malformed digest (") + what + ")";
    return std::nullopt;
  };
  if (!r.Get(&rank) || !r.Get(&d.generation) || !r.Get(&hash) || !r.Get(&ntiers) || ntiers > 64) {
    return malformed("header");
  }
  d.rank = rank;
  d.tier_capacity.resize(ntiers);
  for (auto& c : d.tier_capacity) {
    if (!r.Get(&c)) return malformed("capacities");
  }
  if (!r.Get(&flags) || (flags & ~kCarriesCatalog) != 0) return malformed("flags");
  std::optional<Catalog> carried;
  std::vector<DigestFile> entries;
  uint64_t nentries = 0;
  if (flags & kCarriesCatalog) {
    uint64_t len;
    std::string_view body;
    if (!r.Get(&len) || len > r.left() || !r.GetView(len, &body)) return malformed("catalog");
    if (HashBytes(body.data(), body.size()) != hash) {
      *error = "catalog " + Hex(hash) + " damaged: its bytes do not match its hash";
      return std::nullopt;
    }
    if (!DecodeEntries(body, &entries, &nentries)) {
      *error = "catalog " + Hex(hash) + " refused: malformed, unsorted or beyond the limits";
      return std::nullopt;
    }
    carried = Catalog{hash, nentries, std::string(body)};
  }
  uint64_t n;
  if (!r.GetVarint(&n) || n > r.left() / kMinUseBytes) return malformed("count");
  if (!carried) {
    if (!*held || (*held)->hash != hash) {
      *error = "digest names catalog " + Hex(hash) + ", but the last catalog received from " +
               "that rank is " + (*held ? Hex((*held)->hash) : std::string("none"));
      return std::nullopt;
    }
    // A held catalog was checked when it arrived; decoding it again cannot fail.
    if (!DecodeEntries((*held)->bytes, &entries, &nentries)) return malformed("held catalog");
  }
  if (n != nentries) return malformed("count differs from the catalog's");
  for (DigestFile& f : entries) {
    uint64_t freq;
    if (!r.GetVarint(&freq) || freq > 0xFFFFFFFFu) return malformed("freq");
    f.freq = static_cast<uint32_t>(freq);
  }
  for (DigestFile& f : entries) {
    uint32_t q;
    if (!r.Get(&q)) return malformed("first");
    f.first = static_cast<double>(q) / 4294967296.0;
  }
  if (!r.Done()) return malformed("trailing bytes");
  d.files = std::move(entries);
  if (carried) *held = std::move(carried);
  return d;
}

}  // namespace clairfs::cluster
