#include "batch/batch_wire.h"

#include <cerrno>
#include <cstring>

namespace clairfs::batch {
namespace {

void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A frame of type with room for body_bytes of body after the header.
std::vector<uint8_t> Frame(FrameType type, uint64_t tag, size_t body_bytes) {
  std::vector<uint8_t> f(kHeaderBytes + body_bytes, 0);
  EncodeHeader({type, static_cast<uint32_t>(body_bytes), tag}, f.data());
  return f;
}

}  // namespace

int ErrnoOf(WireError e) {
  return e == WireError::kBodyTooLarge || e == WireError::kTooManySamples ? E2BIG : EPROTO;
}

const char* WireErrorText(WireError e) {
  switch (e) {
    case WireError::kOk:
      return "ok";
    case WireError::kBadMagic:
      return "not a batch frame (bad magic)";
    case WireError::kBadType:
      return "unexpected frame type";
    case WireError::kBadFlags:
      return "flags or reserved fields not 0";
    case WireError::kBodyTooLarge:
      return "frame body over 16 MiB";
    case WireError::kBadLength:
      return "frame body of the wrong length";
    case WireError::kTooManySamples:
      return "more samples than max_samples";
    case WireError::kNoSamples:
      return "a read of no samples";
  }
  return "unknown";
}

void EncodeHeader(const Header& h, uint8_t out[kHeaderBytes]) {
  Put32(out, kMagic);
  Put16(out + 4, static_cast<uint16_t>(h.type));
  Put16(out + 6, 0);
  Put32(out + 8, h.body_bytes);
  Put32(out + 12, 0);
  Put64(out + 16, h.tag);
}

WireError DecodeHeader(std::span<const uint8_t> b, Header* out) {
  if (b.size() != kHeaderBytes) return WireError::kBadLength;
  if (Get32(b.data()) != kMagic) return WireError::kBadMagic;
  const uint16_t type = Get16(b.data() + 4);
  if (type < static_cast<uint16_t>(FrameType::kHello) ||
      type > static_cast<uint16_t>(FrameType::kError)) {
    return WireError::kBadType;
  }
  if (Get16(b.data() + 6) != 0 || Get32(b.data() + 12) != 0) return WireError::kBadFlags;
  out->type = static_cast<FrameType>(type);
  out->body_bytes = Get32(b.data() + 8);
  out->tag = Get64(b.data() + 16);
  if (out->body_bytes > kMaxBodyBytes) return WireError::kBodyTooLarge;
  return WireError::kOk;
}

std::vector<uint8_t> EncodeHello(uint64_t tag, uint32_t version) {
  auto f = Frame(FrameType::kHello, tag, 8);
  Put32(f.data() + kHeaderBytes, version);
  return f;
}

WireError DecodeHello(std::span<const uint8_t> body, uint32_t* version) {
  if (body.size() != 8) return WireError::kBadLength;
  if (Get32(body.data() + 4) != 0) return WireError::kBadFlags;
  *version = Get32(body.data());
  return WireError::kOk;
}

std::vector<uint8_t> EncodeHelloReply(uint64_t tag, const HelloReply& r) {
  auto f = Frame(FrameType::kHelloReply, tag, 16);
  uint8_t* p = f.data() + kHeaderBytes;
  Put32(p, r.version);
  Put32(p + 4, r.max_samples);
  Put64(p + 8, r.buffer_bytes);
  return f;
}

WireError DecodeHelloReply(std::span<const uint8_t> body, HelloReply* out) {
  if (body.size() != 16) return WireError::kBadLength;
  out->version = Get32(body.data());
  out->max_samples = Get32(body.data() + 4);
  out->buffer_bytes = Get64(body.data() + 8);
  return WireError::kOk;
}

WireError EncodeRead(uint64_t tag, const ReadRequest& r, std::vector<uint8_t>* out) {
  uint64_t body = kReadFixedBytes + kReadItemBytes * static_cast<uint64_t>(r.items.size());
  for (const ReadItem& item : r.items) {
    body += item.path.size();
    if (body > kMaxBodyBytes) return WireError::kBodyTooLarge;
  }
  if (body > kMaxBodyBytes || r.items.size() > UINT32_MAX) return WireError::kBodyTooLarge;
  *out = Frame(FrameType::kRead, tag, body);
  uint8_t* p = out->data() + kHeaderBytes;
  Put64(p, r.window_offset);
  Put64(p + 8, r.window_bytes);
  Put32(p + 16, static_cast<uint32_t>(r.items.size()));
  p += kReadFixedBytes;
  for (const ReadItem& item : r.items) {
    Put64(p, item.offset);
    Put64(p + 8, item.length);
    Put32(p + 16, static_cast<uint32_t>(item.path.size()));
    p += kReadItemBytes;
  }
  for (const ReadItem& item : r.items) {
    if (!item.path.empty()) std::memcpy(p, item.path.data(), item.path.size());
    p += item.path.size();
  }
  return WireError::kOk;
}

WireError DecodeRead(std::span<const uint8_t> body, uint32_t max_samples, ReadRequest* out) {
  if (body.size() < kReadFixedBytes) return WireError::kBadLength;
  const uint8_t* p = body.data();
  const uint32_t count = Get32(p + 16);
  if (Get32(p + 20) != 0) return WireError::kBadFlags;
  if (count == 0) return WireError::kNoSamples;
  if (count > max_samples) return WireError::kTooManySamples;
  const uint64_t fixed = kReadFixedBytes + kReadItemBytes * static_cast<uint64_t>(count);
  if (body.size() < fixed) return WireError::kBadLength;
  out->window_offset = Get64(p);
  out->window_bytes = Get64(p + 8);
  out->items.clear();
  out->items.resize(count);
  uint64_t paths = 0;
  const uint8_t* item = p + kReadFixedBytes;
  for (uint32_t i = 0; i < count; ++i, item += kReadItemBytes) {
    const uint32_t n = Get32(item + 16);
    if (Get32(item + 20) != 0) return WireError::kBadFlags;
    out->items[i].offset = Get64(item);
    out->items[i].length = Get64(item + 8);
    paths += n;
  }
  if (body.size() - fixed != paths) return WireError::kBadLength;
  const char* text = reinterpret_cast<const char*>(p + fixed);
  item = p + kReadFixedBytes;
  for (uint32_t i = 0; i < count; ++i, item += kReadItemBytes) {
    const uint32_t n = Get32(item + 16);
    out->items[i].path = std::string_view(text, n);
    text += n;
  }
  return WireError::kOk;
}

std::vector<uint8_t> EncodeReadReply(uint64_t tag, std::span<const ReplyItem> items) {
  auto f = Frame(FrameType::kReadReply, tag, kReplyFixedBytes + kReplyItemBytes * items.size());
  uint8_t* p = f.data() + kHeaderBytes;
  Put32(p, static_cast<uint32_t>(items.size()));
  p += kReplyFixedBytes;
  for (const ReplyItem& r : items) {
    Put32(p, static_cast<uint32_t>(r.error));
    Put64(p + 8, r.buffer_offset);
    Put64(p + 16, r.length);
    Put64(p + 24, r.file_size);
    p += kReplyItemBytes;
  }
  return f;
}

WireError DecodeReadReply(std::span<const uint8_t> body, std::vector<ReplyItem>* out) {
  if (body.size() < kReplyFixedBytes) return WireError::kBadLength;
  const uint32_t count = Get32(body.data());
  if (Get32(body.data() + 4) != 0) return WireError::kBadFlags;
  if (body.size() != kReplyFixedBytes + kReplyItemBytes * static_cast<uint64_t>(count)) {
    return WireError::kBadLength;
  }
  out->resize(count);
  const uint8_t* p = body.data() + kReplyFixedBytes;
  for (uint32_t i = 0; i < count; ++i, p += kReplyItemBytes) {
    if (Get32(p + 4) != 0) return WireError::kBadFlags;
    (*out)[i].error = static_cast<int32_t>(Get32(p));
    (*out)[i].buffer_offset = Get64(p + 8);
    (*out)[i].length = Get64(p + 16);
    (*out)[i].file_size = Get64(p + 24);
  }
  return WireError::kOk;
}

std::vector<uint8_t> EncodeError(uint64_t tag, int32_t error, std::string_view message) {
  if (message.size() > kMaxBodyBytes - 8) message = message.substr(0, kMaxBodyBytes - 8);
  auto f = Frame(FrameType::kError, tag, 8 + message.size());
  Put32(f.data() + kHeaderBytes, static_cast<uint32_t>(error));
  if (!message.empty()) std::memcpy(f.data() + kHeaderBytes + 8, message.data(), message.size());
  return f;
}

WireError DecodeError(std::span<const uint8_t> body, int32_t* error, std::string* message) {
  if (body.size() < 8) return WireError::kBadLength;
  if (Get32(body.data() + 4) != 0) return WireError::kBadFlags;
  *error = static_cast<int32_t>(Get32(body.data()));
  message->assign(reinterpret_cast<const char*>(body.data() + 8), body.size() - 8);
  return WireError::kOk;
}

}  // namespace clairfs::batch
