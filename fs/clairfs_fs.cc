#include "fs/clairfs_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <vector>

#include "cache/resolver.h"
#include "fs/file_read.h"
#include "fs/read_only_ops.h"
#include "fs/request_guard.h"
#include "fs/status_errno.h"

namespace clairfs {
namespace {

constexpr const char* kControlDirName = ".clairfs";

std::string Child(const std::string& dir, const char* name) {
  return dir.empty() ? std::string(name) : dir + "/" + name;
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ClairFs* Self(fuse_req_t req) { return static_cast<ClairFs*>(fuse_req_userdata(req)); }

// Runs a handler so that no exception escapes into libfuse; on one the request gets EIO.
constexpr RequestGuard Guard{"request"};

}  // namespace

// An open file is an OpenContents (fs/file_read.h): a dataset file's contents.
using FileHandle = OpenContents;

// An open directory: a stream on the store (read on its I/O threads, closed there when the
// handle goes).
struct ClairFs::DirHandle {
  StoreHandlePtr store;
  std::string path;
};

ClairFs::ClairFs(PosixBacking& backing, Prefetcher& prefetcher, ControlPlane& control,
                 AccessPolicy& access, Stats& stats, FsOptions options,
                 std::vector<std::string> root_aliases, std::string control_target)
    : backing_(backing),
      prefetcher_(prefetcher),
      control_(control),
      stats_(stats),
      options_(options),
      aliases_(std::move(root_aliases)),
      access_(access),
      control_target_(std::move(control_target)),
      uid_(getuid()),
      gid_(getgid()),
      root_st_(backing.root_at_open().st) {
  clock_gettime(CLOCK_REALTIME, &started_);
}

void ClairFs::Init(fuse_conn_info* conn) {
  // O_TRUNC reaches open() (replace vs. append of the manifest) instead of a separate setattr.
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  // The kernel drops a file's pages when fresh attributes show another size or mtime. Opens
  // drop them on any version change (keep_cache) and make the kernel fetch fresh attributes
  // (InvalidateAttrs); this covers the attributes refreshed by lookup and getattr between.
  if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  access_.Init(conn);  // POSIX ACLs enforced by the kernel
  // No call on the store here: every request of the mount waits for the answer to INIT.
}

void ClairFs::ControlLinkAttr(struct stat* st) const {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = 0x7fffff00u + kControlLink;
  st->st_mode = S_IFLNK | 0777;
  st->st_nlink = 1;
  st->st_uid = uid_;
  st->st_gid = gid_;
  st->st_size = static_cast<off_t>(control_target_.size());
  st->st_atim = st->st_mtim = st->st_ctim = started_;
}

bool ClairFs::PathOf(fuse_req_t req, fuse_ino_t ino, std::string* path) {
  if (inodes_.Path(ino, path)) return true;
  fuse_reply_err(req, ESTALE);
  return false;
}

bool ClairFs::NodeOf(fuse_req_t req, fuse_ino_t ino, InodeTable::NodeInfo* node) {
  if (inodes_.Get(ino, node)) return true;
  fuse_reply_err(req, ESTALE);
  return false;
}

bool ClairFs::CheckIdentity(fuse_req_t req, fuse_ino_t ino, const InodeTable::NodeInfo& node,
                            const struct stat& st) {
  if (ino == InodeTable::kRootId || node.Names(st)) return true;
  stats_.errors.stale_node.fetch_add(1, std::memory_order_relaxed);
  fuse_reply_err(req, ESTALE);
  return false;
}

int ClairFs::PathErrno(const Status& s) {
  const int err = ToErrno(s);
  if (err != ENOENT && err != ENOTDIR && err != ELOOP) return err;
  stats_.errors.stale_node.fetch_add(1, std::memory_order_relaxed);
  return ESTALE;
}

bool ClairFs::Verify(fuse_req_t req, fuse_ino_t ino, const InodeTable::NodeInfo& node,
                     struct stat* st) {
  Status s = backing_.Lstat(node.path, st);
  if (!s.ok()) {
    fuse_reply_err(req, PathErrno(s));
    return false;
  }
  return CheckIdentity(req, ino, node, *st);
}

void ClairFs::InvalidateAttrs(fuse_ino_t ino) {
  fuse_session* se = session_.load(std::memory_order_acquire);
  if (!se) return;
  // -ENOENT: the kernel holds no inode for ino any more; nothing to drop.
  const int rc = fuse_lowlevel_notify_inval_inode(se, ino, -1, 0);
  if (rc != 0 && rc != -ENOENT) {
    spdlog::debug("attribute invalidation of node {}: {}", ino, std::strerror(-rc));
  }
}

void ClairFs::DropPages(fuse_ino_t ino, uint64_t from) {
  fuse_session* se = session_.load(std::memory_order_acquire);
  if (!se) return;
  const uint64_t ticket = pages_.DropBegin(ino);
  // -ENOENT: the kernel holds no inode for ino any more, so no page either.
  const int rc = fuse_lowlevel_notify_inval_inode(se, ino, static_cast<off_t>(from), 0);
  if (rc != 0 && rc != -ENOENT) {
    spdlog::debug("invalidation of the pages of node {}: {}", ino, std::strerror(-rc));
    return;  // not dropped: the node's pages stay as they were
  }
  pages_.DropDone(ino, ticket, SteadyNs());
}

bool ClairFs::Visible(const std::string& path, const struct stat& st) {
  if (!S_ISLNK(st.st_mode)) return true;
  PathResolver resolver(backing_, aliases_);
  return SymlinkStaysInside(resolver, path);
}

void ClairFs::Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (parent == FUSE_ROOT_ID && std::strcmp(name, kControlDirName) == 0) {
    fuse_entry_param e{};
    e.ino = kControlLink;
    ControlLinkAttr(&e.attr);
    e.attr_timeout = options_.attr_timeout;  // fixed for the life of the daemon
    e.entry_timeout = options_.entry_timeout;
    return (void)fuse_reply_entry(req, &e);
  }
  if (parent == kControlLink) return (void)fuse_reply_err(req, ENOTDIR);
  InodeTable::NodeInfo dir;
  if (!NodeOf(req, parent, &dir)) return;
  if (dir.type != S_IFDIR) return (void)fuse_reply_err(req, ENOTDIR);
  // The name is looked up in the directory the parent node stands for, not in whatever
  // directory its path names now (the root is the backing root descriptor: never stale).
  fuse_entry_param e{};
  if (parent != FUSE_ROOT_ID && !Verify(req, parent, dir, &e.attr)) return;
  const std::string path = Child(dir.path, name);
  Status s = backing_.Lstat(path, &e.attr);
  if (!s.ok()) return (void)fuse_reply_err(req, ToErrno(s));
  if (!Visible(path, e.attr)) return (void)fuse_reply_err(req, ENOENT);
  // Another name of an object that has a node shares it only while the node's own path still
  // names the object (a hard link); otherwise the inode number was reused.
  uint64_t linked = 0;
  InodeTable::NodeInfo known;
  if (inodes_.Keyed(e.attr.st_dev, e.attr.st_ino, &linked, &known) && known.path != path) {
    struct stat kst;
    if (!backing_.Lstat(known.path, &kst).ok() || !known.Names(kst)) linked = 0;
  }
  e.ino = inodes_.Acquire(path, e.attr.st_dev, e.attr.st_ino, e.attr.st_mode, linked);
  inodes_.Report(e.ino, e.attr);  // any type: what fs/revalidate.h compares with
  if (S_ISDIR(e.attr.st_mode) && watch_) watch_->Watch(e.ino, path);
  e.attr_timeout = options_.attr_timeout;
  e.entry_timeout = options_.entry_timeout;
  fuse_reply_entry(req, &e);
}

void ClairFs::GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  struct stat st;
  if (ino == kControlLink) {
    ControlLinkAttr(&st);
    return (void)fuse_reply_attr(req, &st, options_.attr_timeout);
  }
  const auto* h = fi ? reinterpret_cast<const FileHandle*>(fi->fh) : nullptr;
  if (h && h->dataset && h->st.st_mode != 0) {
    // Asked through an open file (a read checking the size): the attributes of the file that
    // handle reads, also when its path names another file by now. (An open served unverified
    // has none: the path's are asked for.) While the store does not answer: the attributes at
    // open, those of the bytes the handle serves.
    st = h->st;
    if (h->store) {
      Status got = backing_.Fstat(h->store, h->path, &st);
      if (!got.ok() && StoreUnreachable(got)) {
        st = h->st;
      } else if (!got.ok()) {
        return (void)fuse_reply_err(req, ToErrno(got));
      }
    }
  } else if (ino == FUSE_ROOT_ID) {
    // The root's attributes stay available while the store does not answer, so that the
    // control files (stats, errors) can still be reached through `.clairfs`: the last ones it
    // gave.
    Status got = backing_.Lstat("", &st);
    std::lock_guard lock(root_mu_);
    if (got.ok()) {
      root_st_ = st;
    } else if (StoreUnreachable(got) && root_st_.st_mode != 0) {
      return (void)fuse_reply_attr(req, &root_st_, kUnreachableAttrTimeout);
    } else {
      return (void)fuse_reply_err(req, ToErrno(got));
    }
  } else {
    InodeTable::NodeInfo node;
    if (!NodeOf(req, ino, &node) || !Verify(req, ino, node, &st)) return;
  }
  inodes_.Report(ino, st);
  fuse_reply_attr(req, &st, options_.attr_timeout);
}

