// The compact manifest fuzzer: valid encodings, mutated and cut off, fed in random chunks with
// random Peek() calls, each compared with a reference decoder written here from the layout
// (a whole-buffer decoder sharing no code with cache/). A fixed seed (CLAIRFS_FUZZ_SEED replays
// another), a bounded time (fuzz_budget.h).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <random>

#include "cache/manifest/compact_manifest.h"
#include "tests/unit/compact_encode.h"
#include "tests/unit/fuzz_budget.h"

namespace clairfs {
namespace {

using testing::CompactManifest;
using testing::EncodeCompact;
using testing::kMagic;
using testing::SetLe;

struct Item {
  std::string path;
  uint64_t offset = 0, length = 0;  // length 0: the whole file
  bool operator==(const Item&) const = default;
};

// What the reference decoder makes of an input.
struct Model {
  bool structure_ok = false;    // layout, counts, indexes, name, trailer
  uint64_t first_bad_item = 0;  // 1-based, 0: every item is valid
  std::string stream;
  std::vector<std::optional<Item>> items;
  std::vector<std::vector<uint32_t>> epochs;
  bool ok() const { return structure_ok && first_bad_item == 0; }
};

std::optional<uint64_t> Decimal(const std::string& d) {
  if (d.empty() || d.size() > 20 || d.find_first_not_of("0123456789") != std::string::npos ||
      (d.size() > 1 && d[0] == '0')) {
    return std::nullopt;
  }
  unsigned __int128 v = 0;
  for (char c : d) v = v * 10 + static_cast<unsigned>(c - '0');
  if (v > UINT64_MAX) return std::nullopt;
  return static_cast<uint64_t>(v);
}

// An item as the text form would read the same entry line.
std::optional<Item> ModelItem(std::string s) {
  if (s.empty() || s.size() >= 4096 || s[0] == '#' || s.find('\n') != std::string::npos) {
    return std::nullopt;
  }
  Item item;
  if (const size_t tab = s.rfind('\t'); tab != std::string::npos) {
    const std::string suffix = s.substr(tab + 1);
    const size_t plus = suffix.find('+');
    if (plus == std::string::npos) return std::nullopt;
    const auto off = Decimal(suffix.substr(0, plus));
    const auto len = Decimal(suffix.substr(plus + 1));
    if (!off || !len || *len == 0 || *off > UINT64_MAX - *len) return std::nullopt;
    item.offset = *off;
    item.length = *len;
    s.resize(tab);
    if (s.empty()) return std::nullopt;
  }
  if (s.size() > 2 && s.compare(0, 3, "./#") == 0) s.erase(0, 2);
  item.path = s;
  return item;
}

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 128 || n[0] == '.' || n[0] == '-') return false;
  for (char c : n) {
    if (!isalnum(static_cast<unsigned char>(c)) &&
        std::string("._@:+-").find(c) == std::string::npos) {
      return false;
    }
  }
  return true;
}

