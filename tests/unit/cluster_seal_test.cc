// The cluster's seal (cluster/cluster_key.h, cluster/sealed_transport.h): two honest ranks
// over a LoopbackNetwork, and a third endpoint that speaks the wire protocol without the key,
// or injects copies of what it saw into an honest rank's stream. Every refusal is checked where
// the receiving rank takes messages off the network, before any decoding.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "cluster/cluster_key.h"
#include "cluster/loopback_transport.h"
#include "cluster/node_report.h"
#include "cluster/protocol.h"
#include "cluster/sealed_transport.h"
#include "control/node_stats.h"
#include "tests/unit/cluster_node_util.h"
#include "tests/unit/cluster_test_util.h"
#include "tests/unit/mem_backing.h"
#include "tests/unit/test_util.h"

namespace clairfs::cluster {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<const ClusterKey> Key(char fill) {
  auto k = ClusterKey::Create(std::string(kMinKeyBytes, fill));
  EXPECT_TRUE(k.ok()) << k.status().message();
  return k.value();
}

std::string Nonce() {
  auto n = RandomNonce();
  EXPECT_TRUE(n.ok());
  return n.value();
}

// A transport that records what passes through it to the network (a wire tap), and can put a
// recorded message back on the wire as if its rank sent it again.
class Tap : public clairfs::testing::ForwardingTransport {
 public:
  explicit Tap(Transport& inner) : ForwardingTransport(inner), inner_(inner) {}
  void Send(int dst, int tag, std::vector<char> bytes) override {
    {
      std::lock_guard lock(mu_);
      seen_.push_back({dst, tag, bytes});
    }
    inner_.Send(dst, tag, std::move(bytes));
  }
  // The i-th message sent (source: its destination).
  Message seen(size_t i) {
    std::lock_guard lock(mu_);
    return seen_.at(i);
  }
  void Inject(const Message& m) { inner_.Send(m.source, m.tag, m.bytes); }

 private:
  Transport& inner_;
  std::mutex mu_;
  std::vector<Message> seen_;
};

std::vector<char> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string Text(const std::vector<char>& b) { return {b.begin(), b.end()}; }

// Ranks 0 and 1 run sealed transports under one key; rank 2's endpoint is the outsider (a
// member of the launch, as far as the hellos go, but without the key).
class SealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = Key('k');
    for (int r = 0; r < 3; ++r) nonces_.push_back(Nonce());
    hellos_ = Hellos(*key_);
    tap_ = std::make_unique<Tap>(net_.at(1));
    a_ = Seal(net_.at(0), key_, 0);
    b_ = Seal(*tap_, key_, 1);
    a_->CountRefusedIn(&stats_.peer_refused);
  }
  std::vector<std::string> Hellos(const ClusterKey& key) {
    std::vector<std::string> h;
    for (const std::string& n : nonces_) h.push_back(SealedTransport::Hello(key, n));
    return h;
  }
  std::unique_ptr<SealedTransport> Seal(Transport& inner, std::shared_ptr<const ClusterKey> key,
                                        int rank) {
    auto s = SealedTransport::Create(inner, key, nonces_[rank], Hellos(*key));
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(s.value()) : nullptr;
  }
  // Rank 1 sends an honest message after whatever the test put on the wire before it: once
  // rank 0 receives it, everything sent before it was taken off the wire and judged (one
  // first-in, first-out inbox per rank).
  void ExpectOnlyTheHonestOneArrives() {
    b_->Send(0, kHave, Bytes("honest"));
    auto m = a_->Receive(10s);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->source, 1);
    EXPECT_EQ(Text(m->bytes), "honest");
  }

  LoopbackNetwork net_{3};
  std::shared_ptr<const ClusterKey> key_;
  std::vector<std::string> nonces_, hellos_;
  std::unique_ptr<Tap> tap_;
  std::unique_ptr<SealedTransport> a_, b_;
  ClusterStats stats_;
};

