// DatasetCore: the namespace and open/bind rules of the dataset mount, without FUSE. The FUSE
// adapter (fs/clairfs_fs.h) turns each kernel request into one call here and replies with what
// it returns; the unit tests call it on a temporary directory (tests/unit/dataset_core_test.cc).
//
// Contract:
//  - Node ids are the kernel's (InodeTable, fs/core/inode_table.h): kRootId is the dataset
//    root, kControlLink the `.clairfs` symbolic link to the control mount (never listed; a
//    `.clairfs` of the dataset is shadowed), ids from kFirstDynamicId on are looked up objects.
//  - Identity: every call on a node checks that its path still names the object the node stands
//    for (dev, ino, type) and fails with kStale otherwise, counted in errors.stale_node; so does
//    a node id the table does not know, and a path that leads to nothing (or through a
//    non-directory) any more. The kernel answers kStale by looking each name up again.
//  - Errors are Status codes (cache/base/status.h): kStale, kPermissionDenied, kNotFound,
//    kInvalidArgument (not a regular file), kReadOnly (a write); a failure of the store keeps
//    the store's own. A few carry the errno the kernel protocol names for them (ENOTDIR for a
//    lookup below a non-directory, ELOOP for an open of the control link, ENODATA for an
//    attribute not served). The adapter maps every one through ToErrno (fs/status_errno.h).
//  - Binding (Open, ReadNode): a file's contents are bound to exactly one version: a tier's
//    blob of the version a stat of the path shows, or the file's descriptor (O_NONBLOCK,
//    identity checked) at the version its fstat shows. While the store does not answer, a
//    node binds to the version the kernel last got attributes of, only if a local tier holds
//    it (counted in served_unverified); else the store's error.
//  - The kernel's caches are told through KernelCache (fs/core/kernel_cache.h): attributes when
//    an open binds another version than the kernel last got; pages in no-open mode
//    (fs/core/page_versions.h).
//  - Access: Open re-checks the caller's access with its credentials (fs/core/access_rules.h).
// Thread-safe: every method may run on any FUSE worker thread at once; SetWatchers is called
// before the session loop. Locks: only the leaf locks of its parts (InodeTable, NodeReads,
// PageVersions) and root_mu_ (a leaf), never two at once.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cache/backing/backing.h"
#include "cache/backing/stat_ahead.h"
#include "cache/base/log_limit.h"
#include "cache/base/stats.h"
#include "cache/prefetch/prefetcher.h"
#include "fs/core/access_rules.h"
#include "fs/core/caller.h"
#include "fs/core/file_read.h"
#include "fs/core/fs_options.h"
#include "fs/core/fs_stats.h"
#include "fs/core/inode_table.h"
#include "fs/core/kernel_cache.h"
#include "fs/core/node_reads.h"
#include "fs/core/page_versions.h"

namespace clairfs {

class DatasetCore {
 public:
  // The `.clairfs` link's node (a reserved id, below InodeTable::kFirstDynamicId).
  static constexpr uint64_t kControlLink = 2;
  static constexpr const char* kControlName = ".clairfs";
  // How long after the kernel dropped a node's pages of one version the pages of another
  // may be served (fs/core/page_versions.h): a read() that held old pages at the drop has asked
  // for its next ones long before.
  static constexpr int64_t kPageGraceNs = 100'000'000;
  static constexpr size_t kPageSize = 4096;  // the kernel's pages (x86-64, arm64 default)

  // All references must outlive the core. root_aliases: the absolute paths that name the
  // dataset root (dataset and mountpoint), for symlink checks. control_target: where the
  // `.clairfs` link leads (the control mount). await_releases: run before an open and before a
  // READ binds a node, so that a plan whose writer's close() just returned counts for it
  // (Registrar::AwaitReleases); null: nothing to wait for.
  DatasetCore(PosixBacking& backing, Prefetcher& prefetcher, AccessRules& access, Stats& stats,
              FsStats& fs_stats, const FsOptions& options, std::vector<std::string> root_aliases,
              std::string control_target, KernelCache& kernel,
              std::function<void()> await_releases = nullptr);

  // What a watch of the store offers the core; set before the session loop, null: none.
  // ahead: stats made ahead of reads, which stand for a stat now (cache/backing/stat_ahead.h).
  // dir_seen: called with each directory node a lookup returns (the watch follows it).
  void SetWatchers(StatAhead* ahead, std::function<void(uint64_t, const std::string&)> dir_seen);

  // --- Namespace -------------------------------------------------------------------------
  struct Entry {
    uint64_t node = 0;
    struct stat attr {};
  };
  // The entry for name in directory node parent, with one more lookup reference on the node
  // (Forget drops them). The name is looked up in the directory the parent node stands for
  // (kStale if its path names another object). A symlink leading outside the dataset is
  // kNotFound. Another name of an object that has a node shares it only while the node's path
  // still names the object (a hard link); otherwise the inode number was reused. With stats
  // made ahead (SetWatchers), a record that StatAhead::Recent vouches for stands for the stat
  // of the parent (its identity check) and of the name: a planned name statted ahead is
  // answered without a backing call (counted in metadata.lookups_ahead).
  Result<Entry> Lookup(uint64_t parent, std::string_view name);
  // The kernel forgot n lookup references to node.
  void Forget(uint64_t node, uint64_t n);

