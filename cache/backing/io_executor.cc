#include "cache/backing/io_executor.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/base/log.h"

namespace clairfs {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Distinct stuck keys logged one by one; past this many, one line says that more are stuck.
constexpr size_t kMaxLoggedKeys = 1000;

}  // namespace

void IoProgress::Touch() { last_ns_.store(NowNs(), std::memory_order_relaxed); }

struct IoExecutor::Call {
  enum class Phase { kQueued, kRunning, kDone };
  std::string key;
  std::function<void(IoProgress&)> body;  // only the I/O thread touches it once queued
  IoProgress progress;
  // The fields below are guarded by State::mu.
  std::condition_variable done_cv;  // phase became kDone, or Stop()
  Phase phase = Phase::kQueued;
  bool abandoned = false;  // the caller left: the result is dropped
  bool stuck = false;      // abandoned at its deadline: counted in State::stuck and stuck_keys
  bool posted = false;     // queued by Post(): nobody waits for it (abandoned from the start)
};

struct IoExecutor::State {
  struct Worker {
    std::thread thread;
    std::shared_ptr<Call> current;  // the call it runs (until its body is destroyed)
    bool exited = false;            // it left Loop (set just before the thread ends)
  };

  IoOptions options;
  Stats* stats = nullptr;
  // Lock order: a leaf. Taken by callers and I/O threads; nothing else is locked while it is
  // held except spdlog's sink lock (logging under it keeps every log line before Stop()
  // returns, so no I/O thread logs into a logger being torn down).
  mutable std::mutex mu;
  std::condition_variable work_cv;  // a call was queued, or stop
  std::condition_variable exit_cv;  // a thread left Loop, or a runner of posted calls ended
  std::deque<std::shared_ptr<Call>> queue;
  std::list<Worker> workers;  // stable addresses: each thread holds a pointer to its entry
  int live = 0;               // threads started and not exited
  int runners = 0;            // threads running posted calls after Stop() (RunDetached)
  int idle = 0;               // threads waiting on work_cv
  int stuck = 0;              // threads running an abandoned-at-deadline call
  std::unordered_map<std::string, int> stuck_keys;  // key -> its abandoned calls still running
  std::unordered_set<std::string> logged;           // keys whose timeout was logged
  bool logged_more = false;
  bool all_stuck = false;  // every thread is stuck; logged when it begins and ends
  // A call was abandoned at its deadline and none has returned since (IoOptions::
  // stalled_timeout); set by a caller that abandons its call, cleared by an I/O thread whose
  // call returns. Logged when it begins and ends.
  bool stalled = false;
  bool stopped = false;

  void CountTimeout() {
    if (stats) stats->errors.backing_timeout.fetch_add(1, std::memory_order_relaxed);
  }
  void Loop(Worker* self);
  // Queues a call nobody waits for (IoExecutor::Post); once stopped, runs it detached.
  void Post(const std::shared_ptr<State>& me, std::function<void()> fn);
  // Runs calls one after the other on a new thread (inline if none can be started), counted
  // in runners while it runs. Returns the thread, for the caller to join or detach.
  static std::thread RunDetached(const std::shared_ptr<State>& me,
                                 std::vector<std::shared_ptr<Call>> calls);
  // Starts one thread; false if the system refused (logged).
  bool Spawn(const std::shared_ptr<State>& me);
};

bool IoExecutor::State::Spawn(const std::shared_ptr<State>& me) {
  workers.emplace_back();
  Worker* w = &workers.back();
  try {
    w->thread = std::thread([me, w] { me->Loop(w); });
  } catch (const std::system_error& e) {
    workers.pop_back();
    LogError("backing store: cannot start an I/O thread ({} running): {}", live, e.what());
    return false;
  }
  ++live;
  ++idle;
  return true;
}

