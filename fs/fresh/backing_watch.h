// BackingWatch: makes the kernel forget what it caches of a dataset object as soon as the
// backing store changes it on this node, instead of after entry_timeout / attr_timeout (3600 s
// by default). It matters most with fuse.open_mode none, where the kernel alone checks
// permissions at open, against the mode bits and ACLs it caches: a chmod, chown or setfacl of
// a dataset file counts at its next open only through this.
//
// One inotify instance, a watch on every dataset directory the kernel has looked up (Watch():
// at LOOKUP of a directory, and the root at Start), added on the backing store's I/O threads
// with their deadline (PosixBacking::WatchDir). Events, read on one thread of its own, become
// invalidations through Hooks:
//   IN_ATTRIB (mode, owner, ACLs, times, link count) of a child or of the directory itself:
//     the node's attributes and cached ACLs (Scope::kAttributes);
//   IN_MODIFY, IN_CLOSE_WRITE of a child: its attributes and pages (Scope::kContents);
//   IN_CREATE, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO of a name: the kernel's entry for that
//     name in the directory, so that the next open looks it up again.
// An invalidation only makes the kernel ask the daemon again: a spurious one costs a round
// trip, never correctness, so the rules can stay simple (events of one read() are applied
// once each, in any order).
//
// Limits (docs/architecture.md, "No-open mode"): inotify sees only changes made through this
// node's kernel; a change made by another node of a network file system still counts after
// attr_timeout / entry_timeout, or at a read that reaches the daemon. A watched directory
// renamed keeps its watch under the path it had: the names in it are still dropped by the
// directory's node, but a child's attributes are looked for at the old path (then they count
// after attr_timeout). A watch that cannot be added (fs.inotify.max_user_watches) and a lost
// event queue (IN_Q_OVERFLOW) are logged once each with their consequence and counted; the
// rest goes on.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/backing/backing.h"
#include "fs/fresh/fresh_stats.h"

namespace clairfs {

class BackingWatch {
 public:
  enum class Scope {
    kAttributes,  // attributes and cached ACLs
    kContents,    // attributes and the file's pages
  };
  struct Hooks {
    // The kernel's node id of the object at path (dataset relative), 0 if it has none.
    std::function<uint64_t(const std::string& path)> node_of;
    // Makes the kernel drop what scope names of node id.
    std::function<void(uint64_t id, Scope scope)> invalidate;
    // Makes the kernel drop its entry for name in directory node parent.
    std::function<void(uint64_t parent, const std::string& name)> invalidate_entry;
    // Optional. The object at path (dataset relative) changed: called for every path an event
    // names, before the kernel is told.
    std::function<void(const std::string& path)> changed;
    // Optional. Changes may have gone unreported: events were lost, or a directory was
    // renamed or removed (the names under it are not watched under their new paths).
    std::function<void()> lost;
  };

  using Counters = WatchStats;
  // Creates the inotify instance and starts the thread (after any daemonizing fork), watching
  // the root directory (node id root_id). backing, counters and the hooks' targets must outlive
  // Stop().
  static Result<std::unique_ptr<BackingWatch>> Start(const PosixBacking& backing, Hooks hooks,
                                                     uint64_t root_id, Counters& counters);
  ~BackingWatch();  // Stop()
  BackingWatch(const BackingWatch&) = delete;
  BackingWatch& operator=(const BackingWatch&) = delete;

  // Asks for a watch on the directory at path (node dir_id); returns at once (the watch is
  // added by the thread). A directory asked for before is not asked again, so the kernel's
  // repeated lookups cost a set lookup. Thread-safe.
  void Watch(uint64_t dir_id, const std::string& path);
  // Asks for a watch on the directory at path for a reader that does not go through the
  // kernel (the batch path, docs/batch-path.md): the kernel has no node of it, so its events
  // drop no kernel entry or attributes, they only reach Hooks::changed and Hooks::lost. A
  // directory watched or asked for before (by either call) is not asked again; a later
  // Watch(dir_id, path) takes its watch over. Thread-safe.
  void WatchPath(const std::string& path);
  // Ends the thread; it returns within the store deadline of a watch being added.
  void Stop();
  // Whether changes to the names in directory path ("" the root) are reported from now on: a
  // watch on it was added and it was not renamed or removed since. Thread-safe.
  bool Watched(const std::string& path) const;
  // Whether every event the kernel queued before this call has been read and applied (its
  // hooks called): false while any is unread or being applied, and once the thread ended. The
  // kernel queues a change's event before the call that made it returns. Thread-safe,
  // lock-free: one ioctl.
  bool Quiet() const;
  const Counters& counters() const { return counters_; }

 private:
  BackingWatch(const PosixBacking& backing, Hooks hooks, std::shared_ptr<const int> inotify,
               int wake_fd, Counters& counters);
  void Run();
  void AddPending();
  void Drain();  // reads and applies the events available now
  // Under mu_: one watch descriptor of the directory at path went; every watched path at or
  // below path stops counting as watched.
  void Unwatched(const std::string& path);
  void UnwatchedBelow(const std::string& path);

  struct Dir {
    uint64_t id;  // kNoNode: asked for by WatchPath
    std::string path;
  };
  static constexpr uint64_t kNoNode = 0;
  // Under mu_: d may be asked for again (its watch failed or went).
  void AskAgain(const Dir& d);
  const PosixBacking& backing_;
  const Hooks hooks_;
  const std::shared_ptr<const int> inotify_;  // shared with abandoned WatchDir calls
  const int wake_fd_;                         // an eventfd: Watch() and Stop() wake the thread
  Counters& counters_;
  // Lock order: mu_ is a leaf. Guards pending_, asked_, watched_ and stopping_.
  mutable std::mutex mu_;
  std::vector<Dir> pending_;
  std::unordered_set<uint64_t> asked_;           // dir ids asked for (watched or pending)
  std::unordered_set<std::string> asked_paths_;  // paths asked for by WatchPath
  // Paths of the directories watched (Watched), with how many watch descriptors name each.
  std::unordered_map<std::string, int> watched_;
  bool stopping_ = false;
  // Set while the thread reads and applies events; cleared when it ends (then never quiet).
  std::atomic<bool> draining_{false};
  std::atomic<bool> ended_{false};
  std::unordered_map<int, Dir> dirs_;  // by watch descriptor; the thread's own
  bool refused_logged_ = false;        // the thread's own
  bool overflow_logged_ = false;       // the thread's own
  std::thread thread_;
};

}  // namespace clairfs
