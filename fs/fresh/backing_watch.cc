#include "fs/fresh/backing_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "cache/base/log.h"

namespace clairfs {
namespace {

constexpr uint32_t kAttributeEvents = IN_ATTRIB;
constexpr uint32_t kContentEvents = IN_MODIFY | IN_CLOSE_WRITE;
constexpr uint32_t kEntryEvents = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO;
constexpr uint32_t kMask = kAttributeEvents | kContentEvents | kEntryEvents | IN_EXCL_UNLINK;

std::string Child(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

// The inotify descriptor, closed by whoever lets it go last (the watch or an abandoned call).
std::shared_ptr<const int> OwnedFd(int fd) {
  return std::shared_ptr<const int>(new int(fd), [](const int* p) {
    close(*p);
    delete p;
  });
}

}  // namespace

Result<std::unique_ptr<BackingWatch>> BackingWatch::Start(const PosixBacking& backing, Hooks hooks,
                                                          uint64_t root_id, Counters& counters) {
  const int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (in < 0) return Status::FromErrno(errno, "inotify_init1");
  auto inotify = OwnedFd(in);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) return Status::FromErrno(errno, "eventfd");
  std::unique_ptr<BackingWatch> w(
      new BackingWatch(backing, std::move(hooks), inotify, wake, counters));
  w->Watch(root_id, "");
  w->thread_ = std::thread([self = w.get()] { self->Run(); });
  return w;
}

BackingWatch::BackingWatch(const PosixBacking& backing, Hooks hooks,
                           std::shared_ptr<const int> inotify, int wake_fd, Counters& counters)
    : backing_(backing),
      hooks_(std::move(hooks)),
      inotify_(std::move(inotify)),
      wake_fd_(wake_fd),
      counters_(counters) {}

BackingWatch::~BackingWatch() {
  Stop();
  close(wake_fd_);
}

void BackingWatch::Watch(uint64_t dir_id, const std::string& path) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !asked_.insert(dir_id).second) return;
    pending_.push_back({dir_id, path});
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void BackingWatch::WatchPath(const std::string& path) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || watched_.count(path) || !asked_paths_.insert(path).second) return;
    pending_.push_back({kNoNode, path});
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void BackingWatch::AskAgain(const Dir& d) {
  if (d.id == kNoNode) {
    asked_paths_.erase(d.path);
  } else {
    asked_.erase(d.id);
  }
}

void BackingWatch::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

bool BackingWatch::Watched(const std::string& path) const {
  std::lock_guard lock(mu_);
  return watched_.count(path) > 0;
}

bool BackingWatch::Quiet() const {
  // The queue first: an event read from it since has draining_ set until it was applied.
  int queued = 0;
  if (ioctl(*inotify_, FIONREAD, &queued) != 0 || queued > 0) return false;
  return !draining_.load() && !ended_.load();
}

void BackingWatch::Run() {
  struct Ended {
    std::atomic<bool>& flag;
    ~Ended() { flag.store(true); }
  } ended{ended_};
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    AddPending();
    pollfd fds[2] = {{*inotify_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LogError(
          "backing watch: poll failed ({}); changes of the dataset on this node now "
          "count only after fuse.attr_timeout / entry_timeout",
          std::strerror(errno));
      return;
    }
    if (fds[1].revents & POLLIN) {
      uint64_t n;
      (void)!read(wake_fd_, &n, sizeof(n));
    }
    if (fds[0].revents & POLLIN) {
      draining_.store(true);
      Drain();
      draining_.store(false);
    }
  }
}

