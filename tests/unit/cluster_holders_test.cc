// The partitioned plan exchange without MPI: the coordinator ring, kPart and kAssign on the
// wire (hostile inputs included), the coordinator's decision and the reader's placement.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "cluster/coordinator_ring.h"
#include "cluster/holders.h"
#include "cluster/message_codec.h"
#include "cluster/plan_parts.h"
#include "cluster/wire.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs::cluster {
namespace {

TEST(CoordinatorRingTest, SharesAreEvenAndALeavingRankMovesOnlyItsObjects) {
  std::vector<int> ranks(16);
  for (int r = 0; r < 16; ++r) ranks[r] = r;
  const CoordinatorRing ring(ranks);
  double total = 0;
  for (int r : ranks) {
    const double s = ring.Share(r);
    total += s;
    EXPECT_GT(s, 0.7 / 16) << r;
    EXPECT_LT(s, 1.3 / 16) << r;
  }
  EXPECT_NEAR(total, 1.0, 1e-9);
  EXPECT_EQ(ring.Share(99), 0.0);
  std::vector<int> without = ranks;
  without.erase(without.begin() + 5);
  const CoordinatorRing smaller(without);
  std::mt19937_64 rng(3);
  std::map<int, int> count;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t h = rng();
    const int c = ring.Coordinator(h);
    ASSERT_GE(c, 0);
    ++count[c];
    const int d = smaller.Coordinator(h);
    if (c != 5) {
      EXPECT_EQ(d, c);  // only rank 5's objects move
    } else {
      EXPECT_NE(d, 5);
    }
  }
  for (int r : ranks) EXPECT_NEAR(count[r] / 100000.0, ring.Share(r), 0.01) << r;
  EXPECT_EQ(CoordinatorRing().Coordinator(1), -1);
  EXPECT_EQ(CoordinatorRing({3}).Coordinator(12345), 3);
  EXPECT_EQ(CoordinatorRing({3}).Share(3), 1.0);
  EXPECT_TRUE(CoordinatorRing({2, 1, 1}) == CoordinatorRing({1, 2}));
}