void ClairFs::ReadLink(fuse_req_t req, fuse_ino_t ino) {
  if (ino == kControlLink) return (void)fuse_reply_readlink(req, control_target_.c_str());
  InodeTable::NodeInfo node;
  struct stat st;
  if (!NodeOf(req, ino, &node) || !Verify(req, ino, node, &st)) return;
  auto target = backing_.ReadLink(node.path);
  if (!target.ok()) return (void)fuse_reply_err(req, PathErrno(target.status()));
  // A symlink's target never changes: the same object before and after is the one read.
  if (!Verify(req, ino, node, &st)) return;
  fuse_reply_readlink(req, target.value().c_str());
}

void ClairFs::Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino == kControlLink) return (void)fuse_reply_err(req, ELOOP);  // the kernel follows it
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
    return (void)fuse_reply_err(req, EROFS);
  }
  control_.AwaitReleases();  // a plan whose writer's close() just returned counts for this open
  InodeTable::NodeInfo node;
  if (!NodeOf(req, ino, &node)) return;
  if (!access_.AllowOpen(req, node.path, fi->flags)) return;  // a revoked access fails at once
  // No-open mode: the kernel takes ENOSYS as "open it yourself, from now on, for every file of
  // this connection"; the reads that miss its page cache come to ReadNode.
  if (options_.open_mode == OpenMode::kNone) return (void)fuse_reply_err(req, ENOSYS);
  auto h = std::make_unique<FileHandle>();
  InodeTable::Seen seen;
  const Bound bound = Bind(req, ino, node, true, h.get(), &seen);
  if (bound == Bound::kReplied) return;
  // The page cache may keep this file's pages only while its version is the one they hold.
  const FileVersion version = bound == Bound::kFresh ? VersionOf(h->st) : h->blob->version();
  fi->keep_cache =
      options_.keep_cache && !seen.older_pages &&
      (seen.opened == version || (bound == Bound::kFresh && seen.opened == FileVersion{}));
  h->version = version;
  fi->noflush = 1;  // nothing to flush on a read-only file: close() needs no round trip
  fi->fh = reinterpret_cast<uint64_t>(h.get());
  if (fuse_reply_open(req, fi) == 0) h.release();
}