  struct Attr {
    struct stat st {};
    // The store does not answer and st is the root's last answer, for kUnreachableAttrTimeout
    // seconds (so that `.clairfs` stays reachable).
    bool last_known = false;
  };
  static constexpr double kUnreachableAttrTimeout = 1.0;
  // The attributes of node; through an open file (handle non-null) those of the file it reads
  // (its descriptor's; while the store does not answer, those at open). Recorded as reported to
  // the kernel (InodeTable::Report). With stats made ahead (SetWatchers) whose signposts are
  // armed, a GETATTR of a signposted file first tells them a reader is there
  // (StatAhead::Reached), which may wait, bounded, for the stretch past it to be statted.
  Result<Attr> GetAttr(uint64_t node, const OpenContents* handle);
  // The target of symbolic link node (the same object before and after the read).
  Result<std::string> ReadLink(uint64_t node);

  // An open directory: a stream on the store.
  struct Dir {
    StoreHandlePtr store;
    std::string path;
  };
  Result<Dir> OpenDir(uint64_t node);
  // Entries of dir from offset `off`, about `size` bytes' worth read on an I/O thread, with the
  // entries the mount hides (the root's `.clairfs`, symlinks leading outside) left out. next:
  // where the batch ended (the last entry's next, hidden or not); end: no entries were left.
  struct DirBatch {
    std::vector<PosixBacking::DirEntry> entries;
    off_t next = 0;
    bool end = false;
  };
  Result<DirBatch> ReadDir(uint64_t node, const Dir& dir, off_t off, size_t size);
  Result<struct statvfs> StatFs();
  // access(2): only a write is refused (kReadOnly).
  static Status Access(int mask);
  // getxattr/listxattr of node: the value (name) or the list of names served (nullptr); see
  // AccessRules::Xattr.
  Result<std::string> Xattr(uint64_t node, const char* name);

  // --- Open and bind -------------------------------------------------------------------------
  // May caller open node with flags? Read-only opens only (kReadOnly), of a dataset node
  // (kControlLink: ELOOP, the kernel follows it), with the caller's access re-checked
  // (AccessRules::AllowOpen). *info: what node stands for.
  Status MayOpen(uint64_t node, int flags, const Caller& caller, InodeTable::NodeInfo* info);
  // An open file of node (per_open mode), after MayOpen: bound (Bind) and consumed in the plan.
  // keep_cache: the page cache may keep the file's pages (they hold the version bound).
  struct Opened {
    std::unique_ptr<OpenContents> contents;
    bool keep_cache = false;
  };
  Result<Opened> Open(uint64_t node, const InodeTable::NodeInfo& info);
  // A READ through the per_open handle `h` of node is being replied: a handle of an older
  // version puts that version's pages back, which the next open must not keep. Called before
  // the reply (the reader may open again as soon as it has it) and after it (an open may have
  // come in between). Takes what it needs of h before the reply (h may be released once it is
  // sent).
  struct Served {
    bool dataset = false;
    FileVersion version;
    uint64_t opened_changes = 0;
  };
  static Served ServedBy(const OpenContents& h) { return {h.dataset, h.version, h.opened_changes}; }
  void MarkServed(uint64_t node, const Served& served) {
    if (served.dataset && inodes_.OpenedVersionChanges() != served.opened_changes) {
      inodes_.ServedOlder(node, served.version);
    }
  }

  // A READ without a handle (fuse.open_mode: none) of [off, off+size) of node, by thread pid:
  // from the contents the node is bound to (fs/core/node_reads.h), binding it first when this
  // READ starts a read of the file (consumed in the plan only at offset 0). kStale when the
  // bytes must not reach the kernel (fs/core/page_versions.h: pages of two versions in one
  // read(), or a reply short of the size it caches). *drop_after_reply: the caller must call
  // DropPages(node) once it replied (this READ's pages are locked until its reply).
  Status ReadNode(uint64_t node, size_t size, uint64_t off, uint32_t pid, ReadReply* out,
                  bool* drop_after_reply);
  // The contents of a per_open handle h of node: ReadContents over this core's parts; kStale
  // (counted in errors.stale) once another version of the file was opened since h was: the
  // kernel's pages are the file's, not the handle's, and that open dropped the pages it found,
  // not those this READ would put back, which its reader would then take from the page cache
  // beside pages of its own version. A READ checked before that open is safe: its pages are
  // in the page cache, locked, until its reply, and the open's drop waits for them.
  Status Read(uint64_t node, OpenContents& h, size_t size, uint64_t off, ReadReply* out) {
    // (A handle bound unverified, opened_changes UINT64_MAX, recorded no open to compare.)
    if (h.dataset && h.opened_changes != UINT64_MAX &&
        inodes_.OpenedVersionChanges() != h.opened_changes &&
        inodes_.SeenOf(node).opened != h.version) {
      stats_.errors.stale.fetch_add(1, std::memory_order_relaxed);
      return Status::Error(Code::kStale, h.path + ": another version was opened since");
    }
    return ReadContents(h, backing_, prefetcher_, stats_, fs_stats_, size, off, out);
  }

