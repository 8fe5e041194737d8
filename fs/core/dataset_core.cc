// DatasetCore's namespace: nodes, lookup, attributes, links, directories (the open and bind
// rules are in fs/core/dataset_bind.cc).
#include "fs/core/dataset_core.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cache/backing/resolver.h"

namespace clairfs {
namespace {

std::string Child(const std::string& dir, std::string_view name) {
  std::string path = dir;
  if (!path.empty()) path += '/';
  path += name;
  return path;
}

}  // namespace

DatasetCore::DatasetCore(PosixBacking& backing, Prefetcher& prefetcher, AccessRules& access,
                         Stats& stats, FsStats& fs_stats, const FsOptions& options,
                         std::vector<std::string> root_aliases, std::string control_target,
                         KernelCache& kernel, std::function<void()> await_releases)
    : backing_(backing),
      prefetcher_(prefetcher),
      access_(access),
      stats_(stats),
      fs_stats_(fs_stats),
      options_(options),
      aliases_(std::move(root_aliases)),
      control_target_(std::move(control_target)),
      kernel_(kernel),
      await_releases_(std::move(await_releases)),
      uid_(getuid()),
      gid_(getgid()),
      root_st_(backing.root_at_open().st) {
  clock_gettime(CLOCK_REALTIME, &started_);
}

void DatasetCore::SetWatchers(StatAhead* ahead,
                              std::function<void(uint64_t, const std::string&)> dir_seen) {
  ahead_ = ahead;
  dir_seen_ = std::move(dir_seen);
}

void DatasetCore::ControlLinkAttr(struct stat* st) const {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = 0x7fffff00u + kControlLink;
  st->st_mode = S_IFLNK | 0777;
  st->st_nlink = 1;
  st->st_uid = uid_;
  st->st_gid = gid_;
  st->st_size = static_cast<off_t>(control_target_.size());
  st->st_atim = st->st_mtim = st->st_ctim = started_;
}

Result<InodeTable::NodeInfo> DatasetCore::NodeOf(uint64_t node) const {
  InodeTable::NodeInfo info;
  if (inodes_.Get(node, &info)) return info;
  return Status::Error(Code::kStale, "unknown node " + std::to_string(node));
}

Status DatasetCore::CheckIdentity(uint64_t node, const InodeTable::NodeInfo& info,
                                  const struct stat& st) {
  if (node == InodeTable::kRootId || info.Names(st)) return Status::Ok();
  fs_stats_.errors.stale_node.fetch_add(1, std::memory_order_relaxed);
  return Status::Error(Code::kStale, info.path + ": another object than the node's");
}

Status DatasetCore::PathError(Status s) {
  // The path no longer leads to an object (ENOENT), or leads through one that is not a
  // directory any more (ENOTDIR, ELOOP: a symlink swapped in): the node's object is gone.
  const bool gone =
      s.code() == Code::kNotFound || s.code() == Code::kSymlink || s.code() == Code::kOutsideRoot;
  if (!gone) return s;
  fs_stats_.errors.stale_node.fetch_add(1, std::memory_order_relaxed);
  return Status::Error(Code::kStale, s.message());
}

Status DatasetCore::ReaderLstat(const std::string& path, struct stat* st) {
  fs_stats_.metadata.reader_stats.fetch_add(1, std::memory_order_relaxed);
  return backing_.Lstat(path, st);
}

bool DatasetCore::Ahead(const std::string& path, struct stat* st) {
  return ahead_ && ahead_->Recent(path, st, /*count=*/false);
}

Status DatasetCore::Verify(uint64_t node, const InodeTable::NodeInfo& info, struct stat* st) {
  Status s = ReaderLstat(info.path, st);
  if (!s.ok()) return PathError(std::move(s));
  return CheckIdentity(node, info, *st);
}

bool DatasetCore::Visible(const std::string& path, const struct stat& st) {
  if (!S_ISLNK(st.st_mode)) return true;
  PathResolver resolver(backing_, aliases_);
  return SymlinkStaysInside(resolver, path);
}

Result<DatasetCore::Entry> DatasetCore::Lookup(uint64_t parent, std::string_view name) {
  Entry e;
  if (parent == InodeTable::kRootId && name == kControlName) {
    e.node = kControlLink;
    ControlLinkAttr(&e.attr);
    return e;
  }
  if (parent == kControlLink) return Status::FromErrno(ENOTDIR, kControlName);
  fs_stats_.metadata.lookups.fetch_add(1, std::memory_order_relaxed);
  auto dir = NodeOf(parent);
  if (!dir.ok()) return dir.status();
  if (dir->type != S_IFDIR) return Status::FromErrno(ENOTDIR, dir->path);
  // The name is looked up in the directory the parent node stands for, not in whatever
  // directory its path names now (the root is the backing root descriptor: never stale).
  // A stat made ahead that the watch vouches for (StatAhead::Recent: its rules, max_age
  // included) stands for the stat made now, of the parent and of the name; a record showing
  // another object than the parent's is checked with a stat of its own.
  bool ahead = true;
  if (parent != InodeTable::kRootId) {
    if (!Ahead(dir->path, &e.attr) || !dir->Names(e.attr)) {
      ahead = false;
      if (Status s = Verify(parent, *dir, &e.attr); !s.ok()) return s;
    }
  }
  const std::string path = Child(dir->path, name);
  if (!Ahead(path, &e.attr)) {
    ahead = false;
    if (Status s = ReaderLstat(path, &e.attr); !s.ok()) return s;
  }
  // (A record is of a regular file or a directory: Visible holds.)
  if (!Visible(path, e.attr)) return Status::Error(Code::kNotFound, path + ": leads outside");
  // Another name of an object that has a node shares it only while the node's own path still
  // names the object (a hard link); otherwise the inode number was reused.
  uint64_t linked = 0;
  InodeTable::NodeInfo known;
  if (inodes_.Keyed(e.attr.st_dev, e.attr.st_ino, &linked, &known) && known.path != path) {
    struct stat kst;
    if (!ReaderLstat(known.path, &kst).ok() || !known.Names(kst)) linked = 0;
    ahead = false;  // a call of its own after all
  }
  if (ahead) fs_stats_.metadata.lookups_ahead.fetch_add(1, std::memory_order_relaxed);
  e.node = inodes_.Acquire(path, e.attr.st_dev, e.attr.st_ino, e.attr.st_mode, linked);
  inodes_.Report(e.node, e.attr);  // any type: what fs/fresh/revalidate.h compares with
  if (S_ISDIR(e.attr.st_mode) && dir_seen_) dir_seen_(e.node, path);
  return e;
}

void DatasetCore::Forget(uint64_t node, uint64_t n) {
  node_reads_.Drop(node);
  inodes_.Forget(node, n);
  if (std::string path; !inodes_.Path(node, &path)) pages_.Forget(node);  // pages gone too
}

Result<DatasetCore::Attr> DatasetCore::GetAttr(uint64_t node, const OpenContents* h) {
  if (ahead_ && ahead_->Armed()) {
    // A signpost (cache/backing/stat_ahead.h): a reader is there, whatever the page cache
    // answered before; may wait (bounded) for the stretch past it to be statted.
    std::string path;
    if (inodes_.Path(node, &path)) ahead_->Reached(path);
  }
  Attr a;
  struct stat& st = a.st;
  if (node == kControlLink) {
    ControlLinkAttr(&st);
    return a;
  }
  if (h && h->dataset && h->st.st_mode != 0) {
    // Asked through an open file (a read checking the size): the attributes of the file that
    // handle reads, also when its path names another file by now. (An open served unverified
    // has none: the path's are asked for.) While the store does not answer: the attributes at
    // open, those of the bytes the handle serves.
    st = h->st;
    if (h->store) {
      fs_stats_.metadata.reader_stats.fetch_add(1, std::memory_order_relaxed);
      Status got = backing_.Fstat(h->store, h->path, &st);
      if (!got.ok() && StoreUnreachable(got)) {
        st = h->st;
      } else if (!got.ok()) {
        return got;
      }
    }
  } else if (node == InodeTable::kRootId) {
    // The root's attributes stay available while the store does not answer, so that the
    // control files (stats, errors) can still be reached through `.clairfs`: the last ones it
    // gave.
    Status got = ReaderLstat("", &st);
    std::lock_guard lock(root_mu_);
    if (got.ok()) {
      root_st_ = st;
    } else if (StoreUnreachable(got) && root_st_.st_mode != 0) {
      a.st = root_st_;
      a.last_known = true;
      return a;
    } else {
      return got;
    }
  } else {
    auto info = NodeOf(node);
    if (!info.ok()) return info.status();
    if (Status s = Verify(node, *info, &st); !s.ok()) return s;
  }
  inodes_.Report(node, st);
  return a;
}

Result<std::string> DatasetCore::ReadLink(uint64_t node) {
  if (node == kControlLink) return control_target_;
  auto info = NodeOf(node);
  if (!info.ok()) return info.status();
  struct stat st;
  if (Status s = Verify(node, *info, &st); !s.ok()) return s;
  auto target = backing_.ReadLink(info->path);
  if (!target.ok()) return PathError(target.status());
  // A symlink's target never changes: the same object before and after is the one read.
  if (Status s = Verify(node, *info, &st); !s.ok()) return s;
  return target;
}

Result<DatasetCore::Dir> DatasetCore::OpenDir(uint64_t node) {
  if (node == kControlLink) return Status::FromErrno(ENOTDIR, kControlName);
  auto info = NodeOf(node);
  if (!info.ok()) return info.status();
  auto opened = backing_.OpenDir(info->path);
  if (!opened.ok()) return PathError(opened.status());
  if (Status s = CheckIdentity(node, *info, opened.value().st); !s.ok()) return s;
  return Dir{std::move(opened.value().handle), info->path};
}

Result<DatasetCore::DirBatch> DatasetCore::ReadDir(uint64_t node, const Dir& dir, off_t off,
                                                   size_t size) {
  auto batch = backing_.ReadDir(dir.store, dir.path, off, size);
  if (!batch.ok()) return batch.status();
  DirBatch out;
  out.next = off;
  out.end = batch.value().empty();
  for (auto& d : batch.value()) {
    out.next = d.next;
    const bool dots = d.name == "." || d.name == "..";
    bool hide = node == InodeTable::kRootId && d.name == kControlName;
    if (!dots && d.type == DT_LNK) {
      struct stat lst {};
      lst.st_mode = S_IFLNK;
      hide = hide || !Visible(Child(dir.path, d.name), lst);
    }
    if (!hide) out.entries.push_back(std::move(d));
  }
  return out;
}

Result<struct statvfs> DatasetCore::StatFs() {
  struct statvfs st;
  if (Status s = backing_.StatFs(&st); !s.ok()) return s;
  return st;
}

Status DatasetCore::Access(int mask) {
  if (mask & W_OK) return Status::Error(Code::kReadOnly, "a read-only mount");
  return Status::Ok();
}

Result<std::string> DatasetCore::Xattr(uint64_t node, const char* name) {
  if (node == kControlLink) {
    if (name != nullptr) return Status::FromErrno(ENODATA, kControlName);
    return std::string();  // no attribute names
  }
  std::string path;
  if (!inodes_.Path(node, &path)) {
    return Status::Error(Code::kStale, "unknown node " + std::to_string(node));
  }
  return access_.Xattr(path, name);
}

}  // namespace clairfs
