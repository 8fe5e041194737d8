// The peer protocol: message tags and their encodings (little-endian, native layout).
// Every message begins with an 8-byte header: the magic "CLFS", the protocol version (uint16)
// and two reserved zero bytes. A message without the magic, or of another version, is refused
// (CheckHeader) and its sender treated as down: ranks running different clairfs builds must
// not exchange bytes whose layout they may not share. Bump kProtocolVersion with any change
// of an encoding below.
//   kPlan     a node's plan digest, sent to every rank when the node registers a manifest
//   kHave     files a node's tiers now hold (announcements, batched)
//   kRequest  "send me path at version", answered by exactly one kReply
//   kReply    the bytes and their xxh3, or "not here" (answered at once, never waited for)
//   kBye      the sender is leaving; stop asking it
//   kPush     a file its owner had not announced when the sender read it from the backing
//             store: the owner may keep it instead of reading the backing store again
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/object.h"

namespace clairfs::cluster {

inline constexpr uint32_t kMagic = 0x53464c43;   // "CLFS" in memory order
inline constexpr uint16_t kProtocolVersion = 3;  // 1: unversioned; 2: whole files only
inline constexpr size_t kHeaderBytes = 8;

enum class HeaderCheck { kOk, kNoMagic, kOtherVersion };
// Whether bytes begin with this protocol's header; *version: the sender's version, when the
// magic is there.
HeaderCheck CheckHeader(std::string_view bytes, uint16_t* version);
// A kBye message: the header alone.
std::vector<char> EncodeBye();

enum Tag : int { kPlan = 1, kHave = 2, kRequest = 3, kReply = 4, kBye = 5, kPush = 6 };

// One object of a node's plan (a whole file or a chunk: cache/object_key.h).
struct DigestFile {
  std::string path;  // the object's key
  FileVersion version;
  uint32_t freq = 0;  // reads of it in the node's access string
  double first = 0;   // first read, as a fraction of the node's access string (a time proxy)
};

struct Digest {
  int rank = -1;
  uint64_t generation = 0;  // increases with every manifest the node registers
  std::vector<uint64_t> tier_capacity;
  std::vector<DigestFile> files;
};

struct Have {
  std::vector<std::pair<std::string, FileVersion>> files;
};

struct Request {
  uint64_t id = 0;
  FileVersion version;
  std::string path;
};

struct ReplyHeader {
  uint64_t id = 0;
  uint8_t found = 0;
  uint64_t hash = 0;
  FileVersion version;
};

// A push: the path (in a Request, id 0), then a reply header and the bytes.
std::vector<char> EncodePush(const std::string& path, const Blob& blob);
// The path; *header, *data and *size as for DecodeReply.
std::optional<std::string> DecodePush(std::string_view bytes, ReplyHeader* header,
                                      const char** data, size_t* size);

std::vector<char> EncodeDigest(const Digest& d);
std::optional<Digest> DecodeDigest(std::string_view bytes);
std::vector<char> EncodeHave(const Have& h);
std::optional<Have> DecodeHave(std::string_view bytes);
std::vector<char> EncodeRequest(const Request& r);
std::optional<Request> DecodeRequest(std::string_view bytes);
// A reply: the header, then the file's bytes when found.
std::vector<char> EncodeReply(const ReplyHeader& h, const char* data, size_t size);
// The header; *data and *size point into bytes.
std::optional<ReplyHeader> DecodeReply(std::string_view bytes, const char** data, size_t* size);

}  // namespace clairfs::cluster