ClairFs::Bound ClairFs::Bind(fuse_req_t req, fuse_ino_t ino, const InodeTable::NodeInfo& node,
                             bool consume, OpenContents* h, InodeTable::Seen* seen) {
  // The version is taken by a stat of the path (beneath the root, no symlink followed): when
  // a tier holds a blob of exactly that version, it is served and no descriptor is opened. Else
  // the file is opened (O_NONBLOCK, so that a FIFO swapped in for it never blocks) and every
  // later byte comes from that descriptor, of the version its fstat reports.
  // A stat made ahead of this read (cache/stat_ahead.h) stands for one made now when the
  // backing watch vouches that nothing changed the file since.
  h->dataset = true;
  struct stat st;
  Status looked = Status::Ok();
  if (!ahead_ || !ahead_->Recent(node.path, &st) || !node.Names(st)) {
    looked = backing_.Lstat(node.path, &st);
  }
  if (!looked.ok() && StoreUnreachable(looked)) {
    return BindUnverified(req, ino, node, h, seen, looked) ? Bound::kUnverified : Bound::kReplied;
  }
  if (!looked.ok()) {
    fuse_reply_err(req, PathErrno(looked));
    return Bound::kReplied;
  }
  unverified_logged_.store(false, std::memory_order_relaxed);
  // Another object at this path (a FIFO or directory swapped in) is ESTALE, so the kernel
  // looks the name up again and learns what it is now.
  if (!CheckIdentity(req, ino, node, st)) return Bound::kReplied;
  if (!S_ISREG(st.st_mode)) {
    fuse_reply_err(req, EINVAL);
    return Bound::kReplied;
  }
  h->st = st;
  h->path = node.path;
  FileVersion version = VersionOf(st);
  auto opened = prefetcher_.Open(node.path, version, consume);
  if (!opened.ok()) {
    if (uint64_t more = 0; open_log_.Allow(&more)) {
      spdlog::warn("open {}: {}{}", node.path, opened.status().ToString(),
                   more ? fmt::format(" ({} more failed opens since the last line)", more) : "");
    }
    fuse_reply_err(req, ToErrno(opened.status()));
    return Bound::kReplied;
  }
  const bool cached = opened.value().blob && opened.value().blob->version() == version &&
                      opened.value().source != OpenResult::Source::kChunked;
  if (!cached) {
    auto fd = backing_.OpenFile(node.path);
    if (!fd.ok() && fd.status().code() == Code::kInvalidArgument) {
      struct stat now;  // not a regular file any more: ESTALE if another object (see above)
      if (Verify(req, ino, node, &now)) fuse_reply_err(req, EINVAL);
      return Bound::kReplied;
    }
    if (!fd.ok() && StoreUnreachable(fd.status())) {
      return BindUnverified(req, ino, node, h, seen, fd.status()) ? Bound::kUnverified
                                                                  : Bound::kReplied;
    }
    if (!fd.ok()) {
      fuse_reply_err(req, PathErrno(fd.status()));
      return Bound::kReplied;
    }
    h->store = std::move(fd.value().handle);
    h->st = fd.value().st;
    if (!CheckIdentity(req, ino, node, h->st)) return Bound::kReplied;
    if (!S_ISREG(h->st.st_mode)) {
      fuse_reply_err(req, EINVAL);
      return Bound::kReplied;
    }
    if (VersionOf(h->st) != version) {  // changed since the stat: the descriptor's version
      version = VersionOf(h->st);
      opened.value().blob.reset();
    }
  }
  h->chunked = opened.value().source == OpenResult::Source::kChunked;
  if (h->chunked) h->chunk_size = opened.value().chunk;  // keeps store for unplanned chunks
  h->blob = std::move(opened.value().blob);
  if (h->blob && h->blob->version() != version) {
    stats_.errors.stale.fetch_add(1, std::memory_order_relaxed);
    h->blob.reset();
  }
  if (h->blob) {
    h->store.reset();  // a cached file holds no descriptor (closed on an I/O thread)
  } else if (!h->chunked) {
    stats_.served_backing.fetch_add(1, std::memory_order_relaxed);
    stats_.backing_reads.fetch_add(1, std::memory_order_relaxed);
  }
  // The kernel's attributes (size above all: reads stop at the size it caches) must follow
  // the version. The invalidation is sent from this handler: with offset -1 the kernel only
  // marks the inode's attributes stale (fuse_reverse_inval_inode takes no inode or page lock),
  // and neither a read-only open (Linux fuse_open locks the inode only for an O_TRUNC open
  // with writeback cache or DAX; O_TRUNC is refused, writeback cache is off) nor a READ holds
  // the inode lock while it waits for the reply, so it cannot deadlock. Without dirty pages
  // (this mount has none) libfuse documents that the notification never blocks.
  *seen = inodes_.SwapOpen(ino, version, &h->opened_changes);
  if (seen->reported != version) InvalidateAttrs(ino);
  return Bound::kFresh;
}