void IoExecutor::State::Loop(Worker* self) {
  std::unique_lock lock(mu);
  for (;;) {
    work_cv.wait(lock, [&] { return stopped || !queue.empty(); });
    if (stopped) break;
    std::shared_ptr<Call> call = std::move(queue.front());
    queue.pop_front();
    --idle;
    call->phase = Call::Phase::kRunning;
    self->current = call;
    lock.unlock();
    call->body(call->progress);  // Run() wraps the caller's function: it cannot throw
    lock.lock();
    call->phase = Call::Phase::kDone;
    if (stalled && !stopped) {
      stalled = false;
      LogWarn("backing store: a call returned; calls wait up to {} ms again",
              options.timeout.count());
    }
    lock.unlock();
    // Woken with mu free, so that the waiter does not wake only to block on it (two more
    // switches per call). The call, and its condition variable, live on in `call`.
    call->done_cv.notify_all();
    // An abandoned call's result dies here, which may itself block (close() of a descriptor on
    // a stalled FUSE file system sends FLUSH): the thread counts as busy until it is done.
    call->body = nullptr;
    lock.lock();
    self->current.reset();
    ++idle;
    if (call->stuck) {
      --stuck;
      if (auto it = stuck_keys.find(call->key); it != stuck_keys.end() && --it->second == 0) {
        stuck_keys.erase(it);
      }
      if (all_stuck && !stopped) {
        all_stuck = false;
        LogWarn("backing store: a stuck call returned; I/O threads available again");
      }
    }
  }
  --live;
  --idle;
  self->exited = true;
  exit_cv.notify_all();
}

IoExecutor::IoExecutor(IoOptions options, Stats* stats) : state_(std::make_shared<State>()) {
  state_->options = options;
  state_->options.max_threads = std::max(1, options.max_threads);
  state_->stats = stats;
}

IoExecutor::~IoExecutor() { Stop(); }

void IoExecutor::Stop() {
  std::vector<std::thread> idle;
  std::vector<State::Worker*> busy;
  std::vector<std::shared_ptr<Call>> posted;  // queued by Post(): run detached, never dropped
  {
    std::lock_guard lock(state_->mu);
    if (state_->stopped) return;
    state_->stopped = true;
    for (auto& call : state_->queue) {
      call->done_cv.notify_all();
      if (call->posted) posted.push_back(call);
    }
    state_->queue.clear();
    for (auto& w : state_->workers) {
      if (!w.thread.joinable()) continue;
      if (w.current) {
        w.current->done_cv.notify_all();
        busy.push_back(&w);
      } else {
        idle.push_back(std::move(w.thread));
      }
    }
  }
  state_->work_cv.notify_all();
  for (auto& t : idle) t.join();
  std::thread runner = State::RunDetached(state_, std::move(posted));
  // A healthy store ends what is running (a close, a read step) within microseconds: such
  // threads are joined, so that a normal stop leaves no thread behind. What is still running
  // at the deadline is on a stuck store: detached, it holds the state and exits when its
  // call returns.
  std::unique_lock lock(state_->mu);
  state_->exit_cv.wait_for(lock, kStopGrace, [&] {
    return state_->runners == 0 &&
           std::all_of(busy.begin(), busy.end(), [](const State::Worker* w) { return w->exited; });
  });
  std::vector<std::thread> finished;
  for (State::Worker* w : busy) {
    if (w->exited) {
      finished.push_back(std::move(w->thread));
    } else {
      w->thread.detach();
    }
  }
  const bool runner_done = state_->runners == 0;
  lock.unlock();
  for (auto& t : finished) t.join();
  if (runner.joinable()) {
    if (runner_done) {
      runner.join();
    } else {
      runner.detach();
    }
  }
}

void IoExecutor::State::Post(const std::shared_ptr<State>& me, std::function<void()> fn) {
  auto call = std::make_shared<Call>();
  call->abandoned = true;  // nobody waits: it never becomes stuck
  call->posted = true;
  call->body = [fn = std::move(fn)](IoProgress&) { fn(); };
  {
    std::unique_lock lock(mu);
    if (!stopped) {
      queue.push_back(std::move(call));
      if (static_cast<size_t>(idle) < queue.size() && live < options.max_threads) {
        (void)Spawn(me);
      }
      lock.unlock();
      work_cv.notify_one();  // with mu free (see Loop)
      return;
    }
  }
  std::thread t = RunDetached(me, {std::move(call)});
  if (t.joinable()) t.detach();
}

std::thread IoExecutor::State::RunDetached(const std::shared_ptr<State>& me,
                                           std::vector<std::shared_ptr<Call>> calls) {
  if (calls.empty()) return {};
  auto run = [](std::vector<std::shared_ptr<Call>>& all) {
    for (auto& c : all) {
      c->body(c->progress);
      c->body = nullptr;
    }
  };
  {
    std::lock_guard lock(me->mu);
    ++me->runners;
  }
  try {
    return std::thread([run, calls, me]() mutable {
      run(calls);
      calls.clear();
      std::lock_guard lock(me->mu);
      --me->runners;
      me->exit_cv.notify_all();
    });
  } catch (const std::system_error&) {
    run(calls);
    std::lock_guard lock(me->mu);
    --me->runners;
    return {};
  }
}