TEST_F(SealTest, HonestMessagesArriveWholeInOrderWithoutTheirSeal) {
  for (int i = 0; i < 50; ++i) {
    b_->Send(0, i % 2 ? kHave : kRequest, Bytes("m" + std::to_string(i)));
  }
  for (int i = 0; i < 50; ++i) {
    auto m = a_->Receive(10s);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->tag, i % 2 ? kHave : kRequest);
    EXPECT_EQ(Text(m->bytes), "m" + std::to_string(i));
  }
  EXPECT_EQ(tap_->seen(0).bytes.size(), 2 + kSealBytes) << "the seal travels after the bytes";
  a_->Send(1, kReply, {});  // an empty message is sealed too
  auto back = b_->Receive(10s);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->bytes.empty());
  for (Refusal r : {Refusal::kUnsealed, Refusal::kOtherCluster, Refusal::kOtherSession,
                    Refusal::kForged, Refusal::kReplayed}) {
    EXPECT_EQ(a_->refused(r), 0u) << RefusalName(r);
  }
  EXPECT_FALSE(a_->Receive(0ms)) << "nothing else arrived";
}

TEST_F(SealTest, ConcurrentSendersOnOneTagAreNeverTakenForReplays) {
  // The serve threads answer requests at once: their replies share a tag. Counters are taken
  // and messages queued under one lock, so the order on the wire is the counters' order.
  constexpr int kThreads = 4, kEach = 300;
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        b_->Send(0, t % 2 ? kReply : kHave, Bytes(std::to_string(t) + ":" + std::to_string(i)));
      }
    });
  }
  std::map<int, int> next;  // per thread, the next message expected
  for (int n = 0; n < kThreads * kEach; ++n) {
    auto m = a_->Receive(10s);
    ASSERT_TRUE(m) << n << " received";
    const std::string text = Text(m->bytes);
    const int t = std::stoi(text.substr(0, text.find(':')));
    EXPECT_EQ(std::stoi(text.substr(text.find(':') + 1)), next[t]++) << "one thread's order";
  }
  for (auto& s : senders) s.join();
  EXPECT_EQ(a_->refused(Refusal::kReplayed), 0u);
  EXPECT_EQ(a_->refused(Refusal::kForged), 0u);
}

TEST_F(SealTest, AProtocolMessageWithoutASealIsRefused) {
  // What a process that speaks the wire protocol, but has no key, sends: a well-formed request
  // for a cached file, then the same with a made-up trailer of the right length.
  std::vector<char> request = EncodeRequest(Request{7, FileVersion{}, "train/n01/img.jpg"});
  net_.at(2).Send(0, kRequest, request);
  std::vector<char> dressed = request;
  dressed.resize(dressed.size() + kSealBytes, '\0');
  net_.at(2).Send(0, kRequest, dressed);
  net_.at(2).Send(0, kRequest, {});
  ExpectOnlyTheHonestOneArrives();
  EXPECT_EQ(a_->refused(Refusal::kUnsealed), 3u);
  EXPECT_EQ(stats_.peer_refused.unsealed.load(), 3u) << "counted in the daemon's stats";
}

TEST_F(SealTest, ChangedBytesOrAnotherSenderAreForged) {
  b_->Send(0, kRequest, Bytes("give me train/a.jpg"));
  ASSERT_TRUE(a_->Receive(10s));
  Message m = tap_->seen(0);
  Message changed = m;
  changed.bytes[5] ^= 1;  // one bit of the request
  tap_->Inject(changed);
  Message counter = m;
  counter.bytes[counter.bytes.size() - kMacBytes - 1] ^= 1;  // the counter: a fresh-looking copy
  tap_->Inject(counter);
  // The same sealed bytes, put on the wire by the outsider as its own: the MAC names rank 1.
  net_.at(2).Send(0, m.tag, m.bytes);
  // Sealed for rank 0 but arriving on another tag.
  tap_->Inject(Message{0, kReply, m.bytes});
  ExpectOnlyTheHonestOneArrives();
  EXPECT_EQ(a_->refused(Refusal::kForged), 4u);
  EXPECT_EQ(stats_.peer_refused.forged.load(), 4u);
  EXPECT_EQ(a_->refused(Refusal::kReplayed), 0u);
}

