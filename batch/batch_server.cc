#include "batch/batch_server.h"

#include <fcntl.h>
#include <poll.h>
#include <linux/magic.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "batch/batch_wire.h"
#include "cache/base/log.h"

namespace clairfs {

using batch::FrameType;
using batch::Header;
using batch::WireError;

namespace {

enum class Io { kOk, kClosed, kTimedOut, kFailed };

// A request is checked for a peer that hung up every this many samples.
constexpr uint32_t kHangupCheckEvery = 64;
// A frame's body is received in steps of this many bytes, its buffer grown for each.
constexpr size_t kBodyStepBytes = 1u << 20;

// Receives exactly n bytes into buf; descriptors that come with them (SCM_RIGHTS) are appended
// to *fds (close-on-exec). idle: the wait for the first byte is a wait for the next request,
// which has no deadline (each SO_RCVTIMEO period checks `stopping`); once a byte came, the
// rest must follow within the period.
Io RecvAll(int fd, uint8_t* buf, size_t n, std::vector<int>* fds, bool idle,
           const std::atomic<bool>& stopping) {
  size_t got = 0;
  while (got < n) {
    iovec iov{buf + got, n - got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (r > 0 || (r == 0 && msg.msg_controllen > 0)) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
          int one;
          std::memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          fds->push_back(one);
        }
      }
      if (msg.msg_flags & MSG_CTRUNC) fds->push_back(-1);  // more than 4: refused below
    }
    if (r == 0) return Io::kClosed;
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (idle && got == 0 && !stopping.load(std::memory_order_relaxed)) continue;
        return Io::kTimedOut;
      }
      return Io::kFailed;
    }
    got += static_cast<size_t>(r);
  }
  return Io::kOk;
}

// Sends all of frame; SO_SNDTIMEO bounds each wait for room (a client that does not read).
Io SendAll(int fd, const std::vector<uint8_t>& frame) {
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t r = send(fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? Io::kTimedOut : Io::kFailed;
    }
    sent += static_cast<size_t>(r);
  }
  return Io::kOk;
}

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) {
    if (fd >= 0) close(fd);
  }
  fds->clear();
}

// 0 if fd may be a client's buffer (docs/batch-path.md, kHello), with its size in *size; else
// the errno for the kError and *why.
int CheckBuffer(int fd, uint64_t max_bytes, uint64_t* size, std::string* why) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    *why = "the buffer is not a memfd";
    return EINVAL;
  }
  if (!(seals & F_SEAL_SHRINK)) {
    *why = "the buffer is not sealed against shrinking (F_SEAL_SHRINK)";
    return EINVAL;
  }
  if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
    *why = "the buffer is sealed against writing";
    return EINVAL;
  }
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) {
    *why = "the buffer is not open for writing";
    return EINVAL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = "the buffer is not a regular memfd";
    return EINVAL;
  }
  // Shared memory only: the server maps the buffer (Map), and a page of it the kernel cannot
  // give there must not be a SIGBUS in the daemon, as a huge page of a MFD_HUGETLB memfd that
  // was never faulted in would be when the pool is empty. Sealed against shrinking, no page
  // of the mapping can go away either.
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) {
    *why = "the buffer is not a memfd of shared memory (MFD_HUGETLB is refused)";
    return EINVAL;
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    *why = "the buffer is larger than batch.max_buffer_bytes (" + std::to_string(max_bytes) + ")";
    return E2BIG;
  }
  *size = static_cast<uint64_t>(st.st_size);
  return 0;
}

