#include "batch/client/batch_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace clairfs::batch {
namespace {

int Fail(int err, std::string* why, std::string message) {
  if (why) *why = std::move(message);
  return err;
}

int WaitFor(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = poll(&p, 1, static_cast<int>(timeout.count()));
    if (r > 0) return 0;
    if (r == 0) return ETIMEDOUT;
    if (errno != EINTR) return errno;
  }
}

}  // namespace

BatchClient::~BatchClient() {
  if (buffer_) munmap(buffer_, buffer_bytes_);
  if (memfd_ >= 0) close(memfd_);
  if (fd_ >= 0) close(fd_);
}

std::string BatchClient::RelativeTo(std::string_view mountpoint, std::string_view path) {
  while (mountpoint.size() > 1 && mountpoint.back() == '/') mountpoint.remove_suffix(1);
  if (!path.starts_with(mountpoint)) return "";
  path.remove_prefix(mountpoint.size());
  if (!path.starts_with('/')) return "";
  while (path.starts_with('/')) path.remove_prefix(1);
  return std::string(path);
}

int BatchClient::SocketOf(const std::string& mountpoint, std::string* path, std::string* why) {
  const std::string file = mountpoint + "/.clairfs/batch";
  std::ifstream in(file);
  if (!in) return Fail(ENOENT, why, file + ": no batch path (batch.enabled: false?)");
  std::getline(in, *path);
  if (path->empty()) return Fail(ENOENT, why, file + " is empty");
  return 0;
}

int BatchClient::ConnectMount(const std::string& mountpoint, const Options& options,
                              std::unique_ptr<BatchClient>* out, std::string* why) {
  std::string path;
  if (const int e = SocketOf(mountpoint, &path, why); e != 0) return e;
  return Connect(path, options, out, why);
}