void IoExecutor::Post(std::function<void()> fn) { state_->Post(state_, std::move(fn)); }

void IoExecutor::Poster::operator()(std::function<void()> fn) const {
  state_->Post(state_, std::move(fn));
}

IoExecutor::Poster IoExecutor::poster() const {
  Poster p;
  p.state_ = state_;
  return p;
}

int IoExecutor::stuck_threads() const {
  std::lock_guard lock(state_->mu);
  return state_->stuck;
}

bool IoExecutor::stalled() const {
  std::lock_guard lock(state_->mu);
  return state_->stalled;
}

int IoExecutor::threads() const {
  std::lock_guard lock(state_->mu);
  return state_->live + state_->runners;
}

Status IoExecutor::Execute(const std::string& key, std::function<void(IoProgress&)> body) {
  State& s = *state_;
  waited_calls_.fetch_add(1, std::memory_order_relaxed);
  auto call = std::make_shared<Call>();
  call->key = key;
  call->body = std::move(body);
  call->progress.Touch();
  const auto shown = [&] { return key.empty() ? std::string("dataset root") : key; };

  std::unique_lock lock(s.mu);
  if (s.stopped) return Status::Error(Code::kUnavailable, shown() + ": backing store closed");
  if (!key.empty() && s.stuck_keys.count(key)) {
    s.CountTimeout();
    return Status::Error(Code::kTimedOut,
                         shown() + ": an earlier backing-store call on it is still stuck");
  }
  if (s.stuck >= s.options.max_threads) {
    s.CountTimeout();
    if (!s.all_stuck) {
      s.all_stuck = true;
      LogError(
          "backing store: all {} I/O threads are stuck in calls that did not return within {} ms; "
          "calls fail at once until one returns",
          s.stuck, s.options.timeout.count());
    }
    return Status::Error(Code::kTimedOut,
                         shown() + ": the backing store is stalled (every I/O thread is stuck)");
  }
  s.queue.push_back(call);
  if (static_cast<size_t>(s.idle) < s.queue.size() && s.live < s.options.max_threads) {
    (void)s.Spawn(state_);
  }
  // The I/O thread is woken with mu free, so that it does not wake only to block on it; the
  // call may be done by the time mu is taken again (the loop below checks first).
  lock.unlock();
  s.work_cv.notify_one();
  lock.lock();

  const auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
      s.stalled ? std::min(s.options.timeout, s.options.stalled_timeout) : s.options.timeout);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  for (;;) {
    if (call->phase == Call::Phase::kDone) return Status::Ok();
    if (s.stopped) {
      call->abandoned = true;
      return Status::Error(Code::kUnavailable, shown() + ": backing store closed");
    }
    const Clock::time_point deadline{
        std::chrono::nanoseconds(call->progress.last_ns_.load(std::memory_order_relaxed)) +
        timeout};
    if (Clock::now() >= deadline) break;
    call->done_cv.wait_until(lock, deadline);
  }
  s.CountTimeout();
  call->abandoned = true;
  if (call->phase == Call::Phase::kQueued) {
    s.queue.erase(std::find(s.queue.begin(), s.queue.end(), call));
    return Status::Error(Code::kTimedOut, shown() + ": no I/O thread became free within " +
                                              std::to_string(ms) + " ms");
  }
  call->stuck = true;
  ++s.stuck;
  ++s.stuck_keys[key];
  if (!s.stalled) {
    s.stalled = true;
    LogError(
        "backing store: {} did not answer within {} ms; until a call returns, calls wait at most "
        "{} ms",
        shown(), ms, std::min(s.options.timeout, s.options.stalled_timeout).count());
  }
  if (s.logged.size() < kMaxLoggedKeys) {
    if (s.logged.insert(key).second) {
      LogError("backing store: {}: a call did not return within {} ms; abandoned ({} stuck)",
               shown(), ms, s.stuck);
    }
  } else if (!s.logged_more) {
    s.logged_more = true;
    LogError("backing store: more than {} paths had stuck calls; no longer logged one by one",
             kMaxLoggedKeys);
  }
  return Status::Error(Code::kTimedOut, shown() + ": the backing store did not answer within " +
                                            std::to_string(ms) + " ms");
}

}  // namespace clairfs
