#include "cluster/mpi_transport.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <list>

#include "cache/base/log.h"

namespace clairfs::cluster {

using Clock = std::chrono::steady_clock;

int LauncherWorldSize() {
  for (const char* var : {"PMI_SIZE", "PMIX_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return 0;
}

int LauncherLocalSize() {
  for (const char* var : {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return 0;
}

namespace {

std::string MpiErrorText(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS || n <= 0) return "error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(n));
}

}  // namespace

struct MpiTransport::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  bool initialized_here = false;
  std::chrono::milliseconds send_timeout{30'000};
  struct PendingSend {
    MPI_Request request;
    std::vector<char> bytes;
    Clock::time_point deadline;
  };
  std::list<PendingSend> sends;
  // Matched messages being received (MPI_Imrecv): a peer that dies in the middle of one must
  // not block the progress thread, as a blocking MPI_Mrecv would (seen over TCP).
  struct PendingRecv {
    MPI_Request request;
    Message message;
    Clock::time_point deadline;
  };
  std::list<PendingRecv> recvs;
  std::list<std::vector<char>> abandoned;  // buffers of sends and receives MPI may still use
};

Result<std::unique_ptr<MpiTransport>> MpiTransport::Create(std::string_view hello,
                                                           std::chrono::milliseconds hello_wait,
                                                           std::chrono::milliseconds send_timeout) {
  auto impl = std::make_unique<Impl>();
  impl->send_timeout = send_timeout;
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      return Status::Error(Code::kUnavailable, "MPI_Init_thread failed");
    }
    impl->initialized_here = true;
    // Hydra signals SIGUSR1 to the surviving ranks when one dies (with
    // -disable-auto-cleanup). The peer deadlines already handle a dead rank.
    std::signal(SIGUSR1, SIG_IGN);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    return Status::Error(Code::kUnavailable,
                         "the MPI library does not provide MPI_THREAD_MULTIPLE");
  }
  if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm); rc != MPI_SUCCESS) {
    return Status::Error(Code::kUnavailable, "MPI_Comm_dup failed: " + MpiErrorText(rc));
  }
  int rank = 0, size = 1;
  if (int rc = MPI_Comm_set_errhandler(impl->comm, MPI_ERRORS_RETURN); rc != MPI_SUCCESS) {
    return Status::Error(Code::kUnavailable, "MPI_Comm_set_errhandler failed: " + MpiErrorText(rc));
  }
  if (int rc = MPI_Comm_rank(impl->comm, &rank); rc != MPI_SUCCESS) {
    return Status::Error(Code::kUnavailable, "MPI_Comm_rank failed: " + MpiErrorText(rc));
  }
  if (int rc = MPI_Comm_size(impl->comm, &size); rc != MPI_SUCCESS) {
    return Status::Error(Code::kUnavailable, "MPI_Comm_size failed: " + MpiErrorText(rc));
  }
  // Every rank's hello, gathered without blocking so that a rank that never came cannot hold
  // this one past hello_wait (the launcher formed the world: every rank is there, or failed).
  const int n = static_cast<int>(hello.size());
  std::vector<char> all(hello.size() * static_cast<size_t>(size));
  MPI_Request request = MPI_REQUEST_NULL;
  if (int rc =
          MPI_Iallgather(hello.data(), n, MPI_BYTE, all.data(), n, MPI_BYTE, impl->comm, &request);
      rc != MPI_SUCCESS) {
    return Status::Error(Code::kUnavailable, "MPI_Iallgather failed: " + MpiErrorText(rc));
  }
  const auto deadline = Clock::now() + hello_wait;
  for (int done = 0; !done;) {
    if (int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
      return Status::Error(Code::kUnavailable, "MPI_Test failed: " + MpiErrorText(rc));
    }
    if (done) break;
    if (Clock::now() >= deadline) {
      return Status::Error(
          Code::kTimedOut,
          fmt::format("not every rank of the launch joined within {:g} s (cluster.plan_timeout): "
                      "a rank that failed to start says why in its output",
                      static_cast<double>(hello_wait.count()) / 1000.0));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // MPI progresses in MPI_Test
  }
  std::unique_ptr<MpiTransport> t(new MpiTransport(std::move(impl), rank, size));
  for (int r = 0; r < size; ++r)
    t->hellos_.emplace_back(all.data() + r * hello.size(), hello.size());
  t->thread_ = std::thread([p = t.get()] { p->Progress(); });
  return t;
}

bool MpiTransport::Failed(int rc, const char* call, int peer) {
  if (rc == MPI_SUCCESS) return false;
  errors_.fetch_add(1, std::memory_order_relaxed);
  if (auto* counter = error_counter_.load()) counter->fetch_add(1, std::memory_order_relaxed);
  if (uint64_t n = 0; error_log_.Allow(&n)) {
    LogWarn("rank {}: {}{} failed: {}{}", rank_, call,
            peer >= 0 ? " (peer rank " + std::to_string(peer) + ")" : std::string(),
            MpiErrorText(rc),
            n ? " (" + std::to_string(n) + " similar errors not logged)" : std::string());
  }
  return true;
}

MpiTransport::MpiTransport(std::unique_ptr<Impl> impl, int rank, int size)
    : impl_(std::move(impl)), rank_(rank), size_(size) {}

MpiTransport::~MpiTransport() { Shutdown(); }

void MpiTransport::Send(int dst, int tag, std::vector<char> bytes) {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    outbox_.push_back(Message{dst, tag, std::move(bytes)});
  }
  out_cv_.notify_one();
}

std::optional<Message> MpiTransport::Receive(std::chrono::milliseconds wait) {
  return inbox_.Pop(wait);
}