  // The kernel's caches of node must be dropped (the watch or the revalidation saw a change):
  // pages (recorded, fs/core/page_versions.h) with attributes when contents, else attributes.
  void DropPages(uint64_t node, uint64_t from = 0);

  InodeTable& inodes() { return inodes_; }
  const FsOptions& options() const { return options_; }

 private:
  // How Bind bound a file's contents.
  enum class Bound {
    kFresh,       // to the version the backing file has now (its identity checked)
    kUnverified,  // the store does not answer: to a cached copy of the version last seen
  };
  // What a Bind did, besides filling the handle.
  struct Binding {
    Bound how = Bound::kFresh;
    InodeTable::Seen seen;  // what the kernel had of the node before
    // The READ's bytes, when the file is read from its descriptor and they came with its open
    // (Bind's first; PosixBacking::OpenFile).
    std::optional<PosixBacking::Bytes> first;
  };
  Result<InodeTable::NodeInfo> NodeOf(uint64_t node) const;
  // kStale (counted) unless st is node's object (the root always is).
  Status CheckIdentity(uint64_t node, const InodeTable::NodeInfo& info, const struct stat& st);
  // A stat of path on the backing store made on a reader's path (counted in
  // metadata.reader_stats).
  Status ReaderLstat(const std::string& path, struct stat* st);
  // A stat of path made ahead that stands for one made now (StatAhead::Recent, not counted as
  // a read's); false without stats made ahead.
  bool Ahead(const std::string& path, struct stat* st);
  // The stat of what node's path names now, if that is node's own object (else kStale).
  Status Verify(uint64_t node, const InodeTable::NodeInfo& info, struct stat* st);
  // A failure to reach a node's path: kStale (counted) when the path no longer leads to an
  // object of the node's kind (ENOENT, ENOTDIR, ELOOP), else the failure itself.
  Status PathError(Status s);
  // Binds h to dataset file node as an open does, and is the one place that chooses where its
  // bytes come from: the prefetcher's blob of the file's current version when it holds one
  // (a tier, the staging window or a peer; consume: a read of the file in the plan), the
  // prefetcher chunk by chunk for a chunked file (ReadContents asks per chunk, and reads a chunk
  // it does not hold from the descriptor), else the file's descriptor (O_NONBLOCK, identity
  // checked) at its current version. The kernel's cached attributes are invalidated if they show
  // another version. first: the READ this bind is for, if any; when the file is read from its
  // descriptor, that READ's bytes may come with the open (Binding::first).
  Result<Binding> Bind(uint64_t node, const InodeTable::NodeInfo& info, bool consume,
                       OpenContents* h, const PosixBacking::FirstRead* first = nullptr);
  // Bind's open of the backing file: h->store and h->st, identity checked, and the READ's bytes
  // if first asked for them and they came with the open. Errors as Bind returns them (kStale
  // for another object at the path); while the store does not answer, the binding BindUnverified
  // makes instead.
  Result<Binding> OpenStore(uint64_t node, const InodeTable::NodeInfo& info, OpenContents* h,
                            const PosixBacking::FirstRead* first);
  // The store did not answer (cause): binds h, if a local tier holds it, to the version the
  // kernel last saw of the node, logged once per episode; else cause.
  Result<Binding> BindUnverified(uint64_t node, const InodeTable::NodeInfo& info, OpenContents* h,
                                 const Status& cause);
  // True iff the object at path may appear in the mount (symlinks must stay inside the tree).
  bool Visible(const std::string& path, const struct stat& st);
  void ControlLinkAttr(struct stat* st) const;

  PosixBacking& backing_;
  Prefetcher& prefetcher_;
  AccessRules& access_;
  Stats& stats_;
  FsStats& fs_stats_;
  const FsOptions options_;
  const std::vector<std::string> aliases_;
  const std::string control_target_;
  KernelCache& kernel_;
  const std::function<void()> await_releases_;
  InodeTable inodes_;
  // fuse.open_mode none: contents of the files being read, at most options_.node_read_bytes
  NodeReads node_reads_{4096, options_.node_read_bytes};
  // fuse.open_mode none: the version of each node's pages in the kernel, so that a read()
  // never gets pages of two versions.
  PageVersions pages_{kPageGraceNs};
  StatAhead* ahead_ = nullptr;                                  // set before the session loop
  std::function<void(uint64_t, const std::string&)> dir_seen_;  // likewise
  uid_t uid_;
  gid_t gid_;
  struct timespec started_;
  std::atomic<bool> unverified_logged_{false};  // this unreachable-store episode was logged
  LogLimit open_log_;  // opens that failed (a fetch error, a timeout): rate-limited lines
  // The dataset root's last attributes from the store (first: as PosixBacking::Open found
  // them). root_mu_ is a leaf.
  std::mutex root_mu_;
  struct stat root_st_ {};
};

}  // namespace clairfs
