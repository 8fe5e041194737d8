// BatchServer and BatchReader (batch/) with real parts: a PosixBacking over a temporary
// directory, a prefetcher with a RAM tier, the server on a socket in that directory, read
// through the C++ client (batch/client/batch_client.h) and through raw sockets for the hostile
// cases: the bytes of each sample, per-sample errors, a rewrite between requests, the limits,
// and clients that go away or send garbage while others are served.
#include "batch/batch_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "batch/batch_reader.h"
#include "batch/batch_wire.h"
#include "batch/client/batch_client.h"
#include "cache/tiers/ram_tier.h"
#include "tests/unit/test_util.h"

namespace clairfs {
namespace {

using batch::BatchClient;
using namespace std::chrono_literals;

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

std::string Bytes(const BatchClient::Sample& s) {
  return std::string(reinterpret_cast<const char*>(s.bytes.data()), s.bytes.size());
}

// A raw connection, for what the client library never sends.
int RawConnect(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads one frame within 5 s; false at EOF, timeout or a bad header.
bool RawFrame(int fd, batch::Header* h, std::vector<uint8_t>* body) {
  auto exact = [&](uint8_t* b, size_t n) {
    size_t got = 0;
    while (got < n) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 5000) <= 0) return false;
      const ssize_t r = recv(fd, b + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  };
  uint8_t head[batch::kHeaderBytes];
  if (!exact(head, sizeof(head))) return false;
  if (batch::DecodeHeader(head, h) != batch::WireError::kOk) return false;
  body->resize(h->body_bytes);
  return exact(body->data(), body->size());
}

// True once the peer closed fd (EOF within 5 s).
bool ClosedByPeer(int fd) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) return false;
    char b[4096];
    const ssize_t r = recv(fd, b, sizeof(b), 0);
    if (r == 0) return true;
    if (r < 0) return errno == ECONNRESET;
  }
}

int ErrorOf(const std::vector<uint8_t>& body) {
  int32_t e = 0;
  std::string m;
  return batch::DecodeError(body, &e, &m) == batch::WireError::kOk ? e : -1;
}

class BatchServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mkdir(P("data").c_str(), 0755);
    mkdir(P("data/dir").c_str(), 0755);
    WriteFile(P("data/a"), Pattern(1000, 1));
    WriteFile(P("data/dir/b"), Pattern(300'000, 2));
    WriteFile(P("data/empty"), "");
    symlink("a", P("data/link").c_str());
  }
  void Make(BatchOptions o = {}, Credentials self = OwnCredentials(), bool can_switch = false) {
    auto b = PosixBacking::Open(P("data"), {}, &stats_);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backing_ = std::move(b.value());
    ram_ = std::make_unique<RamTier>("ram", 4 << 20);
    PrefetchOptions po;
    po.staging_capacity = 1 << 20;
    prefetcher_ =
        std::make_unique<Prefetcher>(*backing_, std::vector<Tier*>{ram_.get()}, po, &stats_);
    BatchReader::Parts parts;
    parts.backing = backing_.get();
    parts.prefetcher = prefetcher_.get();
    parts.stats = &stats_;
    parts.fs_stats = &fs_stats_;
    parts.batch_stats = &batch_stats_;
    reader_ = std::make_unique<BatchReader>(parts, self, can_switch, true);
    server_ = std::make_unique<BatchServer>(*reader_, o, batch_stats_);
    ASSERT_TRUE(server_->Start(Sock(), false).ok());
  }
  void TearDown() override {
    if (server_) server_->Stop();
    server_.reset();
    if (prefetcher_) prefetcher_->Stop();
  }
  std::string P(const std::string& rel) const { return dir_.path() + "/" + rel; }
  std::string Sock() const { return P("s.batch"); }
  std::unique_ptr<BatchClient> Client(uint64_t buffer = 1 << 20) {
    std::unique_ptr<BatchClient> c;
    std::string why;
    BatchClient::Options o;
    o.buffer_bytes = buffer;
    o.timeout = 10s;
    EXPECT_EQ(BatchClient::Connect(Sock(), o, &c, &why), 0) << why;
    return c;
  }
  // One read of a and dir/b by a fresh client: the bytes are the files'.
  void ExpectServed() {
    auto c = Client();
    ASSERT_TRUE(c);
    std::vector<BatchClient::Item> items = {{"a"}, {"dir/b"}};
    std::vector<BatchClient::Sample> out;
    std::string why;
    ASSERT_EQ(c->Read(items, 0, batch::kToEnd, &out, &why), 0) << why;
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].error, 0);
    EXPECT_EQ(Bytes(out[0]), Pattern(1000, 1));
    EXPECT_EQ(Bytes(out[1]), Pattern(300'000, 2));
  }

  testing::TempDir dir_;
  Stats stats_;
  FsStats fs_stats_;
  BatchStats batch_stats_;
  std::unique_ptr<PosixBacking> backing_;
  std::unique_ptr<RamTier> ram_;
  std::unique_ptr<Prefetcher> prefetcher_;
  std::unique_ptr<BatchReader> reader_;
  std::unique_ptr<BatchServer> server_;
};