TEST_F(SealTest, AMessageSentAgainIsAReplay) {
  b_->Send(0, kRequest, Bytes("once"));
  b_->Send(0, kRequest, Bytes("twice"));
  ASSERT_EQ(Text(a_->Receive(10s)->bytes), "once");
  ASSERT_EQ(Text(a_->Receive(10s)->bytes), "twice");
  tap_->Inject(tap_->seen(0));  // older than the last accepted
  tap_->Inject(tap_->seen(1));  // the last accepted itself
  ExpectOnlyTheHonestOneArrives();
  EXPECT_EQ(a_->refused(Refusal::kReplayed), 2u);
  EXPECT_EQ(stats_.peer_refused.replayed.load(), 2u);
  // Counters are per tag: a later message of another tag is no replay.
  b_->Send(0, kPush, Bytes("push"));
  EXPECT_EQ(Text(a_->Receive(10s)->bytes), "push");
}

TEST_F(SealTest, AnotherClustersMessagesAreRefused) {
  // Rank 1 of another cluster (its own key) that shares the network.
  auto other_key = Key('o');
  EXPECT_NE(other_key->id(), key_->id());
  auto other = SealedTransport::Create(*tap_, other_key, nonces_[1], Hellos(*other_key));
  ASSERT_TRUE(other.ok());
  other.value()->Send(0, kRequest, Bytes("another job's request"));
  ExpectOnlyTheHonestOneArrives();
  EXPECT_EQ(a_->refused(Refusal::kOtherCluster), 1u);
  EXPECT_EQ(stats_.peer_refused.other_cluster.load(), 1u);
}

TEST_F(SealTest, AnEarlierSessionsMessagesAreRefused) {
  b_->Send(0, kRequest, Bytes("from the first run"));
  ASSERT_TRUE(a_->Receive(10s));
  const Message old = tap_->seen(0);
  // The cluster restarts with the same key: every rank draws a new nonce.
  for (std::string& n : nonces_) n = Nonce();
  a_ = Seal(net_.at(0), key_, 0);
  b_ = Seal(*tap_, key_, 1);
  tap_->Inject(old);
  ExpectOnlyTheHonestOneArrives();
  EXPECT_EQ(a_->refused(Refusal::kOtherSession), 1u);
  // A message rank 1 sealed for rank 2 (its session), put on the wire to rank 0.
  b_->Send(2, kRequest, Bytes("for rank 2"));
  auto to2 = net_.at(2).Receive(10s);
  ASSERT_TRUE(to2);
  tap_->Inject(Message{0, to2->tag, to2->bytes});
  ExpectOnlyTheHonestOneArrives();
  EXPECT_EQ(a_->refused(Refusal::kOtherSession), 2u);
}

// A node report (kReport) travels like every other message: an outsider's is unsealed,
// changed or re-sent copies of an honest one are forged or replayed, another cluster's is
// refused; only the honest one arrives, and decodes.
TEST_F(SealTest, NodeReportsAreSealedLikeEveryMessage) {
  NodeReport report;
  report.rank = 1;
  report.host = "n1";
  report.backing_bytes = 4096;
  b_->Send(0, kReport, EncodeReport(report));
  auto first = a_->Receive(10s);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->tag, kReport);
  auto decoded = DecodeReport(std::string_view(first->bytes.data(), first->bytes.size()));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, report);
  const Message sealed = tap_->seen(0);
  report.backing_bytes = 1ull << 40;
  net_.at(2).Send(0, kReport, EncodeReport(report));  // unsealed: no key
  Message changed = sealed;
  changed.bytes[kHeaderBytes + 3] ^= 1;  // a field of the report
  tap_->Inject(changed);
  tap_->Inject(sealed);  // the same report again
  auto other_key = Key('o');
  auto other = SealedTransport::Create(*tap_, other_key, nonces_[1], Hellos(*other_key));
  ASSERT_TRUE(other.ok());
  other.value()->Send(0, kReport, EncodeReport(report));
  ExpectOnlyTheHonestOneArrives();
  EXPECT_EQ(a_->refused(Refusal::kUnsealed), 1u);
  EXPECT_EQ(a_->refused(Refusal::kForged), 1u);
  EXPECT_EQ(a_->refused(Refusal::kReplayed), 1u);
  EXPECT_EQ(a_->refused(Refusal::kOtherCluster), 1u);
}