bool ClairFs::BindUnverified(fuse_req_t req, fuse_ino_t ino, const InodeTable::NodeInfo& node,
                             OpenContents* h, InodeTable::Seen* seen, const Status& cause) {
  *seen = inodes_.SeenOf(ino);
  h->opened_changes = UINT64_MAX;  // no open recorded: every READ compares (ClairFs::Read)
  const FileVersion& last = seen->reported;  // what the kernel's cached attributes say
  auto blob = last == FileVersion{} ? Result<BlobPtr>(Status::Error(Code::kNotFound, node.path))
                                    : prefetcher_.GetLocal(node.path, last);
  if (!blob.ok() || !blob.value() || blob.value()->version() != last) {
    fuse_reply_err(req, ToErrno(cause));
    return false;
  }
  if (!unverified_logged_.exchange(true, std::memory_order_relaxed)) {
    spdlog::warn(
        "the backing store does not answer ({}): serving cached files at the version "
        "last seen, unverified, until it does",
        cause.message());
  }
  h->path = node.path;
  h->blob = std::move(blob.value());
  stats_.served_unverified.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ClairFs::Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  if (fi->fh == 0) return ReadNode(req, ino, size, off);  // no-open mode: no handle
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  // The reply may complete the reader's read() before fuse_reply_iov returns here, and its
  // close() may release the handle meanwhile: `reply` keeps the bytes alive until then.
  ReadReply reply;
  Status s =
      ReadContents(*h, backing_, prefetcher_, stats_, size, static_cast<uint64_t>(off), &reply);
  if (!s.ok()) return (void)fuse_reply_err(req, ToErrno(s));  // counted in stats
  // A handle opened before a newer version's open (which dropped the page cache) puts its own
  // version's pages back with this reply; the next open must not keep them. The pages are in
  // the cache once fuse_reply_iov returned, so the mark after it is seen by every later open.
  // h may be released once the reply is sent: what the mark needs is taken before.
  const bool dataset = h->dataset;
  const FileVersion version = h->version;
  const uint64_t opened_changes = h->opened_changes;
  fuse_reply_iov(req, reply.iov.data(), static_cast<int>(reply.iov.size()));
  if (dataset && inodes_.OpenedVersionChanges() != opened_changes) {
    inodes_.ServedOlder(ino, version);
  }
}

