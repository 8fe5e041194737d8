// The batch path's wire codec (batch/batch_wire.h): every frame round-trips, each field the
// spec bounds is refused past its bound, and a time-bounded fuzz of the decoders (random and
// mutated frames) never reads outside its input (ASan builds check that) and never accepts a
// body whose fields disagree with its length.
#include "batch/batch_wire.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "tests/unit/fuzz_budget.h"

namespace clairfs::batch {
namespace {

std::span<const uint8_t> Body(const std::vector<uint8_t>& frame) {
  return std::span<const uint8_t>(frame).subspan(kHeaderBytes);
}

Header HeaderOf(const std::vector<uint8_t>& frame) {
  Header h;
  EXPECT_EQ(DecodeHeader(std::span<const uint8_t>(frame).first(kHeaderBytes), &h), WireError::kOk);
  EXPECT_EQ(h.body_bytes, frame.size() - kHeaderBytes);
  return h;
}

TEST(BatchWire, HeaderLayoutIsTheSpecs) {
  uint8_t b[kHeaderBytes];
  EncodeHeader({FrameType::kRead, 0x01020304, 0x1122334455667788ull}, b);
  const uint8_t want[kHeaderBytes] = {'C',  'F',  'B',  '1',  3,    0,    0,    0,
                                      4,    3,    2,    1,    0,    0,    0,    0,
                                      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
  EXPECT_EQ(0, std::memcmp(b, want, kHeaderBytes));
}

TEST(BatchWire, HeaderRefusals) {
  uint8_t b[kHeaderBytes];
  Header h;
  EncodeHeader({FrameType::kHello, 8, 1}, b);
  EXPECT_EQ(DecodeHeader(b, &h), WireError::kOk);
  EXPECT_EQ(DecodeHeader(std::span<const uint8_t>(b, 23), &h), WireError::kBadLength);
  uint8_t bad[kHeaderBytes];
  std::memcpy(bad, b, kHeaderBytes);
  bad[0] = 'X';
  EXPECT_EQ(DecodeHeader(bad, &h), WireError::kBadMagic);
  std::memcpy(bad, b, kHeaderBytes);
  bad[4] = 9;
  EXPECT_EQ(DecodeHeader(bad, &h), WireError::kBadType);
  bad[4] = 0;
  EXPECT_EQ(DecodeHeader(bad, &h), WireError::kBadType);
  std::memcpy(bad, b, kHeaderBytes);
  bad[6] = 1;
  EXPECT_EQ(DecodeHeader(bad, &h), WireError::kBadFlags);
  std::memcpy(bad, b, kHeaderBytes);
  bad[13] = 1;
  EXPECT_EQ(DecodeHeader(bad, &h), WireError::kBadFlags);
  EncodeHeader({FrameType::kRead, kMaxBodyBytes + 1, 1}, b);
  EXPECT_EQ(DecodeHeader(b, &h), WireError::kBodyTooLarge);
  EXPECT_EQ(ErrnoOf(WireError::kBodyTooLarge), E2BIG);
  EXPECT_EQ(ErrnoOf(WireError::kTooManySamples), E2BIG);
  EXPECT_EQ(ErrnoOf(WireError::kBadMagic), EPROTO);
}

TEST(BatchWire, RoundTrips) {
  uint32_t version = 0;
  auto hello = EncodeHello(7);
  EXPECT_EQ(HeaderOf(hello).type, FrameType::kHello);
  ASSERT_EQ(DecodeHello(Body(hello), &version), WireError::kOk);
  EXPECT_EQ(version, kProtocolVersion);

  HelloReply hr{1, 65536, 1ull << 33}, hr2;
  auto hrf = EncodeHelloReply(8, hr);
  ASSERT_EQ(DecodeHelloReply(Body(hrf), &hr2), WireError::kOk);
  EXPECT_EQ(hr2.max_samples, 65536u);
  EXPECT_EQ(hr2.buffer_bytes, 1ull << 33);

  ReadRequest r{64, 4096, {{0, kToEnd, "a/b.jpg"}, {10, 20, "c"}, {0, 0, ""}}};
  std::vector<uint8_t> rf;
  ASSERT_EQ(EncodeRead(9, r, &rf), WireError::kOk);
  EXPECT_EQ(HeaderOf(rf).tag, 9u);
  EXPECT_EQ(rf.size(), kHeaderBytes + kReadFixedBytes + 3 * kReadItemBytes + 8);
  ReadRequest back;
  ASSERT_EQ(DecodeRead(Body(rf), 3, &back), WireError::kOk);
  EXPECT_EQ(back.window_offset, 64u);
  EXPECT_EQ(back.window_bytes, 4096u);
  ASSERT_EQ(back.items.size(), 3u);
  EXPECT_EQ(back.items[0].path, "a/b.jpg");
  EXPECT_EQ(back.items[0].length, kToEnd);
  EXPECT_EQ(back.items[1].path, "c");
  EXPECT_EQ(back.items[1].offset, 10u);
  EXPECT_EQ(back.items[2].path, "");
  EXPECT_EQ(DecodeRead(Body(rf), 2, &back), WireError::kTooManySamples);

  std::vector<ReplyItem> items = {{0, 64, 100, 100}, {ENOENT, 0, 0, 0}, {0, 192, 5, 1 << 20}};
  auto rr = EncodeReadReply(10, items);
  std::vector<ReplyItem> items2;
  ASSERT_EQ(DecodeReadReply(Body(rr), &items2), WireError::kOk);
  EXPECT_EQ(items, items2);

  auto ef = EncodeError(11, E2BIG, "too many");
  int32_t err = 0;
  std::string msg;
  ASSERT_EQ(DecodeError(Body(ef), &err, &msg), WireError::kOk);
  EXPECT_EQ(err, E2BIG);
  EXPECT_EQ(msg, "too many");
}

TEST(BatchWire, ReadRefusals) {
  ReadRequest r{0, 0, {{0, 1, "x"}}};
  std::vector<uint8_t> f;
  ASSERT_EQ(EncodeRead(1, r, &f), WireError::kOk);
  std::vector<uint8_t> body(f.begin() + kHeaderBytes, f.end());
  ReadRequest out;
  auto longer = body;
  longer.push_back('y');
  EXPECT_EQ(DecodeRead(longer, 10, &out), WireError::kBadLength);
  auto shorter = body;
  shorter.pop_back();
  EXPECT_EQ(DecodeRead(shorter, 10, &out), WireError::kBadLength);
  auto none = body;
  none[16] = 0;
  EXPECT_EQ(DecodeRead(none, 10, &out), WireError::kNoSamples);
  auto huge = body;  // a count the body cannot hold: refused before any allocation
  huge[16] = huge[17] = huge[18] = huge[19] = 0xff;
  EXPECT_EQ(DecodeRead(huge, UINT32_MAX, &out), WireError::kBadLength);
  EXPECT_EQ(DecodeRead(huge, 65536, &out), WireError::kTooManySamples);
  auto long_path = body;  // path_bytes past the body's end
  long_path[kReadFixedBytes + 17] = 0x20;
  EXPECT_EQ(DecodeRead(long_path, 10, &out), WireError::kBadLength);
  // A path over 4096 bytes is carried (its sample gets EINVAL from the server).
  const std::string long_name(kMaxPathBytes + 1, 'a');
  ReadRequest too_long{0, 0, {{0, 1, long_name}}};
  ASSERT_EQ(EncodeRead(1, too_long, &f), WireError::kOk);
  ASSERT_EQ(DecodeRead(std::span<const uint8_t>(f).subspan(kHeaderBytes), 10, &out),
            WireError::kOk);
  EXPECT_EQ(out.items[0].path.size(), kMaxPathBytes + 1);
  EXPECT_EQ(AlignUp(0), 0u);
  EXPECT_EQ(AlignUp(1), 64u);
  EXPECT_EQ(AlignUp(128), 128u);
  EXPECT_EQ(AlignUp(UINT64_MAX - 3), UINT64_MAX);
}

// Random bodies and mutated valid frames through every decoder: no crash, no read outside the
// input (ASan), and an accepted kRead's paths lie inside its body and add up to it.
TEST(BatchWire, FuzzDecoders) {
  constexpr int kInputs = 3'000'000;
  const testing::FuzzBudget budget(0xBA7C4, kInputs);
  std::mt19937_64 rng(budget.seed());
  std::vector<std::vector<uint8_t>> seeds;
  {
    std::vector<uint8_t> f;
    EncodeRead(1, {0, 1 << 20, {{0, kToEnd, "a"}, {5, 5, "dir/b"}}}, &f);
    seeds.push_back(f);
    seeds.push_back(EncodeHello(2));
    seeds.push_back(EncodeHelloReply(3, {1, 5, 6}));
    seeds.push_back(EncodeReadReply(4, std::vector<ReplyItem>{{0, 0, 1, 1}, {2, 0, 0, 0}}));
    seeds.push_back(EncodeError(5, EPROTO, "bad"));
  }
  int done = 0, accepted = 0;
  for (; budget.More(done); ++done) {
    std::vector<uint8_t> in;
    if (rng() % 4 == 0) {
      in.resize(rng() % 200);
      for (auto& b : in) b = static_cast<uint8_t>(rng());
    } else {
      in = seeds[rng() % seeds.size()];
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips && !in.empty(); ++k) {
        switch (rng() % 3) {
          case 0:
            in[rng() % in.size()] = static_cast<uint8_t>(rng());
            break;
          case 1:
            in.resize(rng() % (in.size() + 8));
            break;
          default:
            in.insert(in.begin() + static_cast<long>(rng() % in.size()),
                      static_cast<uint8_t>(rng()));
        }
      }
    }
    Header h;
    if (in.size() >= kHeaderBytes) {
      (void)DecodeHeader(std::span<const uint8_t>(in).first(kHeaderBytes), &h);
    }
    const std::span<const uint8_t> body = in.size() >= kHeaderBytes
                                              ? std::span<const uint8_t>(in).subspan(kHeaderBytes)
                                              : std::span<const uint8_t>(in);
    ReadRequest r;
    if (DecodeRead(body, 65536, &r) == WireError::kOk) {
      ++accepted;
      size_t paths = 0;
      for (const ReadItem& item : r.items) {
        ASSERT_GE(reinterpret_cast<const uint8_t*>(item.path.data()), body.data());
        ASSERT_LE(reinterpret_cast<const uint8_t*>(item.path.data()) + item.path.size(),
                  body.data() + body.size());
        paths += item.path.size();
      }
      ASSERT_EQ(body.size(), kReadFixedBytes + kReadItemBytes * r.items.size() + paths);
    }
    std::vector<ReplyItem> items;
    if (DecodeReadReply(body, &items) == WireError::kOk) {
      ASSERT_EQ(body.size(), kReplyFixedBytes + kReplyItemBytes * items.size());
    }
    uint32_t v;
    (void)DecodeHello(body, &v);
    HelloReply hr;
    (void)DecodeHelloReply(body, &hr);
    int32_t e;
    std::string m;
    (void)DecodeError(body, &e, &m);
  }
  budget.Report("FuzzDecoders", done, std::to_string(accepted) + " reads accepted");
  EXPECT_GE(done, testing::FuzzBudget::kFloor);
}

}  // namespace
}  // namespace clairfs::batch
