#include "fs/fresh/revalidate.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "cache/base/log.h"

namespace clairfs {
namespace {

std::pair<std::string, std::string> Split(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {std::string(), path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

// The store answered that the path leads to nothing (or through something that is not a
// directory any more, or through a symlink now).
bool Gone(const Status& s) {
  return s.code() == Code::kNotFound || s.code() == Code::kSymlink ||
         s.code() == Code::kOutsideRoot;
}

}  // namespace

Revalidator::Revalidator(const Backing& backing, InodeTable& inodes, Notify notify,
                         RevalidateOptions options, FreshStats& counters)
    : backing_(backing),
      inodes_(inodes),
      notify_(std::move(notify)),
      options_(options),
      counters_(counters) {}

Revalidator::~Revalidator() { Stop(); }

void Revalidator::Start() {
  std::lock_guard lock(mu_);
  if (!options_.sweep || thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Loop(); });
}

void Revalidator::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Revalidator::Change Revalidator::Compare(const InodeTable::Shown& shown, bool root, const Status& s,
                                         const struct stat& st) {
  if (!shown.known || shown.gone) return Change::kNone;
  if (!s.ok()) return !root && Gone(s) ? Change::kGone : Change::kUnanswered;
  if (!root && !shown.info.Names(st)) return Change::kGone;
  if (VersionOf(st) != shown.seen.reported) return Change::kContents;
  if (st.st_mode != shown.mode || st.st_uid != shown.uid || st.st_gid != shown.gid) {
    return Change::kAttributes;
  }
  return Change::kNone;
}

void Revalidator::Apply(uint64_t id, const InodeTable::Shown& shown, Change change, const Status& s,
                        const struct stat& st) {
  switch (change) {
    case Change::kNone:
      return;
    case Change::kUnanswered:
      counters_.failed.fetch_add(1, std::memory_order_relaxed);
      if (!failing_logged_.exchange(true, std::memory_order_relaxed)) {
        LogWarn(
            "revalidation: the backing store did not answer a stat of {} ({}): changes made "
            "elsewhere are seen once it answers",
            shown.info.path, s.message());
      }
      return;
    case Change::kGone: {
      // The kernel's name for the node is dropped in its parent: the next open looks it up.
      const auto [dir, name] = Split(shown.info.path);
      uint64_t parent = 0;
      inodes_.Revalidated(id, nullptr, true);
      if (!inodes_.ByPath(dir, &parent)) return;  // no parent held: no name held either
      counters_.entries.fetch_add(1, std::memory_order_relaxed);
      notify_.entry(parent, name);
      return;
    }
    case Change::kAttributes:
    case Change::kContents:
      inodes_.Revalidated(id, &st, false);
      counters_.invalidated.fetch_add(1, std::memory_order_relaxed);
      notify_.inode(id, change == Change::kContents);
      return;
  }
}

void Revalidator::Check(const std::vector<std::string>& paths, const std::vector<struct stat>& st,
                        const std::vector<Status>& status) {
  const size_t n = std::min({paths.size(), st.size(), status.size()});
  InodeTable::Shown shown;  // one for the batch: its strings are not allocated per path
  for (size_t i = 0; i < n; ++i) {
    uint64_t id = 0;
    if (!inodes_.ShownByPath(paths[i], &id, &shown)) continue;
    counters_.checked.fetch_add(1, std::memory_order_relaxed);
    const Change c = Compare(shown, id == InodeTable::kRootId, status[i], st[i]);
    if (c != Change::kUnanswered) failing_logged_.store(false, std::memory_order_relaxed);
    if (c == Change::kNone) continue;
    shown.info.path = paths[i];  // what Apply names (the node's own path: ByPath found it there)
    Apply(id, shown, c, status[i], st[i]);
  }
}

void Revalidator::SweepBatch(const std::vector<uint64_t>& ids, size_t from, size_t to) {
  std::vector<uint64_t> held;
  std::vector<InodeTable::Shown> shown;
  std::vector<std::string> paths;
  for (size_t i = from; i < to; ++i) {
    InodeTable::Shown s;
    if (!inodes_.ShownOf(ids[i], &s) || !s.known || s.gone) continue;  // forgotten meanwhile
    held.push_back(ids[i]);
    paths.push_back(s.info.path);
    shown.push_back(std::move(s));
  }
  if (paths.empty()) return;
  std::vector<struct stat> st;
  std::vector<Status> status;
  backing_.LstatMany(&paths, &st, &status);
  counters_.swept.fetch_add(held.size(), std::memory_order_relaxed);
  bool answered = false;
  for (size_t i = 0; i < held.size() && i < st.size() && i < status.size(); ++i) {
    const Change c = Compare(shown[i], held[i] == InodeTable::kRootId, status[i], st[i]);
    answered = answered || c != Change::kUnanswered;
    Apply(held[i], shown[i], c, status[i], st[i]);
  }
  if (answered) failing_logged_.store(false, std::memory_order_relaxed);
}

bool Revalidator::Sweep(const Clock::time_point* start) {
  std::vector<uint64_t> ids;
  inodes_.HeldIds(&ids);
  const size_t batch = std::max<size_t>(1, options_.batch);
  const size_t batches = std::max<size_t>(1, (ids.size() + batch - 1) / batch);
  const auto span = options_.interval * 45 / 100;
  for (size_t b = 0; b < batches; ++b) {
    if (start && !WaitUntil(*start + span * b / batches)) return false;
    SweepBatch(ids, b * batch, std::min(ids.size(), (b + 1) * batch));
  }
  counters_.rounds.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool Revalidator::WaitUntil(Clock::time_point t) {
  std::unique_lock lock(mu_);
  return !cv_.wait_until(lock, t, [&] { return stop_; });
}

void Revalidator::Loop() {
  const auto span = options_.interval * 45 / 100;
  for (;;) {
    const Clock::time_point start = Clock::now();
    if (!Sweep(&start)) return;
    // The next round starts span after this one did (at once if this one overran).
    if (!WaitUntil(start + span)) return;
  }
}

}  // namespace clairfs