int BatchClient::Connect(const std::string& socket_path, const Options& options,
                         std::unique_ptr<BatchClient>* out, std::string* why) {
  std::unique_ptr<BatchClient> c(new BatchClient());
  c->options_ = options;
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return Fail(ENAMETOOLONG, why, "socket path too long");
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  c->fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd_ < 0) return Fail(errno, why, "socket");
  // A Unix socket's connect does not block on a listener with room in its backlog; a full
  // backlog makes it wait, so the send and receive timeouts bound it too.
  const timeval tv{static_cast<time_t>(options.timeout.count() / 1000),
                   static_cast<suseconds_t>(options.timeout.count() % 1000 * 1000)};
  setsockopt(c->fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(c->fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(c->fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Fail(errno, why, "connect " + socket_path + ": " + std::strerror(errno));
  }
  // The buffer: a sealed memfd whose pages this process faults in.
  c->memfd_ = memfd_create("clairfs-batch", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (c->memfd_ < 0) return Fail(errno, why, "memfd_create");
  c->buffer_bytes_ = options.buffer_bytes;
  if (ftruncate(c->memfd_, static_cast<off_t>(c->buffer_bytes_)) != 0) {
    return Fail(errno, why, "ftruncate of the buffer");
  }
  if (fcntl(c->memfd_, F_ADD_SEALS, F_SEAL_SHRINK) != 0) return Fail(errno, why, "F_ADD_SEALS");
  if (c->buffer_bytes_ > 0) {
    void* m = mmap(nullptr, c->buffer_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                   c->memfd_, 0);
    if (m == MAP_FAILED) return Fail(errno, why, "mmap of the buffer");
    c->buffer_ = static_cast<uint8_t*>(m);
  }
  const uint64_t tag = c->next_tag_++;
  Header h;
  std::vector<uint8_t> body;
  if (const int e = c->Send(EncodeHello(tag), c->memfd_, why); e != 0) {
    // A server that refused the connection at once (EBUSY: too many clients) said why before
    // it closed: that answer, when it is there, rather than the failed send's.
    std::string refused;
    h.type = FrameType::kHello;  // never sent by a server: set only if a frame came
    const int r = c->Receive(&h, &body, &refused);
    if (r != 0 && h.type == FrameType::kError) {
      if (why) *why = refused;
      return r;
    }
    return e;
  }
  if (const int e = c->Receive(&h, &body, why); e != 0) return e;
  HelloReply reply;
  if (h.type != FrameType::kHelloReply || h.tag != tag ||
      DecodeHelloReply(body, &reply) != WireError::kOk) {
    return Fail(EPROTO, why, "not a hello reply");
  }
  c->max_samples_ = reply.max_samples;
  *out = std::move(c);
  return 0;
}

int BatchClient::Send(const std::vector<uint8_t>& frame, int pass_fd, std::string* why) {
  size_t sent = 0;
  while (sent < frame.size()) {
    iovec iov{const_cast<uint8_t*>(frame.data()) + sent, frame.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (pass_fd >= 0 && sent == 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
    }
    const ssize_t r = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      broken_ = true;
      const int e = errno == EAGAIN || errno == EWOULDBLOCK ? ETIMEDOUT : errno;
      return Fail(e, why, std::string("send: ") + std::strerror(e));
    }
    sent += static_cast<size_t>(r);
  }
  return 0;
}

int BatchClient::RecvExact(uint8_t* buf, size_t n, std::string* why) {
  size_t got = 0;
  while (got < n) {
    if (const int e = WaitFor(fd_, POLLIN, options_.timeout); e != 0) {
      broken_ = true;
      return Fail(e, why, "no answer from the batch server in time");
    }
    const ssize_t r = recv(fd_, buf + got, n - got, 0);
    if (r == 0) {
      broken_ = true;
      return Fail(EPIPE, why, "the batch server closed the connection");
    }
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      broken_ = true;
      return Fail(errno, why, std::string("recv: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(r);
  }
  return 0;
}

int BatchClient::Receive(Header* h, std::vector<uint8_t>* body, std::string* why) {
  uint8_t head[kHeaderBytes];
  if (const int e = RecvExact(head, sizeof(head), why); e != 0) return e;
  if (const WireError w = DecodeHeader(head, h); w != WireError::kOk) {
    broken_ = true;
    return Fail(EPROTO, why, WireErrorText(w));
  }
  body->resize(h->body_bytes);
  if (const int e = RecvExact(body->data(), body->size(), why); e != 0) return e;
  if (h->type == FrameType::kError) {
    int32_t err = 0;
    std::string message;
    if (DecodeError(*body, &err, &message) != WireError::kOk || err <= 0) err = EPROTO;
    return Fail(err, why, "batch server: " + message);
  }
  return 0;
}

int BatchClient::Read(std::span<const Item> items, uint64_t window_offset,
                      uint64_t window_bytes, std::vector<Sample>* out, std::string* why) {
  if (broken_) return Fail(EPIPE, why, "the connection is closed");
  if (window_bytes == kToEnd) {
    window_bytes = window_offset <= buffer_bytes_ ? buffer_bytes_ - window_offset : 0;
  }
  ReadRequest req;
  req.window_offset = window_offset;
  req.window_bytes = window_bytes;
  req.items.reserve(items.size());
  for (const Item& it : items) req.items.push_back({it.offset, it.length, it.path});
  std::vector<uint8_t> frame;
  const uint64_t tag = next_tag_++;
  if (const WireError w = EncodeRead(tag, req, &frame); w != WireError::kOk) {
    return Fail(ErrnoOf(w), why, WireErrorText(w));
  }
  if (const int e = Send(frame, -1, why); e != 0) return e;
  Header h;
  std::vector<uint8_t> body;
  if (const int e = Receive(&h, &body, why); e != 0) return e;
  std::vector<ReplyItem> reply;
  if (h.type != FrameType::kReadReply || h.tag != tag ||
      DecodeReadReply(body, &reply) != WireError::kOk || reply.size() != items.size()) {
    broken_ = true;
    return Fail(EPROTO, why, "not the reply of this read");
  }
  out->resize(reply.size());
  for (size_t i = 0; i < reply.size(); ++i) {
    Sample& s = (*out)[i];
    s.error = reply[i].error;
    s.buffer_offset = reply[i].buffer_offset;
    s.length = reply[i].length;
    s.file_size = reply[i].file_size;
    s.bytes = {};
    if (s.error == 0 && s.buffer_offset <= buffer_bytes_ &&
        s.length <= buffer_bytes_ - s.buffer_offset) {
      s.bytes = {buffer_ + s.buffer_offset, s.length};
    } else if (s.error == 0) {
      s.error = EPROTO;  // outside the buffer: never trusted
    }
  }
  return 0;
}

}  // namespace clairfs::batch