void ClairFs::ReadNode(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off) {
  std::shared_ptr<OpenContents> c = node_reads_.Find(ino);
  if (off == 0 || !c) {
    // A read of the file starts (at offset 0), or a READ finds its node not bound (the
    // kernel's readahead can send a later READ before the first one bound it): bound afresh,
    // so the version is checked at every read that reaches the daemon. Only a start is
    // consumed in the plan (and counted in file_reads), as an open is.
    control_.AwaitReleases();
    InodeTable::NodeInfo node;
    if (!NodeOf(req, ino, &node)) return;
    auto fresh = std::make_shared<OpenContents>();
    InodeTable::Seen seen;
    const Bound bound = Bind(req, ino, node, off == 0, fresh.get(), &seen);
    if (bound == Bound::kReplied) return;
    node_reads_.Bind(ino, fresh);
    c = std::move(fresh);
  }
  ReadReply reply;
  Status s =
      ReadContents(*c, backing_, prefetcher_, stats_, size, static_cast<uint64_t>(off), &reply);
  if (!s.ok()) {
    // The file is not the version bound any more: the next READ binds the one it has now.
    if (s.os_errno() == ESTALE) node_reads_.Release(ino, c.get());
    return (void)fuse_reply_err(req, ToErrno(s));  // counted in stats
  }
  // Bytes of exactly one version, all it holds in the range asked (ReadContents). The kernel
  // must not get them when it would make a read() return bytes no version held:
  // - a reply shorter than asked ends the file for the kernel only if the size it caches
  //   says so: below that size it pads the pages with zeros (a version smaller than the one
  //   the kernel knows: its attributes were invalidated by Bind, the next read() asks again);
  // - pages of another version than those the kernel may hold (fs/page_versions.h).
  // Either is answered ESTALE: the read() gets what it already copied, or the error. The
  // kernel asks only for pages up to the size it caches (its readahead stops at the page
  // holding the end), so a reply that ends before the last page asked for, or before the size
  // last reported (replies may reach the kernel in another order), is short of its size.
  const FileVersion version = c->blob ? c->blob->version() : VersionOf(c->st);
  const uint64_t got_to = static_cast<uint64_t>(off) + reply.bytes;
  const bool short_of_size =
      reply.bytes < size &&
      (static_cast<uint64_t>(off) + size > (got_to + kPageSize - 1) / kPageSize * kPageSize ||
       got_to < inodes_.SeenOf(ino).reported.size);
  using Verdict = PageVersions::Verdict;
  const uint32_t pid = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
  // The first page alone: a read() that asks for it copied no page of the file before.
  const bool first_page = off == 0 && size <= kPageSize;
  Verdict verdict = short_of_size ? Verdict::kRefuse
                                  : pages_.Serve(ino, version, pid, first_page, SteadyNs());
  if (verdict == Verdict::kDropOthers) {
    // The pages after this READ's are dropped before it gets its reply. Its own page (locked
    // until the reply) is left out of the drop, which cannot wait on it; other READs of the
    // node are answered without waiting on this one.
    DropPages(ino, kPageSize);
    verdict = pages_.Serve(ino, version, pid, true, SteadyNs());
    if (verdict != Verdict::kServe) verdict = Verdict::kRefuse;
  }
  if (verdict != Verdict::kServe) {
    stats_.errors.stale.fetch_add(1, std::memory_order_relaxed);
    if (short_of_size) InvalidateAttrs(ino);
    fuse_reply_err(req, ESTALE);
    // After the reply: this READ's pages are unlocked, so the drop cannot wait on them.
    if (verdict == Verdict::kRefuseDrop) DropPages(ino);
    return;
  }
  const uint64_t end = c->blob ? c->blob->size() : static_cast<uint64_t>(c->st.st_size);
  if (static_cast<uint64_t>(off) + size >= end) node_reads_.Release(ino, c.get());  // all read
  fuse_reply_iov(req, reply.iov.data(), static_cast<int>(reply.iov.size()));
}

