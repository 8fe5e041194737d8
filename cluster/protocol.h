// The peer protocol: message tags and their encodings (little-endian, native layout).
// Every message begins with an 8-byte header: the magic "CLFS", the protocol version (uint16)
// and two reserved zero bytes. A message without the magic, or of another version, is refused
// (CheckHeader) and its sender treated as down: ranks running different clairfs builds must
// not exchange bytes whose layout they may not share. Bump kProtocolVersion with any change
// of an encoding below.
//   kPart     the objects a node reads that the receiver coordinates (plan_parts.h), sent
//             to every rank, empty or not, when the node registers a manifest
//   kAssign   a coordinator's answer to a part: the holder of each of its objects
//   kHave     files a node's tiers now hold (announcements, batched)
//   kRequest  "send me path at version", answered by exactly one kReply
//   kFetch    the same, to the node the placement gives it to, which fetches it first if it
//             has not yet (a request's encoding; answered by one kReply once it has it)
//   kReply    the bytes and their xxh3, or "not here" (answered at once, never waited for)
//   kBye      the sender is leaving; stop asking it
//   kPush     a file its owner had not announced when the sender read it from the backing
//             store: the owner may keep it instead of reading the backing store again
// The plan digests below (Digest, Catalog) are the protocol of version 4, which sent every
// node's whole plan to every rank. The daemon no longer sends them; they are kept, with
// PlaceCluster (placement.h), for tools/bench/cluster_scale's side-by-side of the two
// protocols (--protocol broadcast).
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
// 6: a part carries the reader's budget at its receiver, not the reader's capacity
inline constexpr uint16_t kProtocolVersion = 6;
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
};

// One object of a node's plan (a whole file or a chunk: cache/base/object_key.h).
struct DigestFile {
  std::string path;  // the object's key
  FileVersion version;
  uint32_t freq = 0;  // reads of it in the node's access string
  // First read, as a fraction of the node's access string (a time proxy), quantized to 32 bits:
  // an exact multiple of 2^-32 in [0, 1) (QuantizeFirst), so that every node compares the
  // same numbers whether the digest is its own or came over the wire.
  double first = 0;
};

struct Digest {
  int rank = -1;
  uint64_t generation = 0;  // increases with every manifest the node registers
  std::vector<uint64_t> tier_capacity;
  std::vector<DigestFile> files;  // sorted by path, paths unique and nonempty (MakeDigest)
};

// position / span as a multiple of 2^-32: floor(position * 2^32 / span) / 2^32. Strictly
// increasing in position for span <= 2^32 (every Plan's), so one node's order of first reads
// survives the quantization; positions of different nodes closer than 2^-32 of their spans
// may compare equal, and the placement's tie-breaks (placement.h) decide.
double QuantizeFirst(uint64_t position, uint64_t span);

// Digests travel in two parts (issue 12). The catalog: a node's object keys and versions,
// identified by the xxh3 of its encoding, which changes only when the node's object set or a
// version does (not when an epoch is appended over the same files). The digest proper: rank,
// generation, tier capacities, the catalog's hash, and per catalog entry its freq (varint)
// and its first read (32 bits): at most 5 bytes + 4 bytes per object, 5 + 4 for freq < 128.
// A kPlan carries the catalog only to a receiver that has not been sent it yet; the receiver
// keeps the latest catalog of every rank and decodes digests against it.
//
// Catalog encoding: varint count, then per entry (sorted by key): varint length of the prefix
// shared with the previous key, varint suffix length, suffix bytes, then the version's four
// fields each as the zigzag varint of its difference from the previous entry's (the first
// entry's from zero).
struct Catalog {
  uint64_t hash = 0;   // xxh3 of bytes: the catalog's identity and integrity check
  uint64_t count = 0;  // entries
  std::string bytes;   // the encoding
};

// Limits a decoder enforces (a catalog beyond them is refused): the longest key, and the
// decoded key bytes per encoded catalog byte (front coding shrinks shared prefixes; a hostile
// encoding must not turn a small message into a huge allocation).
inline constexpr size_t kMaxKeyBytes = 8192;
inline constexpr size_t kMaxKeyExpansion = 64;

// The catalog of d.files (sorted by path, paths unique and nonempty).
Catalog EncodeCatalog(const Digest& d);
// The entries of a catalog (path and version; freq and first zero), or nullopt when its
// bytes do not decode, do not match its hash and count, or are not strictly sorted.
std::optional<std::vector<DigestFile>> DecodeCatalog(const Catalog& c);

// The kPlan message of d, whose catalog is c (EncodeCatalog(d)); with_catalog: c's bytes
// travel along.
std::vector<char> EncodeDigest(const Digest& d, const Catalog& c, bool with_catalog);
// Decodes a kPlan message. *held: the catalog this receiver last accepted from the sender
// (empty: none). A catalog the message carries is checked (hash, count, order) and, when the
// whole message is valid, replaces *held. The digest is decoded against *held; a digest whose
// catalog hash is not *held's, a bad catalog, or malformed bytes give nullopt and a reason in
// *error (for the log), leaving *held unchanged. Allocations stay proportional to
// bytes.size().
std::optional<Digest> DecodeDigest(std::string_view bytes, std::optional<Catalog>* held,
                                   std::string* error);

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

std::vector<char> EncodeHave(const Have& h);
std::optional<Have> DecodeHave(std::string_view bytes);
std::vector<char> EncodeRequest(const Request& r);
std::optional<Request> DecodeRequest(std::string_view bytes);
// A reply: the header, then the file's bytes when found.
std::vector<char> EncodeReply(const ReplyHeader& h, const char* data, size_t size);
// The header; *data and *size point into bytes.
std::optional<ReplyHeader> DecodeReply(std::string_view bytes, const char** data, size_t* size);

}  // namespace clairfs::cluster