TEST_F(BatchServerTest, SocketModeAndBytes) {
  Make();
  struct stat st;
  ASSERT_EQ(lstat(Sock().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto c = Client();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->max_samples(), 65536u);
  std::vector<BatchClient::Item> items = {
      {"a"}, {"dir/b"}, {"empty"}, {"dir/b", 100, 50}, {"a", 990, 100}, {"a", 5000, 1}};
  std::vector<BatchClient::Sample> out;
  std::string why;
  ASSERT_EQ(c->Read(items, 0, batch::kToEnd, &out, &why), 0) << why;
  ASSERT_EQ(out.size(), items.size());
  for (const auto& s : out) {
    EXPECT_EQ(s.error, 0);
    EXPECT_EQ(s.buffer_offset % 64, 0u);
  }
  EXPECT_EQ(Bytes(out[0]), Pattern(1000, 1));
  EXPECT_EQ(out[0].file_size, 1000u);
  EXPECT_EQ(Bytes(out[1]), Pattern(300'000, 2));
  EXPECT_EQ(out[1].buffer_offset, 1024u);  // the next 64-byte boundary after a's 1000 bytes
  EXPECT_EQ(out[2].length, 0u);
  EXPECT_EQ(Bytes(out[3]), Pattern(300'000, 2).substr(100, 50));
  EXPECT_EQ(Bytes(out[4]), Pattern(1000, 1).substr(990));
  EXPECT_EQ(out[5].length, 0u);  // past the end: nothing, as pread
  EXPECT_EQ(batch_stats_.samples.load(), items.size());
  EXPECT_EQ(batch_stats_.requests.load(), 1u);
  EXPECT_EQ(stats_.file_reads.load(), items.size());  // each consumed as an open is
  EXPECT_EQ(fs_stats_.bytes_read.load(), 1000u + 300'000 + 50 + 10);
  // A window that is not at the buffer's start: samples begin inside it, aligned.
  ASSERT_EQ(c->Read(std::vector<BatchClient::Item>{{"a"}}, 100, 2000, &out, &why), 0) << why;
  EXPECT_EQ(out[0].buffer_offset, 128u);
  EXPECT_EQ(Bytes(out[0]), Pattern(1000, 1));
}

TEST_F(BatchServerTest, PerSampleErrors) {
  Make();
  auto c = Client(4096);
  ASSERT_TRUE(c);
  std::vector<BatchClient::Item> items = {{"missing"},
                                          {"../a"},
                                          {"dir/../a"},
                                          {"/a"},
                                          {"dir//b"},
                                          {"./a"},
                                          {std::string("a\0b", 3)},
                                          {"link"},
                                          {"dir"},
                                          {"dir/b"},
                                          {"a"},
                                          {".clairfs/stats"}};
  std::vector<BatchClient::Sample> out;
  std::string why;
  ASSERT_EQ(c->Read(items, 0, batch::kToEnd, &out, &why), 0) << why;
  const std::vector<int> want = {ENOENT, EINVAL, EINVAL, EINVAL,  EINVAL, EINVAL,
                                 EINVAL, ELOOP,  EINVAL, ENOBUFS, 0,      ELOOP};
  ASSERT_EQ(out.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(out[i].error, want[i]) << i << ": " << items[i].path;
  }
  EXPECT_EQ(Bytes(out[10]), Pattern(1000, 1));  // a sample that fits after one that did not
  EXPECT_EQ(out[9].file_size, 300'000u);
  EXPECT_EQ(batch_stats_.errors.load(), want.size() - 1);
  // Only the sample served was consumed in the plan: one refused for the window's room is
  // not, so the client's second ask counts once.
  EXPECT_EQ(stats_.file_reads.load(), 1u);
}

TEST_F(BatchServerTest, RewriteBetweenRequestsGivesTheNewVersionWhole) {
  Make();
  auto c = Client();
  ASSERT_TRUE(c);
  std::vector<BatchClient::Sample> out;
  std::string why;
  const std::vector<BatchClient::Item> items = {{"a"}};
  ASSERT_EQ(c->Read(items, 0, batch::kToEnd, &out, &why), 0) << why;
  EXPECT_EQ(Bytes(out[0]), Pattern(1000, 1));
  WriteFile(P("data/a"), Pattern(1500, 7));
  ASSERT_EQ(c->Read(items, 0, batch::kToEnd, &out, &why), 0) << why;
  EXPECT_EQ(out[0].error, 0);
  EXPECT_EQ(out[0].file_size, 1500u);
  EXPECT_EQ(Bytes(out[0]), Pattern(1500, 7));
}

TEST_F(BatchServerTest, PlannedFileFromTheTierThenItsRewriteWhole) {
  // A planned file is served from the RAM tier (no byte from the store), consumed in the plan;
  // rewritten, the tier's copy is of another version and the new one is read whole.
  Make();
  auto plan = testing::PlanOfEpochs(*backing_, {{0, 1}},
                                    [](int i) { return std::string(i == 0 ? "a" : "dir/b"); });
  prefetcher_->Start();
  prefetcher_->Install(plan);
  ASSERT_TRUE(testing::WaitFor([&] { return stats_.fetched_objects.load() == 2; }, 10s));
  auto c = Client();
  ASSERT_TRUE(c);
  std::vector<BatchClient::Sample> out;
  std::string why;
  const std::vector<BatchClient::Item> items = {{"a"}, {"dir/b"}};
  const uint64_t backing_bytes = stats_.backing_bytes.load();
  ASSERT_EQ(c->Read(items, 0, batch::kToEnd, &out, &why), 0) << why;
  EXPECT_EQ(Bytes(out[0]), Pattern(1000, 1));
  EXPECT_EQ(Bytes(out[1]), Pattern(300'000, 2));
  EXPECT_EQ(stats_.backing_bytes.load(), backing_bytes);  // both from the tier
  EXPECT_EQ(stats_.served_tier[0].load(), 2u);
  WriteFile(P("data/dir/b"), Pattern(200'000, 8));
  ASSERT_EQ(c->Read(items, 0, batch::kToEnd, &out, &why), 0) << why;
  EXPECT_EQ(out[1].error, 0);
  EXPECT_EQ(out[1].file_size, 200'000u);
  EXPECT_EQ(Bytes(out[1]), Pattern(200'000, 8));
}

TEST_F(BatchServerTest, OverMaxSamplesIsE2bigAndClosed) {
  BatchOptions o;
  o.max_samples = 4;
  Make(o);
  auto c = Client();
  ASSERT_TRUE(c);
  std::vector<BatchClient::Item> items(5, BatchClient::Item{"a"});
  std::vector<BatchClient::Sample> out;
  std::string why;
  EXPECT_EQ(c->Read(items, 0, batch::kToEnd, &out, &why), E2BIG) << why;
  EXPECT_NE(c->Read(std::vector<BatchClient::Item>{{"a"}}, 0, batch::kToEnd, &out, &why), 0);
  EXPECT_GE(batch_stats_.protocol_errors.load(), 1u);
  ExpectServed();
}

TEST_F(BatchServerTest, RequestsRefusedAsAWholeKeepTheConnection) {
  Make();
  auto c = Client(4096);
  ASSERT_TRUE(c);
  std::vector<BatchClient::Sample> out;
  std::string why;
  const std::vector<BatchClient::Item> items = {{"a"}};
  EXPECT_EQ(c->Read(items, 4000, 200, &out, &why), EINVAL) << why;  // outside the buffer
  ASSERT_EQ(c->Read(items, 0, batch::kToEnd, &out, &why), 0) << why;
  EXPECT_EQ(Bytes(out[0]), Pattern(1000, 1));
  // A read before any hello.
  const int fd = RawConnect(Sock());
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> f;
  ASSERT_EQ(batch::EncodeRead(3, {0, 10, {{0, 1, "a"}}}, &f), batch::WireError::kOk);
  ASSERT_EQ(send(fd, f.data(), f.size(), MSG_NOSIGNAL), static_cast<ssize_t>(f.size()));
  batch::Header h;
  std::vector<uint8_t> body;
  ASSERT_TRUE(RawFrame(fd, &h, &body));
  EXPECT_EQ(h.type, batch::FrameType::kError);
  EXPECT_EQ(h.tag, 3u);
  EXPECT_EQ(ErrorOf(body), EINVAL);
  close(fd);
}

TEST_F(BatchServerTest, GarbageAndHangupsLeaveOthersServed) {
  Make();
  // Garbage: a kError (EPROTO), then the connection is closed.
  int fd = RawConnect(Sock());
  ASSERT_GE(fd, 0);
  const std::string junk = Pattern(100, 9);
  ASSERT_EQ(send(fd, junk.data(), junk.size(), MSG_NOSIGNAL), 100);
  batch::Header h;
  std::vector<uint8_t> body;
  ASSERT_TRUE(RawFrame(fd, &h, &body));
  EXPECT_EQ(h.type, batch::FrameType::kError);
  EXPECT_EQ(ErrorOf(body), EPROTO);
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  // A hello without a descriptor: refused and closed.
  fd = RawConnect(Sock());
  const auto hello = batch::EncodeHello(1);
  ASSERT_EQ(send(fd, hello.data(), hello.size(), MSG_NOSIGNAL), 32);
  ASSERT_TRUE(RawFrame(fd, &h, &body));
  EXPECT_EQ(ErrorOf(body), EPROTO);
  close(fd);
  // A body over 16 MiB announced: E2BIG and closed, the body never read.
  fd = RawConnect(Sock());
  uint8_t head[batch::kHeaderBytes];
  batch::EncodeHeader({batch::FrameType::kRead, batch::kMaxBodyBytes + 1, 5}, head);
  ASSERT_EQ(send(fd, head, sizeof(head), MSG_NOSIGNAL), 24);
  ASSERT_TRUE(RawFrame(fd, &h, &body));
  EXPECT_EQ(ErrorOf(body), E2BIG);
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  // A client that sends a large request and hangs up at once.
  {
    auto c = Client();
    ASSERT_TRUE(c);
    std::vector<uint8_t> f;
    batch::ReadRequest r{0, 1 << 20, {}};
    for (int i = 0; i < 5000; ++i) r.items.push_back({0, batch::kToEnd, "dir/b"});
    ASSERT_EQ(batch::EncodeRead(9, r, &f), batch::WireError::kOk);
    ASSERT_EQ(send(c->socket_fd(), f.data(), f.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(f.size()));
  }  // closed here, mid-request
  // A frame begun and never finished: cut off at the deadline (send_timeout, here the default
  // 10 s, is not waited for: the others are served meanwhile).
  const int half = RawConnect(Sock());
  ASSERT_EQ(send(half, head, 10, MSG_NOSIGNAL), 10);
  ExpectServed();
  EXPECT_TRUE(testing::WaitFor([&] { return server_->Connections() <= 1; }, 10s));
  close(half);
  EXPECT_TRUE(testing::WaitFor([&] { return server_->Connections() == 0; }, 10s));
  EXPECT_GE(batch_stats_.protocol_errors.load(), 3u);
}

TEST_F(BatchServerTest, TooManyConnectionsAreRefused) {
  BatchOptions o;
  o.max_clients = 2;
  Make(o);
  auto c1 = Client();
  auto c2 = Client();
  ASSERT_TRUE(c1 && c2);
  ASSERT_TRUE(testing::WaitFor([&] { return server_->Connections() == 2; }));
  const int fd = RawConnect(Sock());
  ASSERT_GE(fd, 0);
  batch::Header h;
  std::vector<uint8_t> body;
  ASSERT_TRUE(RawFrame(fd, &h, &body));
  EXPECT_EQ(h.type, batch::FrameType::kError);
  EXPECT_EQ(ErrorOf(body), EBUSY);
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  EXPECT_EQ(batch_stats_.refused_connections.load(), 1u);
  c1.reset();
  ASSERT_TRUE(testing::WaitFor([&] { return server_->Connections() == 1; }));
  ExpectServed();  // room again
}

TEST_F(BatchServerTest, PerUserLimit) {
  BatchOptions o;
  o.max_clients_per_user = 1;
  Make(o);
  auto c1 = Client();
  ASSERT_TRUE(c1);
  std::unique_ptr<BatchClient> c2;
  std::string why;
  EXPECT_EQ(BatchClient::Connect(Sock(), {}, &c2, &why), EBUSY) << why;
  EXPECT_NE(why.find("batch.max_clients_per_user"), std::string::npos) << why;
  EXPECT_EQ(batch_stats_.refused_connections.load(), 1u);
}

TEST_F(BatchServerTest, AnotherUserWithoutIdentitySwitchIsRefused) {
  // The daemon as another uid that cannot switch identities: this process's reads are
  // another user's, refused whatever the modes say.
  Credentials self = OwnCredentials();
  self.uid += 1;
  Make({}, self, false);
  auto c = Client();
  ASSERT_TRUE(c);
  std::vector<BatchClient::Sample> out;
  std::string why;
  ASSERT_EQ(c->Read(std::vector<BatchClient::Item>{{"a"}}, 0, batch::kToEnd, &out, &why), 0);
  EXPECT_EQ(out[0].error, EACCES);
  EXPECT_EQ(batch_stats_.denied.load(), 1u);
}

// Sends a hello with fd attached on socket s and returns the errno of the kError it gets (0 for
// a kHelloReply).
int Hello(int s, int fd) {
  const auto f = batch::EncodeHello(1);
  iovec iov{const_cast<uint8_t*>(f.data()), f.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  if (sendmsg(s, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(f.size())) return -1;
  batch::Header h;
  std::vector<uint8_t> body;
  if (!RawFrame(s, &h, &body)) return -1;
  return h.type == batch::FrameType::kHelloReply ? 0 : ErrorOf(body);
}

TEST_F(BatchServerTest, HelloRefusesBuffersItCannotTrust) {
  BatchOptions o;
  o.max_buffer_bytes = 1 << 20;
  Make(o);
  const int s = RawConnect(Sock());
  ASSERT_GE(s, 0);
  const int unsealed = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(unsealed, 4096), 0);
  EXPECT_EQ(Hello(s, unsealed), EINVAL);  // may shrink under the server's writes
  const int big = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(big, 2 << 20), 0);
  ASSERT_EQ(fcntl(big, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_EQ(Hello(s, big), E2BIG);  // over batch.max_buffer_bytes
  const int file = open(P("data/a").c_str(), O_RDWR | O_CLOEXEC);
  EXPECT_EQ(Hello(s, file), EINVAL);  // not a memfd
  const std::string ro_path = "/proc/self/fd/" + std::to_string(big);
  const int read_only = open(ro_path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(read_only, 0);
  EXPECT_EQ(Hello(s, read_only), EINVAL);  // not open for writing
  // Huge pages: a page the pool cannot give would be a SIGBUS in the daemon's mapping.
  uint64_t refusals = 4;
  const int huge = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
  if (huge >= 0 && ftruncate(huge, 2 << 20) == 0 && fcntl(huge, F_ADD_SEALS, F_SEAL_SHRINK) == 0) {
    EXPECT_EQ(Hello(s, huge), EINVAL);
    ++refusals;
  }  // else: this kernel has no huge pages to make one of
  if (huge >= 0) close(huge);
  const int good = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(good, 4096), 0);
  ASSERT_EQ(fcntl(good, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_EQ(Hello(s, good), 0);  // the connection went on through the refusals
  for (int fd : {unsealed, big, file, read_only, good, s}) close(fd);
  EXPECT_EQ(batch_stats_.protocol_errors.load(), refusals);
}

TEST_F(BatchServerTest, StopEndsIdleAndBusyConnectionsPromptly) {
  Make();
  auto idle = Client();
  ASSERT_TRUE(idle);
  const int half = RawConnect(Sock());  // in the middle of a frame
  uint8_t head[batch::kHeaderBytes];
  batch::EncodeHeader({batch::FrameType::kRead, 100, 1}, head);
  ASSERT_EQ(send(half, head, sizeof(head), MSG_NOSIGNAL), 24);
  ASSERT_TRUE(testing::WaitFor([&] { return server_->Connections() == 2; }));
  const auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_EQ(server_->Connections(), 0u);
  std::vector<BatchClient::Sample> out;
  std::string why;
  EXPECT_NE(idle->Read(std::vector<BatchClient::Item>{{"a"}}, 0, batch::kToEnd, &out, &why), 0);
  EXPECT_TRUE(ClosedByPeer(half));
  close(half);
}

TEST_F(BatchServerTest, StaleSocketIsReplacedAndStopRemovesIt) {
  // A socket file left behind (a killed daemon) is replaced; anything else is refused.
  const int s = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, Sock().c_str(), sizeof(a.sun_path) - 1);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  close(s);
  Make();
  ExpectServed();
  server_->Stop();
  struct stat st;
  EXPECT_NE(lstat(Sock().c_str(), &st), 0);
  WriteFile(Sock(), "x");
  BatchServer other(*reader_, {}, batch_stats_);
  EXPECT_FALSE(other.Start(Sock(), false).ok());                    // not a socket: left alone
  EXPECT_FALSE(other.Start(P(std::string(120, 'x')), false).ok());  // over sun_path
}

}  // namespace
}  // namespace clairfs