TEST(PlanPartsTest, RoundTripAndHostileBytes) {
  Part p{7, 0, 2, 1000, {{0x1234, 110000, 3, 17}, {~0ull, 1, 1, 0xFFFFFFFFu, true}}};
  const std::vector<char> bytes = EncodePart(p);
  std::string why;
  auto q = DecodePart({bytes.data(), bytes.size()}, &why);
  ASSERT_TRUE(q) << why;
  EXPECT_EQ(q->seq, 7u);
  EXPECT_EQ(q->generation, 2u);
  EXPECT_EQ(q->budget, 1000u);
  ASSERT_EQ(q->entries.size(), 2u);
  EXPECT_EQ(q->entries[1].key_hash, ~0ull);
  EXPECT_EQ(q->entries[0].bytes, 110000u);
  EXPECT_EQ(q->entries[0].first, 17u);
  EXPECT_EQ(q->entries[0].freq, 3u);
  EXPECT_FALSE(q->entries[0].held);
  EXPECT_EQ(q->entries[1].freq, 1u);
  EXPECT_TRUE(q->entries[1].held);
  EXPECT_EQ(q->entries, p.entries);
  // Every truncation and one byte too many are refused with a reason, never crash.
  for (size_t n = 0; n < bytes.size(); ++n) {
    why.clear();
    EXPECT_FALSE(DecodePart({bytes.data(), n}, &why)) << n;
    EXPECT_FALSE(why.empty());
  }
  std::vector<char> longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(DecodePart({longer.data(), longer.size()}, &why));
  // A count the bytes cannot hold is refused before anything is allocated.
  Part huge{1, 0, 1, 1, {}};
  std::vector<char> h = EncodePart(huge);
  h.back() = static_cast<char>(0xFF);  // the count's varint now continues...
  for (int i = 0; i < 8; ++i) h.push_back(static_cast<char>(0xFF));
  h.push_back(0x01);
  EXPECT_FALSE(DecodePart({h.data(), h.size()}, &why));
  // A zero frequency is malformed, unless the entry is held (held by the node, not read).
  Part zero{1, 0, 1, 1, {{5, 5, 0, 0}}};
  std::vector<char> z = EncodePart(zero);
  why.clear();
  EXPECT_FALSE(DecodePart({z.data(), z.size()}, &why));
  EXPECT_NE(why.find("freq 0"), std::string::npos) << why;
  Part unread{1, 0, 1, 1, {{5, 5, 0, 0xFFFFFFFFu, true}, {6, 7, 2, 3}}};
  std::vector<char> u = EncodePart(unread);
  auto uq = DecodePart({u.data(), u.size()}, &why);
  ASSERT_TRUE(uq) << why;
  EXPECT_EQ(uq->entries, unread.entries);
  // A held entry's freq beyond 32 bits is refused too.
  wire::Writer w = MessageWriter();
  for (uint64_t v : {1, 0, 1, 1, 0, 1}) w.PutVarint(v);  // header, no removed, one entry
  w.Put(uint64_t{5});
  w.PutVarint(5);
  w.PutVarint((uint64_t{1} << 33) | 1);
  w.Put(uint32_t{0});
  std::vector<char> wide = w.Take();
  why.clear();
  EXPECT_FALSE(DecodePart({wide.data(), wide.size()}, &why));
  EXPECT_NE(why.find("freq"), std::string::npos) << why;

  // A delta: the part it changes, the entries it drops, the ones it adds.
  Part delta{8, 7, 2, 1000, {{0x99, 5, 1, 1}}, {0x1234}};
  std::vector<char> db = EncodePart(delta);
  auto dd = DecodePart({db.data(), db.size()}, &why);
  ASSERT_TRUE(dd) << why;
  EXPECT_EQ(dd->base, 7u);
  EXPECT_EQ(dd->removed, std::vector<uint64_t>{0x1234});
  EXPECT_EQ(ApplyDelta(q->entries, dd->removed, dd->entries),
            (std::vector<PartEntry>{q->entries[1], {0x99, 5, 1, 1}}));
  Part bad{8, 0, 2, 1000, {}, {0x1234}};  // a whole part cannot remove anything
  std::vector<char> bb = EncodePart(bad);
  EXPECT_FALSE(DecodePart({bb.data(), bb.size()}, &why));
  std::vector<uint64_t> removed;
  std::vector<PartEntry> added;
  EXPECT_TRUE(MakeDelta(q->entries, {q->entries[1], {0x99, 5, 1, 1}}, &removed, &added));
  EXPECT_EQ(removed, std::vector<uint64_t>{0x1234});
  EXPECT_EQ(added, (std::vector<PartEntry>{{0x99, 5, 1, 1}}));
  EXPECT_FALSE(MakeDelta(q->entries, {{0x98, 5, 1, 1}}, &removed, &added));  // all new

  Assignment a{9, {10, 1000, 4, 400, 1600}, {2, kNoHolder, 0, 0}, {5, 6}};
  const std::vector<char> ab = EncodeAssignment(a, 0);
  auto b = DecodeAssignment({ab.data(), ab.size()}, 0, 3, &why);
  ASSERT_TRUE(b) << why;
  EXPECT_EQ(b->seq, 9u);
  EXPECT_EQ(b->holder, a.holder);
  EXPECT_EQ(b->first, a.first);  // only the receiver's entries carry first
  EXPECT_EQ(b->totals.predicted_backing_bytes, 1600u);
  // Header, seq, totals (1+2+1+2+2), count, then holder + 1 per entry, first for rank 0.
  EXPECT_EQ(ab.size(), 8u + 1 + 8 + 1 + (1 + 1 + 5 + 5));
  EXPECT_FALSE(DecodeAssignment({ab.data(), ab.size()}, 0, 2, &why));  // rank 2 of 2
  for (size_t n = 0; n < ab.size(); ++n) {
    EXPECT_FALSE(DecodeAssignment({ab.data(), n}, 0, 3, &why)) << n;
  }
}

PartEntry Entry(uint64_t h, uint32_t freq, uint32_t first = 0, uint64_t bytes = 100) {
  return {h, bytes, freq, first};
}