// True when the peer closed its end (POLLHUP): the rest of its request is not read.
bool PeerGone(int fd) {
  pollfd p{fd, 0, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

timeval TimevalOf(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// The client's buffer mapped into the daemon, or null (size 0, or the mapping failed: the
// samples are then written with pwritev). Writes into it are a memcpy, about twice as fast as
// pwritev into shared memory (no per-page lookup, lock and dirtying), and safe: the buffer is
// sealed against shrinking and is shared memory (CheckBuffer), so every page of
// [0, buffer_bytes) stays there.
char* Map(int fd, uint64_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    LogDebug("batch: a buffer of {} bytes not mapped ({}): written with pwritev", bytes,
                  std::strerror(errno));
    return nullptr;
  }
  return static_cast<char*>(p);
}

}  // namespace

struct BatchServer::Conn {
  int fd = -1;
  uid_t uid = 0;
  Caller caller;
  int buffer_fd = -1;  // the client's buffer from its hello; -1 until then
  uint64_t buffer_bytes = 0;
  char* buffer_map = nullptr;  // Map(buffer_fd, buffer_bytes); unmapped with the buffer

  // Lets go of the buffer (a new hello, or the end): unmapped and closed.
  void DropBuffer() {
    if (buffer_map != nullptr) munmap(buffer_map, buffer_bytes);
    buffer_map = nullptr;
    if (buffer_fd >= 0) close(buffer_fd);
    buffer_fd = -1;
    buffer_bytes = 0;
  }
  bool done = false;  // under mu_: the thread ended and closed fd
  std::thread thread;
};

BatchServer::BatchServer(BatchReader& reader, BatchOptions options, BatchStats& stats,
                         std::function<void()> await_releases)
    : reader_(reader),
      options_(options),
      stats_(stats),
      await_releases_(std::move(await_releases)) {}

BatchServer::~BatchServer() { Stop(); }

Status BatchServer::Start(const std::string& path, bool allow_other) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Status::Error(Code::kInvalidArgument, "batch socket path too long: " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  addr.sun_family = AF_UNIX;
  // A socket left by a killed daemon of this mountpoint: replaced. Anything else is refused.
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::Error(Code::kInvalidArgument, path + " exists and is not a socket");
    }
    if (unlink(path.c_str()) != 0) return Status::FromErrno(errno, "unlink " + path);
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "batch socket");
  const mode_t mode = allow_other ? 0666 : 0600;
  // The mode of the socket's inode is the file's at bind (less the umask): never wider.
  (void)fchmod(fd, mode);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status s = Status::FromErrno(errno, "bind " + path);
    close(fd);
    return s;
  }
  if (chmod(path.c_str(), mode) != 0 || listen(fd, 128) != 0) {
    Status s = Status::FromErrno(errno, "listen " + path);
    close(fd);
    unlink(path.c_str());
    return s;
  }
  const int efd = eventfd(0, EFD_CLOEXEC);
  if (efd < 0) {
    Status s = Status::FromErrno(errno, "eventfd");
    close(fd);
    unlink(path.c_str());
    return s;
  }
  path_ = path;
  listen_fd_ = fd;
  stop_fd_ = efd;
  stopping_ = false;
  acceptor_ = std::thread([this] { AcceptLoop(); });
  started_ = true;
  return Status::Ok();
}

size_t BatchServer::Connections() const {
  std::lock_guard lock(mu_);
  return live_;
}

void BatchServer::Reap() {
  std::list<std::shared_ptr<Conn>> ended;
  {
    std::lock_guard lock(mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if ((*it)->done) {
        ended.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : ended) {
    if (c->thread.joinable()) c->thread.join();
  }
}

void BatchServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int r = poll(p, 2, 1000);  // each second at least: the ended threads are joined
    Reap();
    if (r <= 0) continue;
    if (p[1].revents) break;
    if (!(p[0].revents & POLLIN)) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // EMFILE, a client gone: the next poll tries again
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    std::vector<gid_t> groups(64);
    len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    // Without them (a failure), the primary group alone decides: never more than the caller has.
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) {
      if (errno == ERANGE) {
        groups.resize(len / sizeof(gid_t));
        len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) len = 0;
      } else {
        len = 0;
      }
    }
    groups.resize(len / sizeof(gid_t));
    const timeval tv = TimevalOf(options_.send_timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    auto c = std::make_shared<Conn>();
    c->fd = fd;
    c->uid = cred.uid;
    c->caller.uid = cred.uid;
    c->caller.gid = cred.gid;
    c->caller.pid = cred.pid;
    c->caller.groups = [groups](std::vector<gid_t>* out) {
      *out = groups;
      return Status::Ok();
    };
    std::string refused;
    {
      std::lock_guard lock(mu_);
      if (live_ >= options_.max_clients) {
        refused = "too many batch clients (batch.max_clients: " +
                  std::to_string(options_.max_clients) + ")";
      } else if (per_user_[cred.uid] >= options_.max_clients_per_user) {
        refused = "too many batch clients of uid " + std::to_string(cred.uid) +
                  " (batch.max_clients_per_user: " +
                  std::to_string(options_.max_clients_per_user) + ")";
      } else {
        ++live_;
        ++per_user_[cred.uid];
        conns_.push_back(c);
        try {
          c->thread = std::thread([this, c] { Serve(c); });
        } catch (const std::system_error& e) {
          conns_.pop_back();
          --live_;
          --per_user_[cred.uid];
          refused = std::string("no thread for a batch client: ") + e.what();
        }
      }
      if (!refused.empty() && per_user_[cred.uid] == 0) per_user_.erase(cred.uid);
    }
    if (!refused.empty()) {
      stats_.refused_connections.fetch_add(1, std::memory_order_relaxed);
      const auto frame = batch::EncodeError(0, EBUSY, refused);
      (void)send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      close(fd);
      LogDebug("batch: {}", refused);
      continue;
    }
    stats_.connections.fetch_add(1, std::memory_order_relaxed);
  }
}

