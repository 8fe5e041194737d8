// The batch path's wire format (docs/batch-path.md, "The protocol"): frames of a 24-byte header
// and a body, little-endian, over a Unix stream socket. Pure functions, no I/O and no state:
// the server (batch/batch_server.h), the client library (batch/client/batch_client.h) and the
// fuzz test all use them.
//
// Contract: every Decode* reads only inside the span it is given, whatever the bytes say, and
// either fills its output completely and returns WireError::kOk or returns why not (the output
// is then unspecified). Every Encode* produces exactly what the matching Decode* accepts.
// Views (ReadItem::path) point into the decoded body: they live as long as it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace clairfs::batch {

inline constexpr uint32_t kMagic = 0x31424643;  // "CFB1" in memory (little-endian)
inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kHeaderBytes = 24;
inline constexpr uint32_t kMaxBodyBytes = 16u << 20;  // 16 MiB
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr uint64_t kToEnd = UINT64_MAX;  // ReadItem::length: to the end of the file
inline constexpr uint64_t kAlign = 64;          // samples begin at 64-byte aligned offsets
inline constexpr size_t kReadFixedBytes = 24;   // kRead: window, count, reserved
inline constexpr size_t kReadItemBytes = 24;
inline constexpr size_t kReplyFixedBytes = 8;  // kReadReply: count, reserved
inline constexpr size_t kReplyItemBytes = 32;

enum class FrameType : uint16_t {
  kHello = 1,       // client: version; one descriptor attached (the buffer)
  kHelloReply = 2,  // server: version, max_samples, buffer_bytes
  kRead = 3,        // client: window, items, paths
  kReadReply = 4,   // server: one result per item
  kError = 5,       // server: a request refused as a whole
};

// Why bytes were refused. ErrnoOf gives the errno a kError frame carries for each.
enum class WireError {
  kOk,
  kBadMagic,        // not this protocol
  kBadType,         // a frame type this side does not know or does not accept
  kBadFlags,        // flags or reserved fields not 0
  kBodyTooLarge,    // body_bytes over kMaxBodyBytes
  kBadLength,       // the body's length is not what its fields say
  kTooManySamples,  // a kRead of more samples than the server's max_samples
  kNoSamples,       // a kRead of 0 samples
};

// E2BIG for kBodyTooLarge and kTooManySamples, else EPROTO.
int ErrnoOf(WireError e);
const char* WireErrorText(WireError e);

struct Header {
  FrameType type = FrameType::kError;
  uint32_t body_bytes = 0;
  uint64_t tag = 0;
};

// The header's 24 bytes.
void EncodeHeader(const Header& h, uint8_t out[kHeaderBytes]);
// Checks magic, a known type, zero flags and reserved, body_bytes <= kMaxBodyBytes.
WireError DecodeHeader(std::span<const uint8_t> bytes, Header* out);

// --- Bodies (each Encode* returns the whole frame: header and body) ---------------------------
std::vector<uint8_t> EncodeHello(uint64_t tag, uint32_t version = kProtocolVersion);
WireError DecodeHello(std::span<const uint8_t> body, uint32_t* version);

struct HelloReply {
  uint32_t version = kProtocolVersion;
  uint32_t max_samples = 0;
  uint64_t buffer_bytes = 0;
};
std::vector<uint8_t> EncodeHelloReply(uint64_t tag, const HelloReply& r);
WireError DecodeHelloReply(std::span<const uint8_t> body, HelloReply* out);

struct ReadItem {
  uint64_t offset = 0;
  uint64_t length = kToEnd;
  std::string_view path;
};
struct ReadRequest {
  uint64_t window_offset = 0;
  uint64_t window_bytes = 0;
  std::vector<ReadItem> items;
};
// Fails (kBodyTooLarge) when the body would pass kMaxBodyBytes; else *out is the frame. Paths
// are sent as they are: one over kMaxPathBytes is the server's to refuse (EINVAL for its sample).
WireError EncodeRead(uint64_t tag, const ReadRequest& r, std::vector<uint8_t>* out);
// count must be 1..max_samples (kNoSamples, kTooManySamples: checked before anything is
// allocated for the items), and the body exactly as long as the fixed part, the items and the
// paths (whose lengths are not otherwise bounded here: a path's rules are the reader's).
WireError DecodeRead(std::span<const uint8_t> body, uint32_t max_samples, ReadRequest* out);

struct ReplyItem {
  int32_t error = 0;  // 0 or a positive errno
  uint64_t buffer_offset = 0;
  uint64_t length = 0;
  uint64_t file_size = 0;
  bool operator==(const ReplyItem&) const = default;
};
std::vector<uint8_t> EncodeReadReply(uint64_t tag, std::span<const ReplyItem> items);
WireError DecodeReadReply(std::span<const uint8_t> body, std::vector<ReplyItem>* out);

// The message is cut so that the body stays under kMaxBodyBytes.
std::vector<uint8_t> EncodeError(uint64_t tag, int32_t error, std::string_view message);
WireError DecodeError(std::span<const uint8_t> body, int32_t* error, std::string* message);

// The first multiple of kAlign at or after n (n itself when aligned); UINT64_MAX past the end.
inline uint64_t AlignUp(uint64_t n) {
  return n > UINT64_MAX - (kAlign - 1) ? UINT64_MAX : (n + kAlign - 1) / kAlign * kAlign;
}

}  // namespace clairfs::batch
