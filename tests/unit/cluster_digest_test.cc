// Plan digests on the wire (issue 12): catalog and digest encodings, their sizes for an
// ImageNet-like plan, hostile inputs, and placements identical to those of the full digests
// the protocol sent before. CLAIRFS_DIGEST_OBJECTS sets the size of the ImageNet-like plan
// (default 100,000; docs/benchmarks.md runs 1,280,000).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "cache/backing/resolver.h"
#include "cache/manifest/manifest.h"
#include "cluster/placement.h"
#include "cluster/protocol.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs::cluster {
namespace {

using clairfs::testing::MemBacking;
using namespace std::string_literals;

std::optional<Digest> Decode(const std::vector<char>& bytes, std::optional<Catalog>* held,
                             std::string* why = nullptr) {
  std::string error;
  auto d = DecodeDigest({bytes.data(), bytes.size()}, held, &error);
  EXPECT_EQ(d.has_value(), error.empty()) << error;
  if (why) *why = error;
  return d;
}

void ExpectSameFiles(const Digest& a, const Digest& b) {
  ASSERT_EQ(a.files.size(), b.files.size());
  for (size_t i = 0; i < a.files.size(); ++i) {
    EXPECT_EQ(a.files[i].path, b.files[i].path);
    EXPECT_EQ(a.files[i].version, b.files[i].version) << a.files[i].path;
    EXPECT_EQ(a.files[i].freq, b.files[i].freq) << a.files[i].path;
    EXPECT_EQ(a.files[i].first, b.files[i].first) << a.files[i].path;
  }
}

TEST(DigestWireTest, RoundTripsWithAndWithoutTheCatalog) {
  Digest d{3, 7, {100, 200}, {}};
  d.files = {{"a/b", {10, 5, 6, 99}, 2, QuantizeFirst(1, 4)},
             {"a/c", {10, -5, 7, 98}, 200, QuantizeFirst(0, 4)},
             {ObjectKey("big", {0, 100}), {1ull << 40, 1, 2, 3}, 1, QuantizeFirst(3, 4)},
             {ObjectKey("big", {100, 100}), {1ull << 40, 1, 2, 3}, 1u << 31, 0.5}};
  std::sort(d.files.begin(), d.files.end(),
            [](const DigestFile& x, const DigestFile& y) { return x.path < y.path; });
  const Catalog c = EncodeCatalog(d);
  EXPECT_EQ(c.count, 4u);
  auto entries = DecodeCatalog(c);
  ASSERT_TRUE(entries);
  EXPECT_EQ((*entries)[0].path, "a/b");
  EXPECT_EQ((*entries)[1].version, (FileVersion{10, -5, 7, 98}));
  EXPECT_EQ((*entries)[3].path, ObjectKey("big", {100, 100}));

  std::optional<Catalog> held;
  auto full = EncodeDigest(d, c, true);
  auto back = Decode(full, &held);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->rank, 3);
  EXPECT_EQ(back->generation, 7u);
  EXPECT_EQ(back->tier_capacity, (std::vector<uint64_t>{100, 200}));
  ExpectSameFiles(*back, d);
  ASSERT_TRUE(held);
  EXPECT_EQ(held->hash, c.hash);

  // The same catalog again: the digest alone decodes against the held one.
  d.generation = 8;
  d.files[0].freq = 9;
  auto lean = EncodeDigest(d, c, false);
  EXPECT_LT(lean.size(), full.size());
  back = Decode(lean, &held);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 8u);
  ExpectSameFiles(*back, d);

  // Every truncation is refused, and leaves the held catalog as it was.
  for (const auto* m : {&full, &lean}) {
    for (size_t cut = 0; cut < m->size(); ++cut) {
      std::optional<Catalog> h = held;
      std::string error;
      EXPECT_FALSE(DecodeDigest({m->data(), cut}, &h, &error)) << cut;
      EXPECT_FALSE(error.empty());
      EXPECT_EQ(h->hash, c.hash);
    }
  }
  // Unsorted input files encode as if sorted.
  Digest shuffled = d;
  std::reverse(shuffled.files.begin(), shuffled.files.end());
  EXPECT_EQ(EncodeCatalog(shuffled).bytes, c.bytes);
  EXPECT_EQ(EncodeDigest(shuffled, c, false), lean);
}

