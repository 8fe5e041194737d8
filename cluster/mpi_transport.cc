#include "cluster/mpi_transport.h"

#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <list>

namespace clairfs::cluster {

using Clock = std::chrono::steady_clock;

int LauncherWorldSize() {
  for (const char* var : {"PMI_SIZE", "PMIX_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return 0;
}

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
  std::list<std::vector<char>> abandoned;  // buffers of sends MPI may still read
};

Result<std::unique_ptr<MpiTransport>> MpiTransport::Create(std::chrono::milliseconds send_timeout) {
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
  MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm);
  MPI_Comm_set_errhandler(impl->comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(impl->comm, &rank);
  MPI_Comm_size(impl->comm, &size);
  std::unique_ptr<MpiTransport> t(new MpiTransport(std::move(impl), rank, size));
  t->thread_ = std::thread([p = t.get()] { p->Progress(); });
  return t;
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
  std::unique_lock lock(mu_);
  in_cv_.wait_for(lock, wait, [&] { return stop_ || !inbox_.empty(); });
  if (stop_ || inbox_.empty()) return std::nullopt;
  Message m = std::move(inbox_.front());
  inbox_.pop_front();
  return m;
}

void MpiTransport::Shutdown() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  out_cv_.notify_all();
  in_cv_.notify_all();
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
      if (MPI_Isend(s.bytes.data(), static_cast<int>(s.bytes.size()), MPI_BYTE, m.source, m.tag,
                    impl_->comm, &s.request) != MPI_SUCCESS) {
        impl_->sends.pop_back();
        abandoned_.fetch_add(1);
      }
    }
    for (auto it = impl_->sends.begin(); it != impl_->sends.end();) {
      int done = 0;
      if (MPI_Test(&it->request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) {
        it = impl_->sends.erase(it);
      } else if (now > it->deadline) {
        MPI_Request_free(&it->request);
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
      if (MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, impl_->comm, &flag, &handle, &st) !=
              MPI_SUCCESS ||
          !flag) {
        break;
      }
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      Message m{st.MPI_SOURCE, st.MPI_TAG, std::vector<char>(static_cast<size_t>(count))};
      if (MPI_Mrecv(m.bytes.data(), count, MPI_BYTE, &handle, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        continue;
      }
      busy = true;
      std::lock_guard lock(mu_);
      inbox_.push_back(std::move(m));
      in_cv_.notify_one();
    }
    idle = busy ? std::chrono::microseconds(20)
                : std::min<std::chrono::microseconds>(idle * 2, std::chrono::milliseconds(1));
  }
  for (auto& s : impl_->sends) {
    int done = 0;
    MPI_Test(&s.request, &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Request_free(&s.request);
      impl_->abandoned.push_back(std::move(s.bytes));
    }
  }
  impl_->sends.clear();
}

void MpiTransport::Finalize(std::chrono::milliseconds timeout, int exit_code) {
  Shutdown();
  if (!impl_->initialized_here) return;
  std::thread watchdog([timeout, exit_code] {
    std::this_thread::sleep_for(timeout);
    _exit(exit_code);  // MPI_Finalize is stuck on a dead rank; everything else is done
  });
  watchdog.detach();
  MPI_Comm_free(&impl_->comm);
  MPI_Finalize();
}

}  // namespace clairfs::cluster
