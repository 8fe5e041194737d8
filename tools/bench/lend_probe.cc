// clairfs-lend-probe: what a batch sample costs delivered two ways, on this machine, with no
// daemon: copied into the client's buffer (what the batch path does, docs/batch-path.md) or lent
// (the tier's own pages handed over as a sealed memfd per sample, mapped read-only by the
// client). It answers whether lending the RAM tier's pages would pass the copy
// (docs/benchmarks.md, "Lending the tier's pages: measured and rejected").
//
// Each of --threads pairs is a server thread and a client thread joined by a Unix socket pair.
// The server holds --samples objects of --size bytes, each in a memfd of its own, filled and
// sealed (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_FUTURE_WRITE, F_SEAL_SEAL) as a lending tier would
// keep them, and answers batches of --batch samples:
//   copy  memcpy of each sample into the client's buffer (a shared memfd the client made and
//         faulted in), then an 8-byte reply;
//   lend  the samples' descriptors (SCM_RIGHTS, at most 253 a message); the client maps each
//         read-only, closes the descriptor and unmaps the sample when done with it.
// Each mode runs with the client touching nothing of a sample and touching one byte of every
// page (what any use of the bytes costs at least). Prints one line per mode and, last, one JSON
// object of samples/s per mode, the median of --rounds rounds.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxFdsPerMessage = 253;  // the kernel's SCM_MAX_FD
constexpr size_t kPage = 4096;

struct Config {
  size_t size = 112640;
  size_t samples = 4000;
  size_t batch = 256;
  unsigned threads = 1;
  unsigned rounds = 3;
};

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

// One object of the server, as a lending tier would hold it: its own sealed memfd.
struct Object {
  int fd = -1;
  char* map = nullptr;
};

Object MakeObject(size_t size, unsigned seed) {
  Object o;
  o.fd = memfd_create("clairfs-lend-probe", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  Check(o.fd >= 0, "memfd_create");
  Check(ftruncate(o.fd, static_cast<off_t>(size)) == 0, "ftruncate");
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, o.fd, 0);
  Check(p != MAP_FAILED, "mmap");
  o.map = static_cast<char*>(p);
  std::memset(o.map, static_cast<int>(seed & 0xff), size);
  Check(fcntl(o.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) ==
            0,
        "F_ADD_SEALS");
  return o;
}

void SendFds(int sock, const int* fds, size_t n) {
  char note = 1;
  iovec iov{&note, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * n));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * n);
  std::memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
  Check(sendmsg(sock, &msg, MSG_NOSIGNAL) == 1, "sendmsg");
}

// Receives descriptors until `want` came, appending them to *out.
void RecvFds(int sock, size_t want, std::vector<int>* out) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  while (out->size() < want) {
    char note;
    iovec iov{&note, 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    Check(recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) == 1, "recvmsg");
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        out->push_back(fd);
      }
    }
  }
}

// The barrier every pair waits at once set up; its completion starts the clock.
struct StartClock {
  Clock::time_point* at;
  void operator()() noexcept { *at = Clock::now(); }
};
using StartBarrier = std::barrier<StartClock>;

uint64_t Touch(const char* p, size_t n) {
  uint64_t sum = 0;
  for (size_t at = 0; at < n; at += kPage) sum += static_cast<unsigned char>(p[at]);
  return sum;
}

