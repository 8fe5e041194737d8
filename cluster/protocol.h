// The peer protocol: message tags and their encodings (little-endian, native layout).
// Every message begins with an 8-byte header: the magic "CLFS", the protocol version (uint16)
// and two reserved zero bytes. A message without the magic, or of another version, is refused
// (CheckHeader) and its sender treated as down: ranks running different clairfs builds must
// not exchange bytes whose layout they may not share. Bump kProtocolVersion with any change
// of an encoding, here or in plan_parts.h.
//   kPart     the objects a node reads that the receiver coordinates (plan_parts.h), sent
//             to every rank, empty or not, when the node registers a manifest
//   kAssign   a coordinator's answer to a part: the holder of each of its objects
//   kHave     objects a node's tiers hold (announcements, batched)
//   kRequest  "send me key at version", answered by exactly one kReply
//   kFetch    the same, to the node the placement gives it to, which fetches it first if it
//             has not yet (a request's encoding; answered by one kReply once it has it)
//   kReply    the bytes and their xxh3, or "not here" (answered at once, never waited for)
//   kBye      the sender is leaving; stop asking it
//   kPush     an object its owner had not announced when the sender read it from the backing
//             store: the owner may keep it instead of reading the backing store again
//   kReport   the sender's report of itself (node_report.h), sent to every reachable rank once
//             a report period (ReportPeriod, peer_options.h)
// kPart and kAssign are encoded in plan_parts.h, kReport in node_report.h, every other message
// here (kFetch as a kRequest). These nine tags are the whole protocol.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/base/object.h"

namespace clairfs::cluster {

inline constexpr uint32_t kMagic = 0x53464c43;  // "CLFS" in memory order
// 1: unversioned; 2: whole files only; 3: digests list every object's key and version;
// 4: catalogs sent once per rank; 5: partitioned plans (kPart, kAssign) instead of digests;
// 6: a part carries the reader's budget at its receiver, not the reader's capacity;
// 7: node reports (kReport)
inline constexpr uint16_t kProtocolVersion = 7;
inline constexpr size_t kHeaderBytes = 8;

enum class HeaderCheck { kOk, kNoMagic, kOtherVersion };
// Whether bytes begin with this protocol's header; *version: the sender's version, when the
// magic is there.
HeaderCheck CheckHeader(std::string_view bytes, uint16_t* version);
// A kBye message: the header alone.
std::vector<char> EncodeBye();

enum Tag : int {
  kPart = 1,
  kHave = 2,
  kRequest = 3,
  kReply = 4,
  kBye = 5,
  kPush = 6,
  kAssign = 7,
  kFetch = 8,
  kReport = 9,
};

struct Have {
  std::vector<std::pair<std::string, FileVersion>> objects;  // key and version of each
};

struct Request {
  uint64_t id = 0;
  FileVersion version;
  std::string key;  // the object's (cache/base/object_key.h)
};

struct ReplyHeader {
  uint64_t id = 0;
  uint8_t found = 0;
  uint64_t hash = 0;
  FileVersion version;
};

// A push: the key (in a Request, id 0), then a reply header and the bytes.
std::vector<char> EncodePush(const std::string& key, const Blob& blob);
// The key; *header, *data and *size as for DecodeReply.
std::optional<std::string> DecodePush(std::string_view bytes, ReplyHeader* header,
                                      const char** data, size_t* size);

std::vector<char> EncodeHave(const Have& h);
std::optional<Have> DecodeHave(std::string_view bytes);
std::vector<char> EncodeRequest(const Request& r);
std::optional<Request> DecodeRequest(std::string_view bytes);
// A reply: the header, then the object's bytes when found.
std::vector<char> EncodeReply(const ReplyHeader& h, const char* data, size_t size);
// The header; *data and *size point into bytes.
std::optional<ReplyHeader> DecodeReply(std::string_view bytes, const char** data, size_t* size);

}  // namespace clairfs::cluster