void ClairFs::Release(fuse_req_t req, fuse_file_info* fi) {
  delete reinterpret_cast<FileHandle*>(fi->fh);
  fuse_reply_err(req, 0);
}

void ClairFs::OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto h = std::make_unique<DirHandle>();
  if (ino == kControlLink) return (void)fuse_reply_err(req, ENOTDIR);
  InodeTable::NodeInfo node;
  if (!NodeOf(req, ino, &node)) return;
  h->path = node.path;
  auto opened = backing_.OpenDir(h->path);
  if (!opened.ok()) return (void)fuse_reply_err(req, PathErrno(opened.status()));
  if (!CheckIdentity(req, ino, node, opened.value().st)) return;
  h->store = std::move(opened.value().handle);
  fi->fh = reinterpret_cast<uint64_t>(h.get());
  fi->cache_readdir = options_.entry_timeout > 0;
  if (fuse_reply_open(req, fi) == 0) h.release();
}

void ClairFs::ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  auto* h = reinterpret_cast<DirHandle*>(fi->fh);
  std::vector<char> buf(size);
  size_t used = 0;
  struct stat st {};
  // Entries come in batches read on an I/O thread; one whose entries are all hidden is
  // followed by the next, so that an empty reply only ever means the end.
  bool full = false;
  while (used == 0 && !full) {
    auto batch = backing_.ReadDir(h->store, h->path, off, size);
    if (!batch.ok()) return (void)fuse_reply_err(req, ToErrno(batch.status()));
    if (batch.value().empty()) break;
    for (const auto& d : batch.value()) {
      const bool dots = d.name == "." || d.name == "..";
      bool hide = ino == FUSE_ROOT_ID && d.name == kControlDirName;
      if (!dots && d.type == DT_LNK) {
        struct stat lst {};
        lst.st_mode = S_IFLNK;
        hide = hide || !Visible(Child(h->path, d.name.c_str()), lst);
      }
      if (!hide) {
        st.st_ino = d.ino;
        st.st_mode = static_cast<mode_t>(d.type) << 12;
        size_t n =
            fuse_add_direntry(req, buf.data() + used, size - used, d.name.c_str(), &st, d.next);
        if (n > size - used) {  // returned next time, from the last entry's next
          full = true;
          break;
        }
        used += n;
      }
      off = d.next;
    }
  }
  fuse_reply_buf(req, buf.data(), used);
}

