// The parts of a cluster node one by one (cluster/cluster_node.h): the message queue, the
// liveness of ranks, the directory of who holds what, the read path and the server, each
// over a LoopbackNetwork where it talks to other ranks. Whole nodes: cluster_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "cluster/loopback_transport.h"
#include "cluster/message_queue.h"
#include "cluster/peer_directory.h"
#include "cluster/peer_liveness.h"
#include "cluster/peer_reader.h"
#include "cluster/peer_server.h"
#include "cluster/protocol.h"
#include "tests/unit/test_util.h"

namespace clairfs::cluster {
namespace {

using namespace std::chrono_literals;
using clairfs::testing::MakeBlob;

TEST(MessageQueueTest, FirstInFirstOutAndClosingWakesWaitersAndDrops) {
  MessageQueue q;
  EXPECT_TRUE(q.Push({1, 7, {'a'}}));
  EXPECT_TRUE(q.Push({2, 7, {'b'}}));
  EXPECT_EQ(q.Pop(0ms)->source, 1);
  EXPECT_EQ(q.Pop()->source, 2);
  EXPECT_FALSE(q.Pop(1ms)) << "empty: the wait times out";
  std::optional<Message> blocked = Message{};
  std::thread waiter([&] { blocked = q.Pop(); });  // empty: waits until closed
  q.Close();
  waiter.join();
  EXPECT_FALSE(blocked);
  EXPECT_FALSE(q.Push({4, 7, {}}));
  EXPECT_FALSE(q.Pop(0ms));

  MessageQueue full;
  full.Push({5, 7, {}});
  full.Close();
  EXPECT_FALSE(full.Pop(0ms)) << "closing drops what was queued";
}

PeerOptions Quick() {
  PeerOptions o;
  o.peer_timeout = 100ms;
  o.down_for = 60s;
  return o;
}

TEST(PeerLivenessTest, DownGoneAndRefusedRanksAreNotLiveAndEachChangeIsReported) {
  PeerLiveness live(0, 4, Quick());
  int changes = 0;
  live.OnChange([&] { ++changes; });
  EXPECT_FALSE(live.Live(0)) << "this node is not a peer";
  EXPECT_TRUE(live.Live(1));
  live.MarkDown(1);
  EXPECT_FALSE(live.Live(1));
  EXPECT_TRUE(live.Reachable(1)) << "a rank that is down still hears broadcasts";
  live.MarkGone(2);
  EXPECT_FALSE(live.Live(2));
  EXPECT_FALSE(live.Reachable(2));
  live.Refuse(3, HeaderCheck::kOtherVersion, kProtocolVersion + 1);
  live.Refuse(3, HeaderCheck::kOtherVersion, kProtocolVersion + 1);
  EXPECT_TRUE(live.Refused(3));
  EXPECT_FALSE(live.Reachable(3));
  EXPECT_EQ(changes, 3) << "down, gone, refused once";
  live.MarkBack(1);
  live.MarkBack(2);
  EXPECT_TRUE(live.Live(1));
  EXPECT_TRUE(live.Live(2));
  EXPECT_EQ(changes, 3) << "coming back is reported by the plan that brings it";
}

TEST(PeerDirectoryTest, TheLastAnnouncementAtTheVersionAskedFromALiveRankNamesTheHolder) {
  PeerLiveness live(0, 3, Quick());
  PeerDirectory dir(live);
  const FileVersion v{100, 1}, w{100, 2};
  dir.Record(1, Have{{{"a", v}, {"b", v}}});
  EXPECT_EQ(dir.Holder("a", v), 1);
  EXPECT_FALSE(dir.Holder("a", w)) << "another version";
  EXPECT_FALSE(dir.Holder("c", v));
  EXPECT_EQ(dir.bytes(), 200u);
  dir.Record(2, Have{{{"a", w}}});
  EXPECT_EQ(dir.Holder("a", w), 2);
  EXPECT_TRUE(dir.AnnouncedBy("a", 2));
  EXPECT_EQ(dir.bytes(), 200u) << "a is counted once, at its last version";
  dir.Forget("a", 1);  // not its holder any more: no effect
  EXPECT_EQ(dir.Holder("a", w), 2);
  dir.Forget("a", 2);
  EXPECT_FALSE(dir.Holder("a", w));
  EXPECT_EQ(dir.bytes(), 100u);
  live.MarkDown(1);
  EXPECT_FALSE(dir.Holder("b", v)) << "a holder that is down is not asked";

  for (int i = 0; i < 1023; ++i) EXPECT_FALSE(dir.Announce("k" + std::to_string(i), v));
  EXPECT_TRUE(dir.Announce("last", v)) << "a full batch goes out at once";
  EXPECT_EQ(dir.TakeAnnouncements().size(), 1024u);
  EXPECT_TRUE(dir.TakeAnnouncements().empty());
}

// Rank 0 reads through a PeerReader; the test answers as rank 1.
class PeerReaderTest : public ::testing::Test {
 protected:
  PeerReaderTest()
      : live_(0, 2, Quick()),
        dir_(live_),
        damage_(&stats_),
        reader_(net_.at(0), dir_, live_, Quick().peer_timeout, &stats_, damage_) {
    pump_ = std::thread([this] {
      while (!stop_) {
        if (auto m = net_.at(0).Receive(5ms)) reader_.OnReply(std::move(*m));
      }
    });
  }
  ~PeerReaderTest() override {
    stop_ = true;
    pump_.join();
  }
  // Rank 1 answers the next request with reply(request), or not at all when it returns empty.
  std::thread Answer(std::function<std::vector<char>(const Request&)> reply) {
    return std::thread([this, reply] {
      auto m = net_.at(1).Receive(5s);
      ASSERT_TRUE(m && m->tag == kRequest);
      auto q = DecodeRequest({m->bytes.data(), m->bytes.size()});
      ASSERT_TRUE(q);
      auto bytes = reply(*q);
      if (!bytes.empty()) net_.at(1).Send(0, kReply, std::move(bytes));
    });
  }