// What reporting costs a node: 10,000 reports encoded, sealed, received, checked and decoded
// (one node's share of a period in a cluster of 10,001 ranks; at 1,024 ranks, 1,023 a period
// each way). Printed for docs/architecture.md; no bound on the time (machines differ).
TEST_F(SealTest, TheCostOfReportsSealedAndReceived) {
  constexpr int kReports = 10000;
  NodeReport report;
  report.rank = 1;
  report.host = "gpu-node-0417.example";
  report.tiers = {{TierKind::kRam, 1ull << 35, 1ull << 36, 50000},
                  {TierKind::kSsd, 1ull << 39, 1ull << 40, 600000}};
  const auto start = std::chrono::steady_clock::now();
  size_t bytes = 0;
  for (int i = 0; i < kReports; ++i) {
    report.sequence = i;
    report.backing_bytes = 1000ull * i;
    b_->Send(0, kReport, EncodeReport(report));
    auto m = a_->Receive(10s);
    ASSERT_TRUE(m);
    auto back = DecodeReport(std::string_view(m->bytes.data(), m->bytes.size()));
    ASSERT_TRUE(back);
    ASSERT_EQ(back->sequence, static_cast<uint64_t>(i));
    bytes += m->bytes.size() + kSealBytes;
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d reports sealed, received and decoded: %.1f us each, %zu bytes each on the wire\n",
              kReports, us / kReports, bytes / kReports);
}

TEST_F(SealTest, CreateRefusesARankWithAnotherKeyAndSaysWhich) {
  std::vector<std::string> hellos = hellos_;
  hellos[2] = SealedTransport::Hello(*Key('x'), nonces_[2]);
  auto s = SealedTransport::Create(net_.at(0), key_, nonces_[0], hellos);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("rank 2 was given another cluster key"), std::string::npos)
      << s.status().message();
  hellos = hellos_;
  hellos[1].resize(5);
  s = SealedTransport::Create(net_.at(0), key_, nonces_[0], hellos);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("rank 1 sent a malformed hello"), std::string::npos);
}

// A key file as LoadClusterKey wants it, or not.
class KeyFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes, mode_t mode) {
    const std::string p = dir_.path() + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    EXPECT_EQ(chmod(p.c_str(), mode), 0);
    return p;
  }
  clairfs::testing::TempDir dir_;
};

TEST_F(KeyFileTest, AKeyReadableByItsOwnerAloneLoads) {
  const std::string secret(32, 's');
  auto a = LoadClusterKey(Write("a", secret, 0600));
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = LoadClusterKey(Write("b", secret, 0400));
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(a.value()->id(), b.value()->id()) << "the same secret, the same cluster";
  auto c = LoadClusterKey(Write("c", std::string(32, 't'), 0600));
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a.value()->id(), c.value()->id());
  Mac m1, m2;
  ASSERT_TRUE(a.value()->Sign({"ab", "c"}, &m1));
  ASSERT_TRUE(b.value()->Sign({"a", "bc"}, &m2));
  EXPECT_TRUE(SameMac(m1, m2.data())) << "a MAC of the concatenation";
  ASSERT_TRUE(c.value()->Sign({"abc"}, &m2));
  EXPECT_FALSE(SameMac(m1, m2.data()));
}