void ClairFs::ReleaseDir(fuse_req_t req, fuse_file_info* fi) {
  delete reinterpret_cast<DirHandle*>(fi->fh);
  fuse_reply_err(req, 0);
}

void ClairFs::StatFs(fuse_req_t req) {
  struct statvfs st;
  Status s = backing_.StatFs(&st);
  if (!s.ok()) return (void)fuse_reply_err(req, ToErrno(s));
  fuse_reply_statfs(req, &st);
}

void ClairFs::Access(fuse_req_t req, fuse_ino_t /*ino*/, int mask) {
  fuse_reply_err(req, (mask & W_OK) ? EROFS : 0);
}

void ClairFs::GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (ino == kControlLink) return (void)fuse_reply_err(req, ENODATA);
  std::string path;
  if (!PathOf(req, ino, &path)) return;
  access_.GetXattr(req, path, name, size);
}

void ClairFs::ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  if (ino == kControlLink)
    return (void)(size ? fuse_reply_buf(req, nullptr, 0) : fuse_reply_xattr(req, 0));
  std::string path;
  if (!PathOf(req, ino, &path)) return;
  access_.ListXattr(req, path, size);
}

const fuse_lowlevel_ops& ClairFs::Ops() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    RefuseChanges(&o);
    o.init = [](void* u, fuse_conn_info* c) { static_cast<ClairFs*>(u)->Init(c); };
    o.lookup = [](fuse_req_t r, fuse_ino_t p, const char* n) {
      Guard(r, [&] { Self(r)->Lookup(r, p, n); });
    };
    o.forget = [](fuse_req_t r, fuse_ino_t i, uint64_t n) {
      Guard(nullptr, [&] { Self(r)->Forget(i, n); });
      fuse_reply_none(r);
    };
    o.forget_multi = [](fuse_req_t r, size_t count, fuse_forget_data* f) {
      Guard(nullptr, [&] {
        for (size_t i = 0; i < count; ++i) Self(r)->Forget(f[i].ino, f[i].nlookup);
      });
      fuse_reply_none(r);
    };
    o.getattr = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->GetAttr(r, i, f); });
    };
    o.setattr = [](fuse_req_t r, fuse_ino_t, struct stat*, int, fuse_file_info*) {
      fuse_reply_err(r, EROFS);
    };
    o.readlink = [](fuse_req_t r, fuse_ino_t i) { Guard(r, [&] { Self(r)->ReadLink(r, i); }); };
    o.getxattr = [](fuse_req_t r, fuse_ino_t i, const char* n, size_t s) {
      Guard(r, [&] { Self(r)->GetXattr(r, i, n, s); });
    };
    o.listxattr = [](fuse_req_t r, fuse_ino_t i, size_t s) {
      Guard(r, [&] { Self(r)->ListXattr(r, i, s); });
    };
    o.open = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->Open(r, i, f); });
    };
    o.read = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t o, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->Read(r, i, s, o, f); });
    };
    // Files are opened read-only and without flush (noflush in per_open mode): neither a
    // write nor (in per_open mode) a flush arrives in practice.
    o.write = [](fuse_req_t r, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) {
      fuse_reply_err(r, EBADF);
    };
    // No-open mode: ENOSYS stops FLUSH for the whole connection, so close() is free.
    o.flush = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) {
      fuse_reply_err(r, f->fh == 0 ? ENOSYS : 0);
    };
    o.release = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->Release(r, f); });
    };
    o.opendir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->OpenDir(r, i, f); });
    };
    o.readdir = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t o, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->ReadDir(r, i, s, o, f); });
    };
    o.releasedir = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->ReleaseDir(r, f); });
    };
    o.statfs = [](fuse_req_t r, fuse_ino_t) { Guard(r, [&] { Self(r)->StatFs(r); }); };
    o.access = [](fuse_req_t r, fuse_ino_t i, int m) {
      Guard(r, [&] { Self(r)->Access(r, i, m); });
    };
    return o;
  }();
  return ops;
}

}  // namespace clairfs