  LoopbackNetwork net_{2};
  ClusterStats stats_;
  PeerLiveness live_;
  PeerDirectory dir_;
  PeerDamage damage_;
  PeerReader reader_;
  std::atomic<bool> stop_{false};
  std::thread pump_;
};

TEST_F(PeerReaderTest, AsksOnlyTheHolderAndChecksWhatComesBack) {
  const BlobPtr blob = MakeBlob("hello");
  const FileVersion v = blob->version();
  EXPECT_EQ(reader_.Get("f", v).status().code(), Code::kNotFound) << "nobody announced it";
  EXPECT_FALSE(net_.at(1).Receive(0ms)) << "and nobody was asked";
  dir_.Record(1, Have{{{"f", v}}});
  EXPECT_TRUE(reader_.Contains("f", v));

  auto t = Answer([&](const Request& q) {
    return EncodeReply({q.id, 1, blob->hash(), v}, blob->data(), blob->size());
  });
  auto r = reader_.Get("f", v);
  t.join();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(std::string(r.value()->data(), r.value()->size()), "hello");
  EXPECT_EQ(stats_.peer_bytes_in.load(), 5u);

  t = Answer([&](const Request& q) {
    return EncodeReply({q.id, 1, blob->hash() ^ 1, v}, blob->data(), blob->size());
  });
  EXPECT_EQ(reader_.Get("f", v).status().code(), Code::kNotFound) << "damaged: a miss";
  t.join();
  EXPECT_EQ(stats_.peer_errors.load(), 1u);

  t = Answer([&](const Request& q) { return EncodeReply({q.id, 0, 0, v}, nullptr, 0); });
  EXPECT_EQ(reader_.Get("f", v).status().code(), Code::kNotFound);
  t.join();
  EXPECT_FALSE(reader_.Contains("f", v)) << "\"not here\": the holder is forgotten";
}

TEST_F(PeerReaderTest, AHolderThatDoesNotAnswerIsMarkedDown) {
  const FileVersion v{5, 1};
  dir_.Record(1, Have{{{"f", v}}});
  auto t = Answer([](const Request&) { return std::vector<char>{}; });
  EXPECT_EQ(reader_.Get("f", v).status().code(), Code::kUnavailable);
  t.join();
  EXPECT_FALSE(live_.Live(1));
  EXPECT_FALSE(reader_.Contains("f", v));
  reader_.Stop();
  live_.MarkBack(1);
  EXPECT_EQ(reader_.Get("f", v).status().code(), Code::kNotFound) << "stopped: every read misses";
}

TEST(PeerServerTest, AnswersFromTheLocalTiersAndKeepsCheckedPushes) {
  LoopbackNetwork net(2);
  ClusterStats stats;
  PeerDamage damage(&stats);
  PeerServer server(net.at(0), &stats, damage);
  const BlobPtr blob = MakeBlob("bytes");
  std::vector<std::string> adopted;
  std::mutex mu;
  server.Start(
      [&](const std::string& key, const FileVersion& v) -> Result<BlobPtr> {
        if (key == "have" && v == blob->version()) return blob;
        return Status::Error(Code::kNotFound, "not here");
      },
      [&](const std::string& key, BlobPtr) {
        std::lock_guard lock(mu);
        adopted.push_back(key);
      },
      2);
  const char* data;
  size_t n;
  for (const char* key : {"have", "miss"}) {
    auto req = EncodeRequest({7, blob->version(), key});
    server.Enqueue({1, kRequest, req});
    auto m = net.at(1).Receive(5s);
    ASSERT_TRUE(m && m->tag == kReply);
    auto h = DecodeReply({m->bytes.data(), m->bytes.size()}, &data, &n);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->id, 7u);
    EXPECT_EQ(h->found != 0, std::string(key) == "have");
    if (h->found) {
      EXPECT_EQ(std::string(data, n), "bytes");
    }
  }
  auto push = EncodePush("pushed", *blob);
  auto bad = push;
  bad.back() ^= 1;
  server.Enqueue({1, kPush, bad});
  server.Enqueue({1, kPush, push});
  ASSERT_TRUE(clairfs::testing::WaitFor([&] {
    std::lock_guard lock(mu);
    return !adopted.empty();
  }));
  ASSERT_TRUE(clairfs::testing::WaitFor([&] { return stats.peer_errors.load() == 1; }));
  server.Stop();
  EXPECT_EQ(adopted, std::vector<std::string>{"pushed"}) << "the damaged push is not kept";
}

}  // namespace
}  // namespace clairfs::cluster