TEST_F(KeyFileTest, AKeyOthersCanReadOrOfTheWrongSizeOrALinkIsRefused) {
  const std::string secret(32, 's');
  for (mode_t mode : {0640, 0604, 0660, 0602}) {
    auto k = LoadClusterKey(Write("open", secret, mode));
    ASSERT_FALSE(k.ok()) << std::oct << mode;
    EXPECT_NE(k.status().message().find("readable by its owner alone"), std::string::npos)
        << k.status().message();
  }
  auto short_key = LoadClusterKey(Write("short", std::string(31, 's'), 0600));
  ASSERT_FALSE(short_key.ok());
  EXPECT_NE(short_key.status().message().find("31 bytes"), std::string::npos);
  auto huge = LoadClusterKey(Write("huge", std::string(kMaxKeyBytes + 1, 's'), 0600));
  EXPECT_FALSE(huge.ok());
  const std::string target = Write("target", secret, 0600);
  const std::string link = dir_.path() + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  auto linked = LoadClusterKey(link);
  EXPECT_FALSE(linked.ok()) << "a symbolic link could lead to a file another user controls";
  auto missing = LoadClusterKey(dir_.path() + "/missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("head -c 32 /dev/urandom"), std::string::npos)
      << "the message says how to make a key";
  EXPECT_FALSE(LoadClusterKey(dir_.path()).ok()) << "a directory";
  if (geteuid() == 0) {
    const std::string theirs = Write("theirs", secret, 0600);
    ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
    auto k = LoadClusterKey(theirs);
    ASSERT_FALSE(k.ok()) << "another user's file";
    EXPECT_NE(k.status().message().find("owned by uid 65534"), std::string::npos);
  }
}

// Whole nodes over sealed transports: ranks 0 and 1 share a dataset through the peer tier while
// the outsider (rank 2 of the launch, without the key) asks both, in the wire protocol, for
// every file: it gets no byte, and the cluster's reads are not disturbed.
TEST(SealedClusterTest, AnOutsiderGetsNoBytesWhileTheNodesShareTheirs) {
  constexpr int kFiles = 40;
  constexpr size_t kSize = 1000;
  clairfs::testing::MemBacking backing;
  auto name = [](int i) { return "d/f" + std::to_string(i); };
  std::vector<int> all;
  for (int i = 0; i < kFiles; ++i) {
    backing.AddFile(name(i), std::string(kSize, static_cast<char>('a' + i % 26)));
    all.push_back(i);
  }
  LoopbackNetwork net(3);
  auto key = Key('k');
  std::vector<std::string> nonces = {Nonce(), Nonce(), Nonce()}, hellos;
  for (const std::string& n : nonces) hellos.push_back(SealedTransport::Hello(*key, n));
  std::vector<std::unique_ptr<SealedTransport>> sealed;
  std::vector<NodeStats> stats(2);
  for (int r = 0; r < 2; ++r) {
    auto s = SealedTransport::Create(net.at(r), key, nonces[r], hellos);
    ASSERT_TRUE(s.ok()) << s.status().message();
    sealed.push_back(std::move(s.value()));
    sealed.back()->CountRefusedIn(&stats[r].cluster.peer_refused);
  }
  PeerOptions po;
  po.plan_timeout = 200ms;  // rank 2 never registers a plan
  std::vector<std::unique_ptr<clairfs::testing::Node>> nodes;
  for (int r = 0; r < 2; ++r) {
    nodes.push_back(std::make_unique<clairfs::testing::Node>(backing, *sealed[r],
                                                             kFiles * kSize / 2, po, &stats[r]));
    nodes.back()->prefetcher->Install(clairfs::testing::PlanOfEpochs(backing, {all}, name));
  }
  auto wait_for = [](const std::function<bool()>& done) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(5ms);
    return done();
  };
  // Each node holds half the dataset: the placement splits the files between them.
  for (auto& n : nodes) {
    ASSERT_TRUE(wait_for([&] {
      return n->peer.InfoJson().find("\"state\":\"placed\"") != std::string::npos;
    })) << n->peer.InfoJson();
  }
  for (int i = 0; i < kFiles; ++i) {
    const auto req =
        EncodeRequest(Request{static_cast<uint64_t>(i + 1), backing.Version(name(i)), name(i)});
    net.at(2).Send(0, kRequest, req);
    net.at(2).Send(1, kFetch, req);
  }
  ASSERT_TRUE(wait_for([&] {
    return stats[0].cluster.peer_refused.unsealed.load() == kFiles &&
           stats[1].cluster.peer_refused.unsealed.load() == kFiles;
  }));
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < kFiles; ++i) {
      auto res = nodes[r]->prefetcher->Open(name(i), backing.Version(name(i)));
      ASSERT_TRUE(res.ok() && res->blob) << name(i);
      EXPECT_EQ(std::string(res->blob->data(), res->blob->size()),
                std::string(kSize, static_cast<char>('a' + i % 26)));
    }
  }
  EXPECT_GT(stats[0].cluster.peer_bytes_out.load() + stats[1].cluster.peer_bytes_out.load(), 0u);
  // Whatever reached the outsider is sealed for rank 2's session, and none of it is a reply.
  while (auto m = net.at(2).Receive(0ms)) EXPECT_NE(m->tag, kReply) << "a reply to the outsider";
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(
        stats[r].cluster.peer_refused.forged.load() + stats[r].cluster.peer_refused.replayed.load(),
        0u);
  }
  nodes.clear();
}

}  // namespace
}  // namespace clairfs::cluster
