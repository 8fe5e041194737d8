#include "cluster/protocol.h"

#include <cstring>

#include "cluster/message_codec.h"
#include "cluster/wire.h"

namespace clairfs::cluster {

using wire::GetVersion;
using wire::kVersionBytes;
using wire::PutVersion;

HeaderCheck CheckHeader(std::string_view bytes, uint16_t* version) {
  uint32_t magic;
  if (bytes.size() < kHeaderBytes) return HeaderCheck::kNoMagic;
  std::memcpy(&magic, bytes.data(), 4);
  if (magic != kMagic) return HeaderCheck::kNoMagic;
  std::memcpy(version, bytes.data() + 4, 2);
  return *version == kProtocolVersion ? HeaderCheck::kOk : HeaderCheck::kOtherVersion;
}

std::vector<char> EncodeBye() { return MessageWriter().Take(); }

std::vector<char> EncodeHave(const Have& h) {
  wire::Writer w = MessageWriter();
  w.Put<uint64_t>(h.objects.size());
  for (const auto& [key, version] : h.objects) {
    w.PutString(key);
    PutVersion(w, version);
  }
  return w.Take();
}

std::optional<Have> DecodeHave(std::string_view bytes) {
  wire::Reader r = MessageReader(bytes);
  Have h;
  uint64_t n;
  if (!r.Get(&n) || n > bytes.size()) return {};
  h.objects.resize(n);
  for (auto& [key, version] : h.objects) {
    if (!r.GetString(&key) || !GetVersion(r, &version)) return {};
  }
  if (!r.Done()) return {};
  return h;
}

std::vector<char> EncodeRequest(const Request& q) {
  wire::Writer w = MessageWriter();
  w.Put(q.id);
  PutVersion(w, q.version);
  w.PutString(q.key);
  return w.Take();
}

std::optional<Request> DecodeRequest(std::string_view bytes) {
  wire::Reader r = MessageReader(bytes);
  Request q;
  if (!r.Get(&q.id) || !GetVersion(r, &q.version) || !r.GetString(&q.key) || !r.Done()) {
    return {};
  }
  return q;
}

std::vector<char> EncodeReply(const ReplyHeader& h, const char* data, size_t size) {
  wire::Writer w = MessageWriter();
  w.Put(h.id);
  w.Put(h.found);
  w.Put(h.hash);
  PutVersion(w, h.version);
  if (h.found) w.PutBytes(data, size);
  return w.Take();
}

std::optional<ReplyHeader> DecodeReply(std::string_view bytes, const char** data, size_t* size) {
  wire::Reader r = MessageReader(bytes);
  ReplyHeader h;
  if (!r.Get(&h.id) || !r.Get(&h.found) || !r.Get(&h.hash) || !GetVersion(r, &h.version)) {
    return {};
  }
  const std::string_view rest = r.Rest();
  *data = rest.data();
  *size = rest.size();
  return h;
}

}  // namespace clairfs::cluster

namespace clairfs::cluster {

std::vector<char> EncodePush(const std::string& key, const Blob& blob) {
  std::vector<char> out = EncodeRequest({0, blob.version(), key});
  const std::vector<char> reply =
      EncodeReply({0, 1, blob.hash(), blob.version()}, blob.data(), blob.size());
  out.insert(out.end(), reply.begin(), reply.end());
  return out;
}

std::optional<std::string> DecodePush(std::string_view bytes, ReplyHeader* header,
                                      const char** data, size_t* size) {
  // The request part is a header, the id, a version, a 4-byte length and the key; the reply
  // part (with its own header) follows.
  constexpr size_t kFixed = kHeaderBytes + sizeof(uint64_t) + kVersionBytes;
  uint32_t n;
  if (bytes.size() < kFixed + 4) return {};
  std::memcpy(&n, bytes.data() + kFixed, 4);
  if (bytes.size() - kFixed - 4 < n) return {};
  auto q = DecodeRequest(bytes.substr(0, kFixed + 4 + n));
  if (!q) return {};
  auto h = DecodeReply(bytes.substr(kFixed + 4 + n), data, size);
  if (!h || !h->found) return {};
  *header = *h;
  return std::move(q->key);
}

}  // namespace clairfs::cluster