// One server/client pair serving samples [first, first + count) of objects once, in batches;
// adds the client's checksum to *sum (so the touches are not optimised away). The buffer is
// made, and both sides' mappings of it faulted in, before the pair waits at `start` (as a
// connection's buffer is, once, at hello); the pair's time counts from there.
void RunPair(const Config& cfg, const std::vector<Object>& objects, size_t first, size_t count,
             bool lend, bool touch, StartBarrier& start, uint64_t* sum) {
  int sv[2];
  Check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
  const size_t slot = (cfg.size + 63) / 64 * 64;
  const size_t buffer_bytes = slot * cfg.batch;
  const int memfd = memfd_create("clairfs-lend-probe-buffer", MFD_CLOEXEC);
  Check(memfd >= 0 && ftruncate(memfd, static_cast<off_t>(buffer_bytes)) == 0, "buffer");
  void* b =
      mmap(nullptr, buffer_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd, 0);
  Check(b != MAP_FAILED, "mmap buffer");
  char* client_view = static_cast<char*>(b);
  void* s =
      mmap(nullptr, buffer_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd, 0);
  Check(s != MAP_FAILED, "mmap buffer (server)");
  char* server_view = static_cast<char*>(s);
  start.arrive_and_wait();

  // A batch is asked for (one byte) and answered, one at a time, as a connection's requests
  // are: the client is done with a batch's window before the next is written into it.
  std::thread server([&] {
    std::vector<int> fds;
    for (size_t at = 0; at < count; at += cfg.batch) {
      const size_t n = std::min(cfg.batch, count - at);
      char ask;
      Check(recv(sv[0], &ask, 1, MSG_WAITALL) == 1, "recv request");
      if (lend) {
        fds.clear();
        for (size_t i = 0; i < n; ++i) fds.push_back(objects[first + at + i].fd);
        for (size_t sent = 0; sent < n; sent += kMaxFdsPerMessage) {
          SendFds(sv[0], fds.data() + sent, std::min(kMaxFdsPerMessage, n - sent));
        }
      } else {
        for (size_t i = 0; i < n; ++i) {
          std::memcpy(server_view + i * slot, objects[first + at + i].map, cfg.size);
        }
        const uint64_t reply = n;
        Check(send(sv[0], &reply, sizeof(reply), MSG_NOSIGNAL) == sizeof(reply), "send");
      }
    }
  });
  std::vector<int> fds;
  std::vector<char*> maps;
  for (size_t at = 0; at < count; at += cfg.batch) {
    const size_t n = std::min(cfg.batch, count - at);
    const char ask = 1;
    Check(send(sv[1], &ask, 1, MSG_NOSIGNAL) == 1, "send request");
    if (lend) {
      fds.clear();
      RecvFds(sv[1], n, &fds);
      maps.clear();
      for (int fd : fds) {
        void* m = mmap(nullptr, cfg.size, PROT_READ, MAP_SHARED, fd, 0);
        Check(m != MAP_FAILED, "mmap lent");
        close(fd);
        maps.push_back(static_cast<char*>(m));
      }
      for (char* m : maps) {
        if (touch) *sum += Touch(m, cfg.size);
        munmap(m, cfg.size);
      }
    } else {
      uint64_t reply = 0;
      Check(recv(sv[1], &reply, sizeof(reply), MSG_WAITALL) == sizeof(reply), "recv");
      if (touch) {
        for (size_t i = 0; i < n; ++i) *sum += Touch(client_view + i * slot, cfg.size);
      }
    }
  }
  server.join();
  munmap(client_view, buffer_bytes);
  munmap(server_view, buffer_bytes);
  close(memfd);
  close(sv[0]);
  close(sv[1]);
}

double SamplesPerSecond(const Config& cfg, const std::vector<Object>& objects, bool lend,
                        bool touch, uint64_t* sum) {
  std::vector<std::thread> pairs;
  std::vector<uint64_t> sums(cfg.threads);
  const size_t share = objects.size() / cfg.threads;
  Clock::time_point start;
  // Every pair set up: the clock starts.
  StartBarrier ready(static_cast<std::ptrdiff_t>(cfg.threads), StartClock{&start});
  for (unsigned t = 0; t < cfg.threads; ++t) {
    pairs.emplace_back(
        [&, t] { RunPair(cfg, objects, t * share, share, lend, touch, ready, &sums[t]); });
  }
  for (auto& p : pairs) p.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (uint64_t s : sums) *sum += s;
  return static_cast<double>(share * cfg.threads) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"Batch samples copied or lent: samples/s of each, no daemon"};
  app.add_option("--size", cfg.size, "Bytes a sample")->check(CLI::Range(1ul, 1ul << 30));
  app.add_option("--samples", cfg.samples, "Samples held")->check(CLI::Range(1ul, 1ul << 22));
  app.add_option("--batch", cfg.batch, "Samples a batch")->check(CLI::Range(1ul, 65536ul));
  app.add_option("--threads", cfg.threads, "Server/client pairs")->check(CLI::Range(1u, 64u));
  app.add_option("--rounds", cfg.rounds, "Rounds; the median is shown")->check(CLI::Range(1u, 99u));
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<Object> objects;
    const auto made = Clock::now();
    for (size_t i = 0; i < cfg.samples; ++i) {
      objects.push_back(MakeObject(cfg.size, static_cast<unsigned>(i)));
    }
    const double make_us = std::chrono::duration<double, std::micro>(Clock::now() - made).count() /
                           static_cast<double>(cfg.samples);
    std::printf("a sealed memfd made and filled: %.1f us an object\n", make_us);
    nlohmann::json out{{"size", cfg.size},       {"samples", cfg.samples}, {"batch", cfg.batch},
                       {"threads", cfg.threads}, {"rounds", cfg.rounds},   {"make_us", make_us}};
    uint64_t sum = 0;
    for (const bool touch : {false, true}) {
      for (const bool lend : {false, true}) {
        std::vector<double> runs;
        for (unsigned r = 0; r < cfg.rounds; ++r) {
          runs.push_back(SamplesPerSecond(cfg, objects, lend, touch, &sum));
        }
        std::sort(runs.begin(), runs.end());
        const double median = runs[runs.size() / 2];
        const std::string key =
            std::string(lend ? "lend" : "copy") + (touch ? "_touch" : "") + "_sps";
        std::printf("%-16s %10.0f samples/s (median of %u)\n", key.c_str(), median, cfg.rounds);
        out[key] = median;
      }
    }
    out["checksum"] = sum;
    std::printf("%s\n", out.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "clairfs-lend-probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
