#include "cluster/protocol.h"

#include <cstring>
#include <type_traits>

namespace clairfs::cluster {
namespace {

class Writer {
 public:
  Writer() {
    Put(kMagic);
    Put(kProtocolVersion);
    Put<uint16_t>(0);
  }
  template <typename T>
  void Put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const char* p = reinterpret_cast<const char*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void PutString(std::string_view s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void PutBytes(const char* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  std::vector<char> Take() { return std::move(out_); }

 private:
  std::vector<char> out_;
};

// Every Get checks the bounds: a truncated or garbled message decodes to nullopt.
class Reader {
 public:
  // A message without this protocol's header reads as empty: every Get fails.
  explicit Reader(std::string_view in) : in_(in) {
    uint16_t version;
    if (CheckHeader(in, &version) == HeaderCheck::kOk) {
      pos_ = kHeaderBytes;
    } else {
      in_ = {};
    }
  }
  template <typename T>
  bool Get(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* s) {
    uint32_t n;
    if (!Get(&n) || in_.size() - pos_ < n) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  std::string_view Rest() const { return in_.substr(pos_); }
  bool Done() const { return pos_ == in_.size(); }
  bool Valid() const { return !in_.empty(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

constexpr size_t kVersionBytes = 32;  // size, mtime, ctime, inode number

void PutVersion(Writer& w, const FileVersion& v) {
  w.Put(v.size);
  w.Put(v.mtime_ns);
  w.Put(v.ctime_ns);
  w.Put(v.ino);
}

bool GetVersion(Reader& r, FileVersion* v) {
  return r.Get(&v->size) && r.Get(&v->mtime_ns) && r.Get(&v->ctime_ns) && r.Get(&v->ino);
}

}  // namespace

HeaderCheck CheckHeader(std::string_view bytes, uint16_t* version) {
  uint32_t magic;
  if (bytes.size() < kHeaderBytes) return HeaderCheck::kNoMagic;
  std::memcpy(&magic, bytes.data(), 4);
  if (magic != kMagic) return HeaderCheck::kNoMagic;
  std::memcpy(version, bytes.data() + 4, 2);
  return *version == kProtocolVersion ? HeaderCheck::kOk : HeaderCheck::kOtherVersion;
}

std::vector<char> EncodeBye() { return Writer().Take(); }

std::vector<char> EncodeDigest(const Digest& d) {
  Writer w;
  w.Put<int32_t>(d.rank);
  w.Put(d.generation);
  w.Put<uint32_t>(static_cast<uint32_t>(d.tier_capacity.size()));
  for (uint64_t c : d.tier_capacity) w.Put(c);
  w.Put<uint64_t>(d.files.size());
  for (const DigestFile& f : d.files) {
    w.PutString(f.path);
    PutVersion(w, f.version);
    w.Put(f.freq);
    w.Put(f.first);
  }
  return w.Take();
}

std::optional<Digest> DecodeDigest(std::string_view bytes) {
  Reader r(bytes);
  Digest d;
  int32_t rank;
  uint32_t ntiers;
  uint64_t nfiles;
  if (!r.Get(&rank) || !r.Get(&d.generation) || !r.Get(&ntiers) || ntiers > 64) return {};
  d.rank = rank;
  d.tier_capacity.resize(ntiers);
  for (auto& c : d.tier_capacity) {
    if (!r.Get(&c)) return {};
  }
  if (!r.Get(&nfiles) || nfiles > bytes.size()) return {};
  d.files.resize(nfiles);
  for (DigestFile& f : d.files) {
    if (!r.GetString(&f.path) || !GetVersion(r, &f.version) || !r.Get(&f.freq) ||
        !r.Get(&f.first)) {
      return {};
    }
  }
  if (!r.Done()) return {};
  return d;
}

std::vector<char> EncodeHave(const Have& h) {
  Writer w;
  w.Put<uint64_t>(h.files.size());
  for (const auto& [path, version] : h.files) {
    w.PutString(path);
    PutVersion(w, version);
  }
  return w.Take();
}

std::optional<Have> DecodeHave(std::string_view bytes) {
  Reader r(bytes);
  Have h;
  uint64_t n;
  if (!r.Get(&n) || n > bytes.size()) return {};
  h.files.resize(n);
  for (auto& [path, version] : h.files) {
    if (!r.GetString(&path) || !GetVersion(r, &version)) return {};
  }
  if (!r.Done()) return {};
  return h;
}

std::vector<char> EncodeRequest(const Request& q) {
  Writer w;
  w.Put(q.id);
  PutVersion(w, q.version);
  w.PutString(q.path);
  return w.Take();
}

std::optional<Request> DecodeRequest(std::string_view bytes) {
  Reader r(bytes);
  Request q;
  if (!r.Get(&q.id) || !GetVersion(r, &q.version) || !r.GetString(&q.path) || !r.Done()) {
    return {};
  }
  return q;
}

std::vector<char> EncodeReply(const ReplyHeader& h, const char* data, size_t size) {
  Writer w;
  w.Put(h.id);
  w.Put(h.found);
  w.Put(h.hash);
  PutVersion(w, h.version);
  if (h.found) w.PutBytes(data, size);
  return w.Take();
}

std::optional<ReplyHeader> DecodeReply(std::string_view bytes, const char** data, size_t* size) {
  Reader r(bytes);
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

std::vector<char> EncodePush(const std::string& path, const Blob& blob) {
  std::vector<char> out = EncodeRequest({0, blob.version(), path});
  const std::vector<char> reply =
      EncodeReply({0, 1, blob.hash(), blob.version()}, blob.data(), blob.size());
  out.insert(out.end(), reply.begin(), reply.end());
  return out;
}

std::optional<std::string> DecodePush(std::string_view bytes, ReplyHeader* header,
                                      const char** data, size_t* size) {
  // The request part is a header, the id, a version, a 4-byte length and the path; the reply
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
  return std::move(q->path);
}

}  // namespace clairfs::cluster