void BackingWatch::AddPending() {
  std::vector<Dir> todo;
  {
    std::lock_guard lock(mu_);
    todo.swap(pending_);
  }
  for (Dir& d : todo) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    auto wd = backing_.WatchDir(inotify_, d.path, kMask);
    if (!wd.ok()) {
      counters_.refused.fetch_add(1, std::memory_order_relaxed);
      const bool full = wd.status().code() == Code::kNoSpace;  // the watch limit
      if (full && !refused_logged_) {
        refused_logged_ = true;
        LogWarn(
            "backing watch: cannot watch '{}' ({}): fs.inotify.max_user_watches is "
            "reached; changes under directories not watched count only after "
            "fuse.attr_timeout / entry_timeout",
            d.path, wd.status().message());
      } else if (!full) {
        LogDebug("backing watch: cannot watch '{}': {}", d.path, wd.status().message());
      }
      std::lock_guard lock(mu_);
      AskAgain(d);  // asked again at its next lookup or batch
      continue;
    }
    // inotify gives one descriptor per directory: a later node of it takes the entry over; a
    // WatchPath's never takes over one with a node (whose events the kernel must hear of).
    std::lock_guard lock(mu_);
    auto old = dirs_.find(wd.value());
    if (old != dirs_.end() && d.id == kNoNode && old->second.id != kNoNode) continue;
    if (old != dirs_.end()) Unwatched(old->second.path);
    ++watched_[d.path];
    if (dirs_.insert_or_assign(wd.value(), std::move(d)).second) {
      counters_.directories.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void BackingWatch::Drain() {
  // The invalidations of the events read now, each once.
  std::set<std::pair<uint64_t, Scope>> nodes;
  std::set<std::string> paths_attr, paths_contents;
  std::set<std::pair<uint64_t, std::string>> entries;
  std::set<std::string> changed;  // every path an event named (Hooks::changed)
  bool lost = false;              // Hooks::lost
  alignas(inotify_event) char buf[64 * 1024];
  for (;;) {
    const ssize_t n = read(*inotify_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: all read
    for (ssize_t at = 0; at < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      counters_.events.fetch_add(1, std::memory_order_relaxed);
      if (ev->mask & IN_Q_OVERFLOW) {
        counters_.overflows.fetch_add(1, std::memory_order_relaxed);
        lost = true;
        if (!overflow_logged_) {
          overflow_logged_ = true;
          LogWarn(
              "backing watch: events lost (the inotify queue overflowed); the changes "
              "they named count only after fuse.attr_timeout / entry_timeout");
        }
        continue;
      }
      auto dir = dirs_.find(ev->wd);
      if (dir == dirs_.end()) continue;
      if (ev->mask & IN_IGNORED) {  // the directory went (deleted, or its file system)
        {
          std::lock_guard lock(mu_);
          AskAgain(dir->second);
          Unwatched(dir->second.path);
        }
        dirs_.erase(dir);
        counters_.directories.fetch_sub(1, std::memory_order_relaxed);
        continue;
      }
      const std::string name = ev->len > 0 ? std::string(ev->name) : std::string();
      if (name.empty()) {  // the directory itself
        if ((ev->mask & kAttributeEvents) && dir->second.id != kNoNode) {
          nodes.insert({dir->second.id, Scope::kAttributes});
        }
        continue;
      }
      const std::string path = Child(dir->second.path, name);
      if (ev->mask & kEntryEvents) {
        if (dir->second.id != kNoNode) entries.insert({dir->second.id, name});
        changed.insert(path);
        // A directory renamed or removed: what is under it is not watched under its path.
        if ((ev->mask & IN_ISDIR) && (ev->mask & (IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO))) {
          std::lock_guard lock(mu_);
          UnwatchedBelow(path);
          lost = true;
        }
      }
      if (ev->mask & kContentEvents) paths_contents.insert(path);
      if (ev->mask & kAttributeEvents) paths_attr.insert(path);
    }
  }
  if (lost && hooks_.lost) hooks_.lost();
  if (hooks_.changed) {
    for (const std::string& p : paths_contents) hooks_.changed(p);
    for (const std::string& p : paths_attr) hooks_.changed(p);
    for (const std::string& p : changed) hooks_.changed(p);
  }
  // Objects are found by what their path names now (Hooks::node_of, a stat on the store): a
  // path that names nothing any more has had its entry dropped above.
  for (const std::string& p : paths_contents) {
    if (const uint64_t id = hooks_.node_of(p)) nodes.insert({id, Scope::kContents});
  }
  for (const std::string& p : paths_attr) {
    if (paths_contents.count(p)) continue;
    if (const uint64_t id = hooks_.node_of(p)) nodes.insert({id, Scope::kAttributes});
  }
  for (const auto& [id, scope] : nodes) {
    hooks_.invalidate(id, scope);
    counters_.invalidations.fetch_add(1, std::memory_order_relaxed);
  }
  for (const auto& [parent, name] : entries) {
    hooks_.invalidate_entry(parent, name);
    counters_.invalidations.fetch_add(1, std::memory_order_relaxed);
  }
}

void BackingWatch::Unwatched(const std::string& path) {
  auto it = watched_.find(path);
  if (it != watched_.end() && --it->second <= 0) watched_.erase(it);
}

void BackingWatch::UnwatchedBelow(const std::string& path) {
  const std::string prefix = path + "/";
  std::erase_if(watched_, [&](const auto& w) {
    return w.first == path || w.first.compare(0, prefix.size(), prefix) == 0;
  });
}

}  // namespace clairfs