Model Decode(const std::string& b) {
  Model m;
  size_t at = 0;
  auto u = [&](size_t n) -> std::optional<uint64_t> {
    if (b.size() - at < n) return std::nullopt;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(b[at + i])} << (8 * i);
    at += n;
    return v;
  };
  if (b.size() < 50 || b.compare(0, 8, kMagic) != 0) return m;
  at = 8;
  const uint64_t version = *u(4), flags = *u(4), items = *u(8), bytes = *u(8), epochs = *u(8),
                 entries = *u(8), name = *u(2);
  const uint64_t max = (uint64_t{1} << 32) - 16;
  if (version != 1 || flags != 0 || items < 1 || items > max || bytes < items ||
      bytes > items * 4096 || epochs < 1 || epochs > (1u << 20) || entries < 1 || entries > max ||
      name > 128 || b.size() - at < name) {
    return m;
  }
  if (name > 0) {
    m.stream = b.substr(at, name);
    if (!ValidName(m.stream)) return m;
    at += name;
  }
  if (b.size() - at < bytes || b[at + bytes - 1] != '\0') return m;
  const std::string section = b.substr(at, bytes);
  at += bytes;
  for (size_t i = 0; i < section.size();) {
    const size_t nul = section.find('\0', i);
    m.items.push_back(ModelItem(section.substr(i, nul - i)));
    if (!m.items.back() && m.first_bad_item == 0) m.first_bad_item = m.items.size();
    i = nul + 1;
  }
  if (m.items.size() != items) return m;
  uint64_t total = 0;
  for (uint64_t e = 0; e < epochs; ++e) {
    const auto n = u(4);
    if (!n || *n == 0 || (b.size() - at) / 4 < *n) return m;
    m.epochs.emplace_back();
    for (uint64_t k = 0; k < *n; ++k) {
      const uint64_t index = *u(4);
      if (index >= items) return m;
      m.epochs.back().push_back(static_cast<uint32_t>(index));
    }
    total += *n;
  }
  const auto trailer = u(8);
  if (total != entries || !trailer || *trailer != entries || b.size() - at != 8 ||
      b.compare(at, 8, kMagic) != 0) {
    return m;
  }
  m.structure_ok = true;
  return m;
}

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool Chance(int percent) { return Pick(100) < static_cast<size_t>(percent); }

  std::string ItemString() {
    static const std::vector<std::string> kGood = {"a",
                                                   "b/c",
                                                   "dir/sub/g",
                                                   "./#h",
                                                   "e f",
                                                   "a\t0+5",
                                                   "b/c\t3+4",
                                                   "x\r",
                                                   "caf\xc3\xa9",
                                                   "t\tab\t1+1",
                                                   "/data/set/a",
                                                   "./a",
                                                   "big\t18446744073709551614+1"};
    static const std::vector<std::string> kBad = {"#h",
                                                  "",
                                                  "a\nb",
                                                  "a\t1-2",
                                                  "a\t0+0",
                                                  "a\t01+1",
                                                  "\t1+2",
                                                  "a\t",
                                                  "big\t1+18446744073709551615",
                                                  std::string(4096, 'x')};
    if (Chance(8)) return kBad[Pick(kBad.size())];
    if (Chance(3)) return std::string(4095, 'y');
    return kGood[Pick(kGood.size())];
  }
  std::string Name() {
    static const std::vector<std::string> kNames = {
        "rank0", "job@host:3+x", "a.b_c-d", "-bad", ".bad", "b d", std::string(128, 'n')};
    return Chance(40) ? "" : kNames[Pick(kNames.size())];
  }
  CompactManifest Manifest() {
    CompactManifest m;
    m.stream = Name();
    const size_t items = 1 + Pick(8);
    for (size_t i = 0; i < items; ++i) m.items.push_back(ItemString());
    const size_t epochs = 1 + Pick(4);
    for (size_t e = 0; e < epochs; ++e) {
      m.epochs.emplace_back();
      const size_t n = 1 + Pick(6);
      for (size_t k = 0; k < n; ++k) m.epochs.back().push_back(static_cast<uint32_t>(Pick(items)));
    }
    return m;
  }
  uint64_t Extreme() {
    static const std::vector<uint64_t> kValues = {0,
                                                  1,
                                                  2,
                                                  3,
                                                  128,
                                                  129,
                                                  4096,
                                                  0xFFFFFFF0u,
                                                  0xFFFFFFF1u,
                                                  0xFFFFFFFFu,
                                                  1ull << 32,
                                                  1ull << 20,
                                                  (1ull << 20) + 1,
                                                  UINT64_MAX};
    return Chance(20) ? rng_() : kValues[Pick(kValues.size())];
  }
  void Mutate(std::string& s) {
    switch (Pick(8)) {
      case 0:  // a byte
        if (!s.empty()) s[Pick(s.size())] = static_cast<char>(Pick(256));
        break;
      case 1:  // cut off
        s.resize(Pick(s.size() + 1));
        break;
      case 2:  // insert bytes
        s.insert(Pick(s.size() + 1), std::string(1 + Pick(4), static_cast<char>(Pick(3))));
        break;
      case 3:  // delete bytes
        if (!s.empty()) s.erase(Pick(s.size()), 1 + Pick(4));
        break;
      case 4: {  // a header field
        static const std::vector<std::pair<size_t, size_t>> kFields = {
            {8, 4}, {12, 4}, {16, 8}, {24, 8}, {32, 8}, {40, 8}, {48, 2}};
        const auto [at, n] = kFields[Pick(kFields.size())];
        if (s.size() >= at + n) SetLe(s, at, Extreme(), n);
        break;
      }
      case 5: {  // a count or index near the end
        const size_t back = 16 + 4 * (1 + Pick(4));
        if (s.size() >= back) SetLe(s, s.size() - back, Chance(50) ? Pick(10) : Extreme(), 4);
        break;
      }
      case 6:  // trailing bytes
        s += std::string(1 + Pick(3), static_cast<char>(Pick(256)));
        break;
      default:  // a duplicated span
        if (!s.empty()) {
          const size_t at = Pick(s.size());
          s.insert(at, s.substr(at, 1 + Pick(8)));
        }
    }
  }

 private:
  std::mt19937_64 rng_;
};