void MpiTransport::Shutdown() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  inbox_.Close();
  out_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MpiTransport::Progress() {
  // Idle polling backs off from 20 us to 1 ms; any traffic resets it.
  auto idle = std::chrono::microseconds(20);
  for (;;) {
    std::deque<Message> out;
    {
      std::unique_lock lock(mu_);
      out_cv_.wait_for(lock, idle, [&] { return stop_ || !outbox_.empty(); });
      if (stop_) break;
      out.swap(outbox_);
    }
    bool busy = !out.empty();
    const auto now = Clock::now();
    for (Message& m : out) {
      impl_->sends.push_back({MPI_REQUEST_NULL, std::move(m.bytes), now + impl_->send_timeout});
      auto& s = impl_->sends.back();
      if (Failed(MPI_Isend(s.bytes.data(), static_cast<int>(s.bytes.size()), MPI_BYTE, m.source,
                           m.tag, impl_->comm, &s.request),
                 "MPI_Isend", m.source)) {
        impl_->sends.pop_back();
        abandoned_.fetch_add(1);
      }
    }
    for (auto it = impl_->sends.begin(); it != impl_->sends.end();) {
      int done = 0;
      if (Failed(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test of a send", -1) ||
          done) {
        it = impl_->sends.erase(it);
      } else if (now > it->deadline) {
        (void)Failed(MPI_Request_free(&it->request), "MPI_Request_free", -1);
        if (error_log_.Allow()) {
          LogWarn("rank {}: a send was abandoned after {} ms without completing", rank_,
                  impl_->send_timeout.count());
        }
        impl_->abandoned.push_back(std::move(it->bytes));
        abandoned_.fetch_add(1);
        it = impl_->sends.erase(it);
      } else {
        ++it;
      }
    }
    for (int n = 0; n < 64; ++n) {  // bounded, so that sends are not starved
      int flag = 0;
      MPI_Message handle;
      MPI_Status st;
      if (Failed(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, impl_->comm, &flag, &handle, &st),
                 "MPI_Improbe", -1) ||
          !flag) {
        break;
      }
      int count = 0;
      if (Failed(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count", st.MPI_SOURCE) ||
          count < 0) {
        count = 0;  // the message is still received (and then refused as garbled)
      }
      impl_->recvs.push_back(
          {MPI_REQUEST_NULL,
           Message{st.MPI_SOURCE, st.MPI_TAG, std::vector<char>(static_cast<size_t>(count))},
           now + impl_->send_timeout});
      auto& r = impl_->recvs.back();
      if (Failed(MPI_Imrecv(r.message.bytes.data(), count, MPI_BYTE, &handle, &r.request),
                 "MPI_Imrecv", st.MPI_SOURCE)) {
        impl_->recvs.pop_back();
        continue;
      }
      busy = true;
    }
    // Completed receives reach the inbox in the order they were matched, per sender and tag:
    // a large message still arriving holds back its sender's later ones of that tag, which can
    // complete before it (transport.h's order, which the seal's counters rely on).
    std::vector<std::pair<int, int>> held;  // (source, tag) with an earlier receive pending
    for (auto it = impl_->recvs.begin(); it != impl_->recvs.end();) {
      const std::pair<int, int> key{it->message.source, it->message.tag};
      const bool behind = std::find(held.begin(), held.end(), key) != held.end();
      int done = 0;
      if (Failed(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test of a receive",
                 it->message.source)) {
        it = impl_->recvs.erase(it);
      } else if (done && !behind) {
        inbox_.Push(std::move(it->message));
        it = impl_->recvs.erase(it);
      } else if (!done && now > it->deadline) {
        (void)Failed(MPI_Request_free(&it->request), "MPI_Request_free", -1);
        if (error_log_.Allow()) {
          LogWarn(
              "rank {}: a message from rank {} was abandoned after {} ms without "
              "arriving whole",
              rank_, it->message.source, impl_->send_timeout.count());
        }
        impl_->abandoned.push_back(std::move(it->message.bytes));
        it = impl_->recvs.erase(it);
      } else {
        if (!behind) held.push_back(key);
        ++it;
      }
    }
    idle = busy ? std::chrono::microseconds(20)
                : std::min<std::chrono::microseconds>(idle * 2, std::chrono::milliseconds(1));
  }
  for (auto& s : impl_->sends) {
    int done = 0;
    if (Failed(MPI_Test(&s.request, &done, MPI_STATUS_IGNORE), "MPI_Test of a send", -1)) done = 0;
    if (!done) {
      (void)Failed(MPI_Request_free(&s.request), "MPI_Request_free", -1);
      impl_->abandoned.push_back(std::move(s.bytes));
    }
  }
  impl_->sends.clear();
  for (auto& r : impl_->recvs) {
    if (r.request == MPI_REQUEST_NULL) continue;  // completed, held back for the order
    (void)Failed(MPI_Request_free(&r.request), "MPI_Request_free", -1);
    impl_->abandoned.push_back(std::move(r.message.bytes));
  }
  impl_->recvs.clear();
}

void MpiTransport::Finalize(std::chrono::milliseconds timeout, int exit_code) {
  if (impl_->initialized_here) {
    // Armed before the progress thread is joined: an MPI call of it stuck on a dead rank
    // must not hold the exit either.
    std::thread watchdog([timeout, exit_code] {
      std::this_thread::sleep_for(timeout);
      _exit(exit_code);  // MPI is stuck on a dead rank; everything else is done
    });
    watchdog.detach();
  }
  Shutdown();
  if (!impl_->initialized_here) return;
  (void)Failed(MPI_Comm_free(&impl_->comm), "MPI_Comm_free", -1);
  (void)Failed(MPI_Finalize(), "MPI_Finalize", -1);
}

}  // namespace clairfs::cluster
