// InodeTable: the kernel's node ids for dataset objects. Holds a path per node, never a file
// descriptor, so a million files cost memory only while the kernel remembers them.
//
// Node identity. A node id stands for the object that its path named when it was looked up:
// its path, (dev, ino) and file type, all fixed for the node's life.
//  - Lookup: a name whose object (dev, ino) already has a node shares that node only if the
//    name is the node's own path, or the caller checked that the node's path still names the
//    same (dev, ino) (a real hard link). Otherwise, e.g. when the inode number was reused by a
//    new file after the old one was deleted or renamed over, the name gets a new node, which
//    takes over the key; the old node keeps its identity only for the kernel's remaining
//    references and every use of it fails.
//  - Use: every request on a node checks that its path still names its (dev, ino) and type
//    (DatasetCore does, at Lookup of a child, GetAttr, ReadLink, Open and OpenDir) and fails kStale
//    otherwise; the kernel then retries the system call with a fresh lookup of each name.
//  - Contents are bound at open: a handle reads only the file it opened (DatasetCore::Bind).
// Limit: a file deleted and replaced at the same path by one that gets the same inode number
// and type is the same node (a plain stat cannot tell them apart); its contents still carry a
// new version (ctime), so an open never serves the old bytes.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/base/object.h"

namespace clairfs {

class InodeTable {
 public:
  static constexpr uint64_t kRootId = 1;
  static constexpr uint64_t kFirstDynamicId = 64;  // ids below are reserved (the .clairfs link)

  // What a node stands for. The root has path "" and no (dev, ino): it is the backing root
  // descriptor itself and is never stale.
  struct NodeInfo {
    std::string path;
    dev_t dev = 0;
    ino_t ino = 0;
    mode_t type = 0;  // st_mode & S_IFMT
    // True iff st (from the object path names now) is the object this node stands for.
    bool Names(const struct stat& st) const {
      return st.st_dev == dev && st.st_ino == ino && (st.st_mode & S_IFMT) == type;
    }
  };

  InodeTable();
  // The id of the object (dev, ino, type) found at path, with one more lookup reference,
  // following the identity rule above. `linked`: the id of a node for (dev, ino) whose own
  // path the caller found still naming (dev, ino) (see Keyed), or 0. Thread-safe.
  uint64_t Acquire(const std::string& path, dev_t dev, ino_t ino, mode_t type, uint64_t linked = 0);
  // The node that a lookup of (dev, ino) would share now, if any.
  bool Keyed(dev_t dev, ino_t ino, uint64_t* id, NodeInfo* info) const;
  // Drops n lookup references; the node is forgotten at zero. The root is never forgotten.
  void Forget(uint64_t id, uint64_t n);
  // What id stands for; false if the id is unknown.
  bool Get(uint64_t id, NodeInfo* info) const;
  bool Path(uint64_t id, std::string* path) const;
  // The versions the kernel last got for a node: attributes (a lookup or getattr reply) and
  // page contents (an open).
  struct Seen {
    FileVersion reported;
    FileVersion opened;
    // Since the last open, a READ through a handle of another version than `opened` (one
    // opened before it) was replied: the page cache may hold that version's pages, so the next
    // open must not keep them (ServedOlder).
    bool older_pages = false;
  };
  // A lookup or getattr reply carries version.
  void Report(uint64_t id, const FileVersion& version);
  // A lookup or getattr reply carries the attributes st (any type of object): records its
  // version as reported and its mode and owner (Shown), and clears a mark of Revalidated. A
  // regular file's version is kept when st has the same size and mtime (the kernel keeps its
  // pages then, whatever ctime says), so that a comparison still tells its pages are old.
  void Report(uint64_t id, const struct stat& st);
  // An open found version: records it as both, clears older_pages and returns what was seen
  // before ({} if none). An open of another version than the last one counts in
  // OpenedVersionChanges; `changes` (if given) gets that count as of this open.
  Seen SwapOpen(uint64_t id, const FileVersion& version, uint64_t* changes = nullptr);
  // A READ through a handle bound to `version` was replied (its pages are in the kernel's page
  // cache by then): when version is no longer the node's last opened one, marks older_pages
  // and returns true.
  bool ServedOlder(uint64_t id, const FileVersion& version);
  // How many opens found another version than the one opened before (a handle that read while
  // this did not move cannot have been overtaken by a newer open; lock-free).
  uint64_t OpenedVersionChanges() const { return opened_changes_.load(std::memory_order_acquire); }
  // What was seen of node id so far ({} if it is unknown).
  Seen SeenOf(uint64_t id) const;
  size_t size() const;

  // What fs/fresh/revalidate.h compares a fresh stat with: the attributes the kernel was last given
  // for the node (a lookup or getattr reply, or an open's version), or what a revalidation made
  // it forget. `known` is false until a reply with attributes was recorded.
  struct Shown {
    NodeInfo info;
    Seen seen;
    mode_t mode = 0;  // the whole st_mode
    uid_t uid = 0;
    gid_t gid = 0;
    bool known = false;
    bool gone = false;  // its name was dropped (the object went): nothing more to tell
  };
  // The newest node whose own path is path (the one a lookup of path made last), if the
  // kernel holds it. Thread-safe.
  bool ByPath(const std::string& path, uint64_t* id) const;
  bool ShownOf(uint64_t id, Shown* shown) const;
  // ByPath and ShownOf under one lock, but shown->info.path is left empty: the caller has it.
  bool ShownByPath(std::string_view path, uint64_t* id, Shown* shown) const;
  // The ids of the nodes the kernel holds now (the root included), ascending.
  void HeldIds(std::vector<uint64_t>* ids) const;
  // The kernel was told to forget node id's attributes (and pages) because the store now
  // shows st: recorded as shown, so the same change is not told twice. gone: its name was
  // dropped instead (the path names another object or nothing).
  void Revalidated(uint64_t id, const struct stat* st, bool gone);

 private:
  struct Node {
    NodeInfo info;
    uint64_t nlookup = 0;
    Seen seen;
    mode_t mode = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    bool known = false;
    bool gone = false;
  };
  struct Key {
    dev_t dev;
    ino_t ino;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.ino * 31 + k.dev); }
  };
  mutable std::mutex mu_;                    // leaf lock
  std::atomic<uint64_t> opened_changes_{0};  // written under mu_
  std::unordered_map<uint64_t, Node> nodes_;
  // The node a lookup of (dev, ino) may share; nodes superseded by a newer node of the same
  // key are in nodes_ only.
  std::unordered_map<Key, uint64_t, KeyHash> by_key_;
  // The newest node of each path; the key views the node's own path (nodes_ never moves a
  // node), and is re-inserted whenever the node it views goes.
  std::unordered_map<std::string_view, uint64_t> by_path_;
  uint64_t next_id_ = kFirstDynamicId;
};

}  // namespace clairfs