TEST(CompactManifestFuzz, ParserAgreesWithTheReferenceDecoder) {
  const testing::FuzzBudget budget(0xC0DAC7, 20'000);
  Gen gen(budget.seed());
  int inputs = 0, accepted = 0, structural = 0;
  for (int i = 0; budget.More(i); ++i, ++inputs) {
    std::string in = EncodeCompact(gen.Manifest());
    const size_t mutations = gen.Chance(30) ? 0 : 1 + gen.Pick(3);
    for (size_t k = 0; k < mutations; ++k) gen.Mutate(in);
    const Model want = Decode(in);
    ManifestInput parser;  // as the control plane feeds it
    for (size_t at = 0; at < in.size();) {
      const size_t n = 1 + gen.Pick(gen.Chance(30) ? 3 : in.size());
      parser.Feed(std::string_view(in).substr(at, n));
      at += n;
      if (gen.Chance(10)) (void)parser.Peek();
    }
    const ParsedManifest got = std::move(parser).Finish();
    const std::string what = "input " + std::to_string(i) + ": " + ::testing::PrintToString(in);
    if (in.empty() || in[0] != '\0') {  // no longer compact: the text parser's business
      ASSERT_EQ(got.form, ManifestForm::kText);
      continue;
    }
    ASSERT_EQ(got.ok(), want.ok()) << what << "\n"
                                   << (got.errors.empty() ? "" : got.errors[0].message);
    if (!want.structure_ok) {
      ++structural;
      bool found = false;
      for (const auto& e : got.errors) found |= e.line == 0 && e.message.rfind("at byte ", 0) == 0;
      ASSERT_TRUE(found) << what;
      continue;
    }
    ASSERT_EQ(got.form, ManifestForm::kCompact);
    if (!want.ok()) {  // only item errors, the first one first
      ASSERT_FALSE(got.errors.empty());
      for (const auto& e : got.errors) ASSERT_GT(e.line, 0u) << what << e.message;
      ASSERT_EQ(got.errors[0].line, want.first_bad_item) << what;
      continue;
    }
    ++accepted;
    ASSERT_EQ(got.stream, want.stream);
    std::vector<uint32_t> begins;
    size_t k = 0;
    for (const auto& epoch : want.epochs) {
      begins.push_back(static_cast<uint32_t>(k));
      for (uint32_t index : epoch) {
        ASSERT_LT(k, got.sequence.size()) << what;
        const ManifestTarget& t = got.targets.at(got.sequence[k]);
        const Item have{std::string(got.paths.at(t.path)), t.range.offset, t.range.length};
        ASSERT_EQ(have, *want.items[index]) << what << " entry " << k;
        ++k;
      }
    }
    ASSERT_EQ(got.sequence.size(), k);
    ASSERT_EQ(got.epoch_begin, begins);
    ASSERT_EQ(got.lines, want.items.size());
  }
  EXPECT_GE(inputs, testing::FuzzBudget::kFloor);
  EXPECT_GT(accepted, inputs / 10);
  EXPECT_GT(structural, inputs / 10);
  budget.Report("compact parser", inputs,
                std::to_string(accepted) + " accepted, " + std::to_string(structural) +
                    " structurally invalid");
}

}  // namespace
}  // namespace clairfs