TEST(DecideHoldersTest, MostFrequentReaderHoldsWithinItsBudget) {
  // a's budget here: 200 (two objects).
  Part a{1, 0, 1, 200, {Entry(1, 1, 10), Entry(2, 5, 20), Entry(3, 1, 30), Entry(4, 1, 0)}};
  Part b{1, 0, 1, 1250, {Entry(2, 1, 5), Entry(4, 3, 90), Entry(5, 1, 1)}};
  Part c{1, 0, 1, 0, {Entry(6, 1, 1)}};  // no room: what only it reads has no holder
  Decision d = DecideHolders({{0, &a}, {1, &b}, {2, &c}}, 0, 3);
  ASSERT_EQ(d.assignments.size(), 3u);
  // Object 2 goes to a (freq 5 > 1), object 4 to b (3 > 1); 1 and 3 only a reads: a has
  // budget 200 - 100 (object 2) for one more, the earlier-read 1, and 3 is left without one.
  EXPECT_EQ(d.assignments[0].holder, (std::vector<int>{0, 0, kNoHolder, 1}));
  EXPECT_EQ(d.assignments[1].holder, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(d.assignments[2].holder, (std::vector<int>{kNoHolder}));
  // The holder's entries carry the earliest first read across the cluster.
  EXPECT_EQ(d.assignments[0].first, (std::vector<uint32_t>{10, 5}));
  EXPECT_EQ(d.assignments[1].first, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(d.totals.objects, 6u);
  EXPECT_EQ(d.totals.held_objects, 4u);
  // Held objects once; 3 (freq 1) and 6 (freq 1) at every read.
  EXPECT_EQ(d.totals.predicted_backing_bytes, 4 * 100u + 100 + 100);
  for (const Assignment& x : d.assignments) EXPECT_EQ(x.seq, 1u);
}

TEST(DecideHoldersTest, ABudgetSmallerThanAnObjectStillTakesOne) {
  // 1,024 coordinators: 1/1024 of a 200,000-byte capacity (x 1.25) is less than one object.
  Part a{1, 0, 1, 244, {Entry(1, 1, 0, 100000), Entry(2, 1, 1, 100000)}};
  Part b{1, 0, 1, 244, {Entry(1, 1, 5, 100000), Entry(2, 1, 6, 100000)}};
  Decision d = DecideHolders({{0, &a}, {1, &b}}, 0, 1024);
  // One object each (the most budget left goes first), not none.
  EXPECT_EQ(d.assignments[0].holder, (std::vector<int>{0, 1}));
  EXPECT_EQ(d.totals.held_objects, 2u);
}

TEST(DecideHoldersTest, ObjectsEveryNodeReadsAlikeSpreadEvenly) {
  std::vector<Part> parts(4);
  for (int r = 0; r < 4; ++r) {
    parts[r] = Part{static_cast<uint64_t>(r + 1), 0, 1, 327680, {}};  // (1 MiB / 4) x 1.25
    for (uint64_t i = 0; i < 1001; ++i) parts[r].entries.push_back(Entry(i * 7919, 2, i));
  }
  std::vector<ReaderPart> given;
  for (int r = 0; r < 4; ++r) given.push_back({r, &parts[r]});
  Decision d = DecideHolders(given, 1, 4);
  std::map<int, int> held;
  for (int h : d.assignments[0].holder) ++held[h];
  ASSERT_EQ(held.size(), 4u);
  for (auto [r, n] : held) {
    EXPECT_GE(n, 250) << r;
    EXPECT_LE(n, 251) << r;
  }
  EXPECT_EQ(held[1], 251);  // the odd one to the coordinator's turn first
  // Every reader is told the same holder for the same object.
  for (int r = 1; r < 4; ++r) EXPECT_EQ(d.assignments[r].holder, d.assignments[0].holder);
  // Given in another order, the same decision.
  std::vector<ReaderPart> reversed(given.rbegin(), given.rend());
  Decision e = DecideHolders(reversed, 1, 4);
  EXPECT_EQ(e.assignments[3].holder, d.assignments[0].holder);
}

PartEntry Held(uint64_t h, uint32_t freq, uint32_t first = 0, uint64_t bytes = 100) {
  return {h, bytes, freq, first, true};
}

TEST(DecideHoldersTest, AReaderThatHoldsAnObjectKeepsIt) {
  // A restarted cluster: b still holds 1 and 2 on disk, a reads them more often; c is new.
  Part a{1, 0, 1, 1000, {Entry(1, 5, 0), Entry(2, 5, 1), Entry(3, 5, 2)}};
  Part b{1, 0, 1, 1000, {Held(1, 1, 0), Held(2, 1, 1), Entry(3, 1, 2)}};
  Part c{1, 0, 1, 1000, {Entry(1, 1, 0), Entry(2, 1, 1), Entry(3, 1, 2)}};
  Decision d = DecideHolders({{0, &a}, {1, &b}, {2, &c}}, 0, 3);
  EXPECT_EQ(d.assignments[0].holder, (std::vector<int>{1, 1, 0}));  // 3: its frequent reader
  EXPECT_EQ(d.assignments[1].holder, d.assignments[0].holder);
  EXPECT_EQ(d.assignments[2].holder, d.assignments[0].holder);
}

TEST(DecideHoldersTest, HeldObjectsTakeTheirHoldersBudgetFirst) {
  // b has room for two objects and holds 4 and 5. Objects 1 to 3 are read more often, and b
  // reads them as often as a does: were they placed first, b's budget would go to them and its
  // copies of 4 and 5 would be dropped and read again from the store.
  Part a{1,
         0,
         1,
         300,
         {Entry(1, 9, 0), Entry(2, 9, 1), Entry(3, 9, 2), Entry(4, 1, 3), Entry(5, 1, 4)}};
  Part b{
      1, 0, 1, 200, {Entry(1, 9, 0), Entry(2, 9, 1), Entry(3, 9, 2), Held(4, 1, 3), Held(5, 1, 4)}};
  Decision d = DecideHolders({{0, &a}, {1, &b}}, 1, 2);
  EXPECT_EQ(d.assignments[1].holder, (std::vector<int>{0, 0, 0, 1, 1}));
  EXPECT_EQ(d.totals.held_objects, 5u);
}

PartEntry HeldUnread(uint64_t h, uint64_t bytes = 100) { return {h, bytes, 0, 0xFFFFFFFFu, true}; }

TEST(DecideHoldersTest, AnObjectHeldButNotReadStaysWithItsHolder) {
  // A requeue: a holds 1 and 2 from its previous plan and no longer reads them; b reads 1, 2
  // and 3 (holding none); c holds 4, which nobody reads now.
  Part a{1, 0, 1, 200, {HeldUnread(1), HeldUnread(2), HeldUnread(4)}};
  Part b{1, 0, 1, 1000, {Entry(1, 3, 0), Entry(2, 3, 1), Entry(3, 3, 2)}};
  Decision d = DecideHolders({{0, &a}, {1, &b}}, 0, 2);
  // 1 and 2 stay with a (no read again from the store), 3 goes to its reader, 4 to nobody.
  EXPECT_EQ(d.assignments[0].holder, (std::vector<int>{0, 0, kNoHolder}));
  EXPECT_EQ(d.assignments[1].holder, (std::vector<int>{0, 0, 1}));
  // a fills them in its readers' order: their first read is b's.
  EXPECT_EQ(d.assignments[0].first, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(d.totals.objects, 3u);  // 4 is read by nobody: not counted
  EXPECT_EQ(d.totals.held_objects, 3u);
  // A reader that holds it is preferred over a holder that does not read it.
  Part c{1, 0, 1, 1000, {Held(1, 1, 0)}};
  Decision e = DecideHolders({{0, &a}, {1, &b}, {2, &c}}, 0, 3);
  EXPECT_EQ(e.assignments[1].holder, (std::vector<int>{2, 0, 1}));
}

TEST(DecideHoldersTest, AHolderThatDoesNotReadKeepsOnlyWhatItsBudgetHolds) {
  // a holds 1, 2 and 3 and reads none; its budget keeps two. The third goes to its reader.
  Part a{1, 0, 1, 200, {HeldUnread(1), HeldUnread(2), HeldUnread(3)}};
  Part b{1, 0, 1, 1000, {Entry(1, 1, 0), Entry(2, 1, 1), Entry(3, 1, 2)}};
  Decision d = DecideHolders({{0, &a}, {1, &b}}, 0, 2);
  EXPECT_EQ(d.assignments[1].holder, (std::vector<int>{0, 0, 1}));
  // With no budget at all, each goes to its reader.
  a.budget = 0;
  Decision e = DecideHolders({{0, &a}, {1, &b}}, 0, 2);
  EXPECT_EQ(e.assignments[1].holder, (std::vector<int>{1, 1, 1}));
}

TEST(MakePartsTest, BudgetsFollowWhereTheNodeReads) {
  // 40 files of 100 bytes over 4 coordinators, files 0-9 read in a second epoch too: each
  // part's budget is the capacity split by bytes x reads at that coordinator, times the slack,
  // never beyond the bytes read there.
  using clairfs::testing::MemBacking;
  MemBacking backing;
  std::vector<int> all, some;
  for (int i = 0; i < 40; ++i) {
    backing.AddFile("f" + std::to_string(i), std::string(100, 'x'));
    all.push_back(i);
    if (i < 10) some.push_back(i);
  }
  auto plan = clairfs::testing::PlanOfEpochs(backing, {all, some},
                                             [](int i) { return "f" + std::to_string(i); });
  const CoordinatorRing ring({0, 1, 2, 3});
  auto demand = [](const Part& p) { return p.entries.size() * 100; };
  auto weight = [](const Part& p) {
    uint64_t w = 0;
    for (const PartEntry& e : p.entries) w += e.bytes * e.freq;
    return w;
  };
  // Room for everything: every budget is what is read there.
  for (const Part& p : MakeParts(*plan, ring, 4000, 1, 4)) EXPECT_EQ(p.budget, demand(p));
  // Room for a fifth: 800 bytes split by 5,000 bytes x reads, x 1.25.
  std::vector<Part> parts = MakeParts(*plan, ring, 800, 1, 4);
  uint64_t sum = 0;
  for (const Part& p : parts) {
    EXPECT_EQ(p.budget, std::min<uint64_t>(demand(p), weight(p) * 800 * 5 / 4 / 5000));
    sum += p.budget;
  }
  EXPECT_LE(sum, 1000u);
  EXPECT_GE(sum, 996u);  // rounding down at each
  // A part read nowhere has no budget.
  std::vector<Part> five = MakeParts(*plan, CoordinatorRing({0, 1, 2, 3}), 800, 1, 5);
  EXPECT_EQ(five[4].budget, 0u);
  // What the node holds already (a restart) is kept whatever the split gives: 20 files held,
  // room for 8 by the split, at least the held bytes at each coordinator.
  for (uint32_t i = 0; i < 20; ++i) plan->objects[i].held = true;
  for (const Part& p : MakeParts(*plan, ring, 800, 1, 4)) {
    uint64_t held = 0;
    for (const PartEntry& e : p.entries) held += e.held ? e.bytes : 0;
    EXPECT_EQ(p.budget, std::max<uint64_t>(
                            held, std::min<uint64_t>(demand(p), weight(p) * 800 * 5 / 4 / 5000)));
    EXPECT_GE(p.budget, held);
  }
}

TEST(MakePartsTest, ObjectsHeldButNotReadAreNamedWithFreqZeroAndKeptInTheBudget) {
  using clairfs::testing::MemBacking;
  MemBacking backing;
  for (int i = 0; i < 40; ++i) backing.AddFile("f" + std::to_string(i), std::string(100, 'x'));
  // Read: f0-f19. f20-f29 are in the plan but read by no stream (as the tiers' objects a
  // restarted node's prefetcher adds): f20-f24 held, f25-f29 not.
  std::vector<int> read;
  for (int i = 0; i < 20; ++i) read.push_back(i);
  auto plan = clairfs::testing::PlanOfEpochs(backing, {read},
                                             [](int i) { return "f" + std::to_string(i); });
  for (int i = 20; i < 30; ++i) {
    const std::string k = "f" + std::to_string(i);
    const uint32_t id = plan->AddObject(k, backing.Version(k));
    plan->objects[id].held = i < 25;
  }
  plan->Finalize();
  const CoordinatorRing ring({0, 1, 2, 3});
  uint64_t unread = 0, named = 0;
  for (const Part& p : MakeParts(*plan, ring, 4000, 1, 4)) {
    uint64_t bytes = 0;
    for (const PartEntry& e : p.entries) {
      ++named;
      bytes += e.bytes;
      if (e.freq > 0) continue;
      ++unread;
      EXPECT_TRUE(e.held);
      EXPECT_EQ(e.first, 0xFFFFFFFFu);
    }
    EXPECT_EQ(p.budget, bytes);  // room for all: what it reads and what it holds
  }
  EXPECT_EQ(unread, 5u);
  EXPECT_EQ(named, 25u);
  // Room for 10 objects: what it holds (unread or not) is in the budget whatever the split.
  for (int i = 0; i < 5; ++i) plan->objects[plan->Find("f" + std::to_string(i))].held = true;
  uint64_t sum = 0, held_sum = 0;
  for (const Part& p : MakeParts(*plan, ring, 1000, 1, 4)) {
    uint64_t held = 0;
    for (const PartEntry& e : p.entries) held += e.held ? e.bytes : 0;
    EXPECT_GE(p.budget, held);
    sum += p.budget;
    held_sum += held;
  }
  EXPECT_EQ(held_sum, 1000u);
  EXPECT_EQ(sum, 1000u);  // no room beside what it holds: the split gives nothing more
}

TEST(ApplyHoldersTest, HeldObjectsFillTheTiersOthersComeFromPeersOrAreStaged) {
  using clairfs::testing::MemBacking;
  MemBacking backing;
  for (int i = 0; i < 6; ++i) backing.AddFile("f" + std::to_string(i), std::string(100, 'x'));
  backing.AddFile("big", std::string(5000, 'y'));
  auto name = [](int i) { return i == 6 ? std::string("big") : "f" + std::to_string(i); };
  // f0 is read twice.
  auto plan = clairfs::testing::PlanOfEpochs(backing, {{0, 1, 2, 3, 4, 5, 6}, {0}}, name);
  std::unordered_map<uint64_t, HolderInfo> holders;
  holders[KeyHash("f0")] = {0, 7};
  holders[KeyHash("f1")] = {0, 1};
  holders[KeyHash("f2")] = {0, 2};  // beyond the tier: staged
  holders[KeyHash("f3")] = {1, 0};
  holders[KeyHash("f4")] = {2, 0};  // a holder that is not live: as if none
  holders[KeyHash("big")] = {1, 0};
  const PlacementLimits limits{{"ram"}, {200}, 1000};
  LocalPlacement local = ApplyHolders(*plan, limits, holders, 0, [](int r) { return r == 1; });
  auto place = [&](const char* k) { return plan->objects[plan->Find(k)].place; };
  EXPECT_EQ(place("f0"), Placement::Tier(0));  // read most
  EXPECT_EQ(place("f1"), Placement::Tier(0));  // first read earlier than f2's
  EXPECT_EQ(place("f2"), kStaging);
  EXPECT_EQ(place("f3"), kPeer);
  EXPECT_EQ(place("f4"), kStaging);
  EXPECT_EQ(place("f5"), kStaging);
  EXPECT_EQ(place("big"), kDirect);  // larger than the staging window, held by a peer
  // The tier is filled in cluster-wide first-read order: f1 (1) before f0 (7).
  ASSERT_EQ(plan->tier_order.size(), 1u);
  EXPECT_EQ(plan->tier_order[0], (std::vector<uint32_t>{plan->Find("f1"), plan->Find("f0")}));
  EXPECT_EQ(local.owned_files, 2u);
  EXPECT_EQ(local.from_peers_files, 2u);
  EXPECT_EQ(local.from_peer_files.at(1), 2u);
  EXPECT_EQ(local.unowned_files, 3u);  // f2 (beyond the tier), f4, f5
  // A restart: the tier holds f2 already. Given f0, f1 and f2 for room of two, it keeps f2 (no
  // read again) and the more frequent f0; f1, given anew, is read like an unheld object.
  plan->objects[plan->Find("f2")].held = true;
  ApplyHolders(*plan, limits, holders, 0, [](int r) { return r == 1; });
  EXPECT_EQ(place("f0"), Placement::Tier(0));
  EXPECT_EQ(place("f2"), Placement::Tier(0));
  EXPECT_EQ(place("f1"), kStaging);
}

TEST(ApplyHoldersTest, ObjectsHeldButNotReadStayInTheTiersWhenLeftHere) {
  using clairfs::testing::MemBacking;
  MemBacking backing;
  for (int i = 0; i < 6; ++i) backing.AddFile("f" + std::to_string(i), std::string(100, 'x'));
  auto name = [](int i) { return "f" + std::to_string(i); };
  auto plan = clairfs::testing::PlanOfEpochs(backing, {{0, 1}}, name);
  // f2-f5: held by the tiers, read by no stream here; f5 not held (a dead object).
  for (int i = 2; i < 6; ++i) {
    const uint32_t id = plan->AddObject(name(i), backing.Version(name(i)));
    plan->objects[id].held = i < 5;
  }
  plan->Finalize();
  std::unordered_map<uint64_t, HolderInfo> holders;
  holders[KeyHash("f0")] = {0, 5};
  holders[KeyHash("f1")] = {1, 0};
  holders[KeyHash("f2")] = {0, 3};  // left here for its readers
  holders[KeyHash("f3")] = {1, 0};  // given to another node: a spare copy, room permitting
  holders[KeyHash("f5")] = {0, 0};  // not held: never placed in a tier
  // f4: no holder (nobody reads it): a spare copy too, room permitting.
  // Room for three objects: f0 and f2 (given), then one spare copy, f3 (before f4 by key).
  const PlacementLimits limits{{"ssd"}, {300}, 1000};
  LocalPlacement local = ApplyHolders(*plan, limits, holders, 0, [](int) { return true; });
  auto place = [&](const char* k) { return plan->objects[plan->Find(k)].place; };
  EXPECT_EQ(place("f0"), Placement::Tier(0));
  EXPECT_EQ(place("f1"), kPeer);
  EXPECT_EQ(place("f2"), Placement::Tier(0));
  EXPECT_EQ(place("f3"), Placement::Tier(0));
  EXPECT_FALSE(place("f4").InTier());  // no room left: evicted
  EXPECT_FALSE(place("f5").InTier());
  // In the tier's fill order by the cluster's first read: f3 (0), f2 (3), f0 (5).
  EXPECT_EQ(plan->tier_order[0],
            (std::vector<uint32_t>{plan->Find("f3"), plan->Find("f2"), plan->Find("f0")}));
  EXPECT_EQ(local.owned_files, 3u);
  EXPECT_EQ(local.kept_unread_files, 1u);
  EXPECT_EQ(local.kept_unread_bytes, 100u);
  EXPECT_EQ(local.spare_files, 1u);
  EXPECT_EQ(local.from_peers_files, 1u);
  EXPECT_EQ(local.unowned_files, 0u);  // nothing unread counts as read
  // A spare copy of an object read here is read from the tier, not from its holder: f1 held.
  plan->objects[plan->Find("f1")].held = true;
  local = ApplyHolders(*plan, limits, holders, 0, [](int) { return true; });
  EXPECT_EQ(place("f1"), Placement::Tier(0));  // read here: before the unread f3
  EXPECT_FALSE(place("f3").InTier());
  EXPECT_EQ(local.from_peers_files, 0u);
  plan->objects[plan->Find("f1")].held = false;
  // Room for one object: the one read here takes it over the one held for others... unless
  // that one is held and the read one is not: what the tiers hold is kept first.
  const PlacementLimits one{{"ssd"}, {100}, 1000};
  ApplyHolders(*plan, one, holders, 0, [](int) { return true; });
  EXPECT_EQ(place("f2"), Placement::Tier(0));
  EXPECT_EQ(place("f0"), kStaging);
  plan->objects[plan->Find("f0")].held = true;
  local = ApplyHolders(*plan, one, holders, 0, [](int) { return true; });
  EXPECT_EQ(place("f0"), Placement::Tier(0));
  EXPECT_FALSE(place("f2").InTier());  // dropped, and not counted as a read from the store
  EXPECT_EQ(local.unowned_files, 0u);
  EXPECT_EQ(local.kept_unread_files, 0u);
}

}  // namespace
}  // namespace clairfs::cluster