TEST(DigestWireTest, FirstIsQuantizedMonotonically) {
  EXPECT_EQ(QuantizeFirst(0, 10), 0.0);
  EXPECT_EQ(QuantizeFirst(5, 10), 0.5);
  EXPECT_LT(QuantizeFirst(0xFFFFFFFEull, 0xFFFFFFFFull), 1.0);
  EXPECT_LT(QuantizeFirst(0xFFFFFFFEull, 0x100000000ull),
            QuantizeFirst(0xFFFFFFFFull, 0x100000000ull));
  std::mt19937_64 rng(5);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t span = 1 + rng() % 0x100000000ull;
    const uint64_t p = rng() % span;
    const double q = QuantizeFirst(p, span);
    EXPECT_EQ(q * 4294967296.0, std::floor(q * 4294967296.0));  // a multiple of 2^-32
    if (p + 1 < span) {
      EXPECT_LT(q, QuantizeFirst(p + 1, span)) << p << " " << span;
    }
  }
}

// A 1000-class ImageNet-like training set of n files: "train/nSYNSET/nSYNSET_NUM.JPEG",
// JPEG-sized files, mtimes over 30 days, extracted class by class in a random order within
// each class (ctime 50 us apart, consecutive inode numbers); each read 1..120 times.
Digest ImageNetLike(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Digest d{0, 1, {64ull << 30, 1ull << 40}, {}};
  const size_t classes = std::max<size_t>(1, std::min<size_t>(1000, n / 100));
  std::set<uint32_t> synsets;
  while (synsets.size() < classes) synsets.insert(1000000 + rng() % 9000000);
  int64_t ctime = 1'600'000'000'000'000'000;
  uint64_t ino = 5'000'000;
  size_t made = 0, k = 0;
  for (uint32_t s : synsets) {
    const size_t want = (n - made) / (classes - k++);
    std::set<uint32_t> nums;
    while (nums.size() < want) nums.insert(1 + rng() % 60000);
    std::vector<DigestFile> cls;
    char name[64];
    for (uint32_t num : nums) {
      snprintf(name, sizeof name, "train/n%08u/n%08u_%u.JPEG", s, s, num);
      FileVersion v{20'000 + rng() % 230'000,
                    1'330'000'000'000'000'000 +
                        static_cast<int64_t>(rng() % (30 * 86400ull * 1'000'000'000ull)),
                    0, 0};
      cls.push_back({name, v, static_cast<uint32_t>(1 + rng() % 120),
                     static_cast<double>(rng() & 0xFFFFFFFFu) / 4294967296.0});
    }
    std::vector<size_t> extract(cls.size());
    for (size_t i = 0; i < extract.size(); ++i) extract[i] = i;
    std::shuffle(extract.begin(), extract.end(), rng);
    for (size_t i : extract) {
      cls[i].version.ctime_ns = ctime += 50'000;
      cls[i].version.ino = ino++;
    }
    for (auto& f : cls) d.files.push_back(std::move(f));
    made += want;
  }
  std::sort(d.files.begin(), d.files.end(),
            [](const DigestFile& x, const DigestFile& y) { return x.path < y.path; });
  return d;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

TEST(DigestWireTest, ImageNetLikeDigestCostsAtMostEightBytesPerObject) {
  const char* env = std::getenv("CLAIRFS_DIGEST_OBJECTS");
  const size_t n = env ? std::strtoull(env, nullptr, 10) : 100'000;
  Digest d = ImageNetLike(n, 12);
  ASSERT_EQ(d.files.size(), n);
  auto t0 = std::chrono::steady_clock::now();
  const Catalog c = EncodeCatalog(d);
  const double t_catalog = Seconds(t0);
  t0 = std::chrono::steady_clock::now();
  const auto lean = EncodeDigest(d, c, false);
  const double t_digest = Seconds(t0);
  const auto full = EncodeDigest(d, c, true);
  std::optional<Catalog> held;
  t0 = std::chrono::steady_clock::now();
  auto first = Decode(full, &held);
  const double t_decode_full = Seconds(t0);
  ASSERT_TRUE(first);
  t0 = std::chrono::steady_clock::now();
  auto again = Decode(lean, &held);
  const double t_decode_lean = Seconds(t0);
  ASSERT_TRUE(again);
  ExpectSameFiles(*again, d);
  // What version 3 sent: per object a 4-byte length, the key, 32 bytes of version, freq and a
  // double.
  uint64_t v3 = 8 + 4 + 8 + 4 + 16 + 8;
  for (const auto& f : d.files) v3 += 4 + f.path.size() + 32 + 4 + 8;
  const double per_digest = static_cast<double>(lean.size()) / n;
  const double per_catalog = static_cast<double>(c.bytes.size()) / n;
  printf(
      "digest of %zu objects: %zu bytes (%.3f per object); catalog %zu bytes (%.2f per "
      "object); both %zu bytes (%.2f per object); protocol 3: %llu bytes (%.1f per object)\n",
      n, lean.size(), per_digest, c.bytes.size(), per_catalog, full.size(),
      static_cast<double>(full.size()) / n, static_cast<unsigned long long>(v3),
      static_cast<double>(v3) / n);
  printf(
      "times: catalog encode %.3f s, digest encode %.3f s, decode with catalog %.3f s, "
      "digest alone %.3f s\n",
      t_catalog, t_digest, t_decode_full, t_decode_lean);
  RecordProperty("digest_bytes_per_object", std::to_string(per_digest));
  RecordProperty("catalog_bytes_per_object", std::to_string(per_catalog));
  EXPECT_LE(lean.size(), 8 * n);
  EXPECT_LT(full.size(), v3 / 2);
}

// Raw catalog bytes with a correct hash: every refusal below is about content, not damage.
Catalog RawCatalog(std::string bytes, uint64_t count = 2) {
  Catalog c;
  c.count = count;
  c.bytes = std::move(bytes);
  c.hash = HashBytes(c.bytes.data(), c.bytes.size());
  return c;
}

TEST(DigestWireTest, HostileCatalogsAndDigestsAreRefused) {
  Digest d{1, 2, {1000}, {{"a", {1, 2, 3, 4}, 1, 0.25}, {"b", {5, 6, 7, 8}, 2, 0.5}}};
  const Catalog c = EncodeCatalog(d);
  const auto full = EncodeDigest(d, c, true);
  const auto lean = EncodeDigest(d, c, false);
  std::string why;

  // A digest naming a catalog this receiver does not hold, or another one.
  std::optional<Catalog> none;
  EXPECT_FALSE(Decode(lean, &none, &why));
  EXPECT_NE(why.find("names catalog"), std::string::npos) << why;
  EXPECT_NE(why.find("none"), std::string::npos) << why;
  Digest other{1, 3, {1000}, {{"z", {1, 1}, 1, 0.0}}};
  std::optional<Catalog> held = EncodeCatalog(other);
  EXPECT_FALSE(Decode(lean, &held, &why));
  EXPECT_EQ(held->hash, EncodeCatalog(other).hash);  // unchanged

  // A carried catalog that does not match its hash (one flipped byte anywhere in it).
  const size_t at = full.size() - c.bytes.size() - (1 + 2 + 2 * 4);  // count, freqs, firsts
  ASSERT_EQ(std::string(full.data() + at, c.bytes.size()), c.bytes);
  for (size_t i = 0; i < c.bytes.size(); ++i) {
    auto bad = full;
    bad[at + i] ^= 0x10;
    std::optional<Catalog> h;
    EXPECT_FALSE(Decode(bad, &h, &why)) << i;
    EXPECT_NE(why.find("damaged"), std::string::npos) << why;
    EXPECT_FALSE(h);
  }
  // Any flipped byte: refused or decoded, never a crash (run under the sanitizers too).
  for (size_t i = 0; i < full.size(); ++i) {
    for (int bit : {0x01, 0x80}) {
      auto bad = full;
      bad[i] ^= static_cast<char>(bit);
      std::optional<Catalog> h;
      std::string e;
      DecodeDigest({bad.data(), bad.size()}, &h, &e);
    }
  }
  // A digest whose count is not its catalog's.
  std::optional<Catalog> h;
  EXPECT_FALSE(Decode(EncodeDigest(other, c, true), &h, &why));
  EXPECT_NE(why.find("count"), std::string::npos) << why;
  // Unknown flags.
  auto flagged = lean;
  flagged[8 + 4 + 8 + 8 + 4 + 8] = 2;
  EXPECT_FALSE(Decode(flagged, &held, &why));

  // Catalog contents: unsorted or duplicate keys, an empty key, a prefix longer than the
  // previous key, counts beyond the bytes, overlong varints, trailing bytes.
  const std::string v0("\0\0\0\0", 4);  // four zero version deltas
  EXPECT_TRUE(
      DecodeCatalog(RawCatalog("\x02\x00\x01"
                               "a"s +
                               v0 +
                               "\x01\x01"
                               "b"s +
                               v0)));
  EXPECT_FALSE(
      DecodeCatalog(RawCatalog("\x02\x00\x01"
                               "b"s +
                               v0 +
                               "\x00\x01"
                               "a"s +
                               v0)));
  EXPECT_FALSE(
      DecodeCatalog(RawCatalog("\x02\x00\x01"
                               "a"s +
                               v0 +
                               "\x00\x01"
                               "a"s +
                               v0)));
  EXPECT_FALSE(DecodeCatalog(RawCatalog(std::string("\x01\x00\x00", 3) + v0, 1)));
  EXPECT_FALSE(
      DecodeCatalog(RawCatalog("\x02\x00\x01"
                               "a"s +
                               v0 +
                               "\x02\x01"
                               "b"s +
                               v0)));
  EXPECT_FALSE(
      DecodeCatalog(RawCatalog("\xff\xff\xff\xff\x0f\x00\x01"
                               "a"s +
                                   v0,
                               0xFFFFFFFF)));
  EXPECT_FALSE(DecodeCatalog(RawCatalog(std::string(11, '\xff'))));
  EXPECT_FALSE(
      DecodeCatalog(RawCatalog("\x01\x00\x01"
                               "a"s +
                                   v0 + "x"s,
                               1)));
  Catalog wrong_count = RawCatalog(
      "\x01\x00\x01"
      "a"s +
          v0,
      1);
  EXPECT_TRUE(DecodeCatalog(wrong_count));
  wrong_count.count = 2;
  EXPECT_FALSE(DecodeCatalog(wrong_count));
  // A key longer than kMaxKeyBytes.
  Digest longkey{0, 1, {1}, {{std::string(kMaxKeyBytes + 1, 'k'), {1, 1}, 1, 0.0}}};
  EXPECT_FALSE(DecodeCatalog(EncodeCatalog(longkey)));
  // Front coding as an amplifier: long keys sharing all but their last bytes decode to far
  // more than kMaxKeyExpansion times the bytes that came: refused, not allocated.
  Digest bomb{0, 1, {1}, {}};
  const std::string stem(kMaxKeyBytes - 8, 's');
  for (int i = 0; i < 2000; ++i) {
    char num[12];  // five digits for 0..1999; room for any int, as the compiler checks
    snprintf(num, sizeof num, "%05d", i);
    bomb.files.push_back({stem + num, {1, 1}, 1, 0.0});
  }
  const Catalog bc = EncodeCatalog(bomb);
  EXPECT_LT(bc.bytes.size(), 30'000u);  // decoded: 16 MB
  EXPECT_FALSE(DecodeCatalog(bc));
  std::optional<Catalog> bh;
  EXPECT_FALSE(Decode(EncodeDigest(bomb, bc, true), &bh, &why));
  EXPECT_NE(why.find("limits"), std::string::npos) << why;
}

// The digest the protocol sent before issue 12: every read object, first as an unquantized
// fraction, in plan order.
Digest UnquantizedDigest(const Plan& plan, const PlacementLimits& limits, int rank) {
  Digest d{rank, 1, limits.tier_capacity, {}};
  const double n = static_cast<double>(std::max<uint64_t>(1, plan.span()));
  for (const PlanObject& o : plan.objects) {
    if (o.freq > 0) d.files.push_back({std::string(o.key), o.version, o.freq, o.first / n});
  }
  return d;
}

TEST(DigestWireTest, PlacementFromWireDigestsEqualsTheUnquantizedOne) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    MemBacking backing;
    const int files = 150;
    auto name = [](int i) { return "d" + std::to_string(i % 7) + "/f" + std::to_string(i); };
    uint64_t total = 0;
    for (int i = 0; i < files; ++i) {
      const size_t size = 100 + rng() % 6000;  // above 4096: chunked
      backing.AddFile(name(i), std::string(size, static_cast<char>('a' + i % 26)));
      total += size;
    }
    const int nodes = 2 + static_cast<int>(rng() % 3);
    std::vector<std::shared_ptr<Plan>> plans;
    std::vector<PlacementLimits> limits;
    std::vector<Digest> before, after;
    std::vector<std::optional<Catalog>> held(nodes);
    for (int r = 0; r < nodes; ++r) {
      std::vector<int> subset;
      for (int i = 0; i < files; ++i) {
        if (rng() % 3 != 0) subset.push_back(i);
      }
      std::vector<std::vector<int>> epochs(1 + rng() % 4);
      for (auto& e : epochs) {
        e = subset;
        std::shuffle(e.begin(), e.end(), rng);
        e.resize(e.size() * (2 + rng() % 3) / 4);
      }
      plans.push_back(clairfs::testing::PlanOfEpochs(backing, epochs, name, nullptr, 4096));
      ASSERT_TRUE(plans.back());
      const uint64_t cap = total / (3 + rng() % 4);
      limits.push_back({{"ram", "ssd"}, {cap / 3, cap - cap / 3}, 4096});
      before.push_back(UnquantizedDigest(*plans[r], limits[r], r));
      Digest mine = MakeDigest(*plans[r], limits[r], r, 1);
      const Catalog c = EncodeCatalog(mine);
      auto d = Decode(EncodeDigest(mine, c, true), &held[r]);
      ASSERT_TRUE(d);
      ExpectSameFiles(*d, mine);
      after.push_back(std::move(*d));
    }
    std::vector<const Digest*> pb, pa;
    for (int r = 0; r < nodes; ++r) {
      pb.push_back(&before[r]);
      pa.push_back(&after[r]);
    }
    const ClusterPlacement cb = PlaceCluster(pb), ca = PlaceCluster(pa);
    EXPECT_EQ(ca.owner, cb.owner);
    EXPECT_EQ(ca.files, cb.files);
    EXPECT_EQ(ca.owned_bytes, cb.owned_bytes);
    EXPECT_EQ(ca.predicted_backing_bytes, cb.predicted_backing_bytes);
    EXPECT_GT(cb.owned_files, 0u);
    EXPECT_LT(cb.owned_files, cb.files);  // room is short: the order decides
    for (int r = 0; r < nodes; ++r) {
      auto xb = plans[r]->Clone(), xa = plans[r]->Clone();
      const LocalPlacement lb = ApplyPlacement(*xb, limits[r], cb, pb, r);
      const LocalPlacement la = ApplyPlacement(*xa, limits[r], ca, pa, r);
      EXPECT_EQ(la.owned_files, lb.owned_files);
      EXPECT_EQ(la.owned_bytes, lb.owned_bytes);
      EXPECT_EQ(la.from_peers_files, lb.from_peers_files);
      EXPECT_EQ(la.from_peer_files, lb.from_peer_files);
      EXPECT_EQ(la.unowned_bytes, lb.unowned_bytes);
      ASSERT_EQ(xa->objects.size(), xb->objects.size());
      for (size_t i = 0; i < xa->objects.size(); ++i) {
        EXPECT_EQ(xa->objects[i].key, xb->objects[i].key);
        EXPECT_EQ(xa->objects[i].place, xb->objects[i].place) << xa->objects[i].key;
      }
      EXPECT_EQ(xa->tier_order, xb->tier_order);
    }
  }
}

// The placement of protocol version 4 (placement.h), from whole digests.
Digest MakeNode(int rank, uint64_t capacity,
                std::vector<std::tuple<std::string, uint32_t, double>> files) {
  Digest d{rank, 1, {capacity}, {}};
  for (auto& [path, freq, first] : files) d.files.push_back({path, {100, 1}, freq, first});
  return d;
}

TEST(PlacementTest, MostFrequentReaderOwnsThenEarliestThenRoomiest) {
  Digest a = MakeNode(0, 1000, {{"f", 1, 0.5}, {"g", 2, 0.1}, {"h", 1, 0.2}});
  Digest b = MakeNode(1, 1000, {{"f", 3, 0.9}, {"g", 2, 0.0}, {"h", 1, 0.6}});
  Digest c = MakeNode(2, 1000, {});
  auto p = PlaceCluster({&a, &b, &c});
  EXPECT_EQ(p.owner.at("f"), 1);  // read most by 1
  EXPECT_EQ(p.owner.at("g"), 1);  // tie: 1 reads it first
  EXPECT_EQ(p.owner.at("h"), 0);  // tie: 0 reads it first
  EXPECT_EQ(p.files, 3u);
  EXPECT_EQ(p.owned_files, 3u);
  EXPECT_EQ(p.predicted_backing_bytes, 300u);  // each file once

  // Readers without room: the roomiest node holds it; nowhere: no owner, read every time.
  Digest small0 = MakeNode(0, 100, {{"x", 2, 0.0}, {"y", 1, 0.1}, {"z", 1, 0.2}});
  Digest small1 = MakeNode(1, 150, {});
  auto q = PlaceCluster({&small0, &small1});
  EXPECT_EQ(q.owner.at("x"), 0);
  EXPECT_EQ(q.owner.at("y"), 1);
  EXPECT_EQ(q.owner.count("z"), 0u);
  EXPECT_EQ(q.predicted_backing_bytes, 100u + 100u + 100u);
}

TEST(PlacementTest, ChunksEveryNodeReadsAlikeAreSpreadOverTheNodes) {
  // 4 nodes read the 400 chunks of one shard equally often and at the same moments (as a
  // shuffled-records job whose ranks see the same order): no node is preferred, so the owners
  // rotate with the key's hash instead of all going to rank 0 (and all fetches to one node).
  std::vector<Digest> nodes;
  for (int r = 0; r < 4; ++r) {
    std::vector<std::tuple<std::string, uint32_t, double>> chunks;
    for (int k = 0; k < 400; ++k) {
      chunks.emplace_back(ObjectKey("shard", {k * 100ull, 100}), 3, k / 400.0);
    }
    nodes.push_back(MakeNode(r, 1'000'000, chunks));
  }
  auto p = PlaceCluster({&nodes[0], &nodes[1], &nodes[2], &nodes[3]});
  std::map<int, int> owned;
  for (const auto& [key, rank] : p.owner) ++owned[rank];
  ASSERT_EQ(owned.size(), 4u);
  for (const auto& [rank, n] : owned) {
    EXPECT_GT(n, 60) << "rank " << rank;  // 100 each on average
    EXPECT_LT(n, 140) << "rank " << rank;
  }
  // The same digests give the same owners on every node.
  auto again = PlaceCluster({&nodes[3], &nodes[1], &nodes[0], &nodes[2]});
  EXPECT_EQ(again.owner, p.owner);
}

TEST(PlacementTest, ApplyPlacementFillsOwnedFilesAndCountsPeerFiles) {
  MemBacking backing;
  for (const char* f : {"f", "g", "h", "k"}) backing.AddFile(f, std::string(100, 'x'));
  ManifestParser parser;
  parser.Feed("f\ng\nh\nf\n");
  PathResolver resolver(backing, {});
  auto plan =
      BuildPlan(std::move(parser).Finish(), resolver, nullptr, StreamChange::kReplace, 1ull << 30);
  ASSERT_TRUE(plan.ok());
  PlacementLimits limits{{"ram"}, {1000}, 1000};
  Digest mine = MakeDigest(*plan.value(), limits, 0, 1);
  Digest other{1, 1, {1000}, {{"g", {100, 1}, 5, 0.0}, {"k", {100, 1}, 1, 0.0}}};
  mine.files.push_back({"k", {100, 1}, 0, 1.0});  // nobody but 1 reads k; force 0 to own it:
  other.tier_capacity = {0};                      // 1 has no room
  mine.files.pop_back();
  auto placement = PlaceCluster({&mine, &other});
  auto local = ApplyPlacement(*plan.value(), limits, placement, {&mine, &other}, 0);
  Plan& p = *plan.value();
  EXPECT_EQ(p.objects[p.Find("f")].place, Placement::Tier(0));
  EXPECT_EQ(p.objects[p.Find("g")].place, Placement::Tier(0));  // 1 reads it more but has no room
  ASSERT_NE(p.Find("k"), kNoPos);                               // owned, not read here: appended
  EXPECT_EQ(p.objects[p.Find("k")].place, Placement::Tier(0));
  EXPECT_EQ(local.owned_files, 4u);
  EXPECT_EQ(local.from_peers_files, 0u);
}

}  // namespace
}  // namespace clairfs::cluster