void BatchServer::Done(const std::shared_ptr<Conn>& c) {
  std::lock_guard lock(mu_);
  close(c->fd);
  c->fd = -1;
  c->DropBuffer();
  c->done = true;
  --live_;
  if (--per_user_[c->uid] == 0) per_user_.erase(c->uid);
  done_cv_.notify_all();
}

void BatchServer::Serve(const std::shared_ptr<Conn>& c) {
  const int fd = c->fd;  // closed only by Done, at the end of this thread
  // A frame refused: kError with its errno; after a malformed one the connection ends.
  const auto refuse = [&](uint64_t tag, int error, const std::string& why) {
    stats_.protocol_errors.fetch_add(1, std::memory_order_relaxed);
    return SendAll(fd, batch::EncodeError(tag, error, why)) == Io::kOk;
  };
  std::vector<int> fds;
  while (!stopping_.load(std::memory_order_relaxed)) {
    uint8_t head[batch::kHeaderBytes];
    Io io = RecvAll(fd, head, sizeof(head), &fds, true, stopping_);
    if (io != Io::kOk) {
      if (io == Io::kTimedOut && !stopping_) {
        stats_.protocol_errors.fetch_add(1, std::memory_order_relaxed);
      }
      break;
    }
    Header h;
    WireError e = batch::DecodeHeader(head, &h);
    if (e == WireError::kOk && h.type != FrameType::kHello && h.type != FrameType::kRead) {
      e = WireError::kBadType;
    }
    if (e != WireError::kOk) {
      refuse(h.tag, batch::ErrnoOf(e), batch::WireErrorText(e));
      break;
    }
    // The body grows as its bytes arrive: a header announcing 16 MiB costs only what follows.
    std::vector<uint8_t> body;
    io = Io::kOk;
    while (io == Io::kOk && body.size() < h.body_bytes) {
      const size_t at = body.size();
      body.resize(at + std::min<size_t>(h.body_bytes - at, kBodyStepBytes));
      io = RecvAll(fd, body.data() + at, body.size() - at, &fds, false, stopping_);
    }
    if (io != Io::kOk) {
      if (io == Io::kTimedOut) stats_.protocol_errors.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    if (h.type == FrameType::kHello) {
      uint32_t version = 0;
      e = batch::DecodeHello(body, &version);
      if (e != WireError::kOk || fds.size() != 1 || fds[0] < 0) {
        refuse(h.tag, EPROTO,
               e != WireError::kOk ? batch::WireErrorText(e)
                                   : "a hello carries exactly one descriptor (the buffer)");
        break;
      }
      if (version != batch::kProtocolVersion) {
        refuse(h.tag, EPROTONOSUPPORT, "protocol version " + std::to_string(version));
        break;
      }
      std::string why;
      uint64_t size = 0;
      if (const int err = CheckBuffer(fds[0], options_.max_buffer_bytes, &size, &why); err != 0) {
        CloseAll(&fds);
        if (!refuse(h.tag, err, why)) break;
        continue;  // refused on its merits: the connection goes on
      }
      {
        std::lock_guard lock(mu_);  // Done closes it too
        c->DropBuffer();
        c->buffer_fd = fds[0];
        c->buffer_bytes = size;
        c->buffer_map = Map(c->buffer_fd, size);
      }
      fds.clear();
      const batch::HelloReply reply{batch::kProtocolVersion, options_.max_samples, size};
      if (SendAll(fd, batch::EncodeHelloReply(h.tag, reply)) != Io::kOk) break;
      continue;
    }
    // kRead
    if (!fds.empty()) {
      CloseAll(&fds);
      refuse(h.tag, EPROTO, "a descriptor came with a read");
      break;
    }
    batch::ReadRequest req;
    e = batch::DecodeRead(body, options_.max_samples, &req);
    if (e != WireError::kOk) {
      refuse(h.tag, batch::ErrnoOf(e),
             std::string(batch::WireErrorText(e)) +
                 (e == WireError::kTooManySamples
                      ? " (batch.max_samples: " + std::to_string(options_.max_samples) + ")"
                      : ""));
      break;
    }
    if (c->buffer_fd < 0) {
      if (!refuse(h.tag, EINVAL, "no buffer: a hello must come first")) break;
      continue;
    }
    if (req.window_offset > c->buffer_bytes ||
        req.window_bytes > c->buffer_bytes - req.window_offset) {
      if (!refuse(h.tag, EINVAL, "the window is not inside the buffer")) break;
      continue;
    }
    if (await_releases_) await_releases_();
    std::vector<batch::ReplyItem> items(req.items.size());
    const uint64_t limit = req.window_offset + req.window_bytes;
    uint64_t cursor = req.window_offset;
    bool abandoned = false;
    for (size_t i = 0; i < req.items.size(); ++i) {
      if (i % kHangupCheckEvery == kHangupCheckEvery - 1 &&
          (stopping_.load(std::memory_order_relaxed) || PeerGone(fd))) {
        abandoned = true;  // the rest of this request is not read: nobody takes it
        break;
      }
      const batch::ReadItem& item = req.items[i];
      const uint64_t at = std::min(batch::AlignUp(cursor), limit);
      const BatchReader::Sample s =
          reader_.Read(c->caller, item.path, item.offset, item.length,
                       BatchReader::Buffer{c->buffer_fd, c->buffer_map}, at, limit);
      items[i].error = s.error;
      items[i].file_size = s.file_size;
      if (s.error == 0) {
        items[i].buffer_offset = at;
        items[i].length = s.length;
        cursor = at + s.length;
      }
    }
    if (abandoned) break;
    stats_.requests.fetch_add(1, std::memory_order_relaxed);
    io = SendAll(fd, batch::EncodeReadReply(h.tag, items));
    if (io != Io::kOk) {
      if (io == Io::kTimedOut) {
        stats_.protocol_errors.fetch_add(1, std::memory_order_relaxed);
        LogDebug("batch: uid {} took no reply within batch.send_timeout: cut off", c->uid);
      }
      break;
    }
  }
  CloseAll(&fds);
  Done(c);
}

void BatchServer::Stop(std::chrono::milliseconds stop_deadline) {
  if (!started_) return;
  started_ = false;
  stopping_ = true;
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  if (acceptor_.joinable()) acceptor_.join();
  std::list<std::shared_ptr<Conn>> all;
  {
    std::unique_lock lock(mu_);
    for (auto& c : conns_) {
      if (!c->done) shutdown(c->fd, SHUT_RDWR);  // a blocked recv or send returns
    }
    done_cv_.wait_for(lock, stop_deadline, [this] { return live_ == 0; });
    all.swap(conns_);
  }
  size_t left = 0;
  for (auto& c : all) {
    bool done;
    {
      std::lock_guard lock(mu_);
      done = c->done;
    }
    if (done) {
      c->thread.join();
    } else {
      c->thread.detach();  // inside a read of a stuck store: its Conn stays alive with it
      ++left;
    }
  }
  if (left > 0) LogWarn("batch: {} connection threads did not end in time", left);
  close(listen_fd_);
  listen_fd_ = -1;
  close(stop_fd_);
  stop_fd_ = -1;
  unlink(path_.c_str());
}

}  // namespace clairfs
