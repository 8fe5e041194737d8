#include "fs/clairfs_fs.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include "cache/base/log.h"
#include "fs/core/file_read.h"
#include "fs/read_only_ops.h"
#include "fs/request_guard.h"
#include "fs/status_errno.h"

namespace clairfs {
namespace {

// The errnos the kernel protocol itself asks for, which are no failure of the core's rules:
// - to the FLUSH of a file opened without a handle (no-open mode): ENOSYS stops FLUSH for the
//   whole connection, so close() is free;
// - to an OPEN in no-open mode: ENOSYS tells the kernel "open it yourself, from now on, for
//   every file of this connection"; the reads that miss its page cache come to ReadNode;
// - to a WRITE: files are opened read-only and without flush, so none arrives in practice; a
//   handle that cannot be written to is EBADF.
constexpr int kNoFlush = ENOSYS;
constexpr int kNoOpen = ENOSYS;

ClairFs* Self(fuse_req_t req) { return static_cast<ClairFs*>(fuse_req_userdata(req)); }

// Runs a handler so that no exception escapes into libfuse (fs/request_guard.h).
constexpr RequestGuard Guard{"request"};

}  // namespace

// An open file is an OpenContents (fs/core/file_read.h): a dataset file's contents.
using FileHandle = OpenContents;

// An open directory: a stream on the store (read on its I/O threads, closed there when the
// handle goes).
struct ClairFs::DirHandle : DatasetCore::Dir {};

ClairFs::ClairFs(PosixBacking& backing, Prefetcher& prefetcher, Registrar& control,
                 AccessPolicy& access, Stats& stats, FsStats& fs_stats, FsOptions options,
                 std::vector<std::string> root_aliases, std::string control_target)
    : options_(options),
      access_(access),
      core_(backing, prefetcher, access.rules(), stats, fs_stats, options_, std::move(root_aliases),
            std::move(control_target), *this, [&control] { control.AwaitReleases(); }) {}

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

void ClairFs::InvalidateAttrs(uint64_t node) {
  fuse_session* se = session_.load(std::memory_order_acquire);
  if (!se) return;
  // -ENOENT: the kernel holds no inode for node any more; nothing to drop.
  const int rc = fuse_lowlevel_notify_inval_inode(se, node, -1, 0);
  if (rc != 0 && rc != -ENOENT) {
    LogDebug("attribute invalidation of node {}: {}", node, std::strerror(-rc));
  }
}

bool ClairFs::DropPages(uint64_t node, uint64_t from) {
  fuse_session* se = session_.load(std::memory_order_acquire);
  if (!se) return false;
  // -ENOENT: the kernel holds no inode for node any more, so no page either.
  const int rc = fuse_lowlevel_notify_inval_inode(se, node, static_cast<off_t>(from), 0);
  if (rc != 0 && rc != -ENOENT) {
    LogDebug("invalidation of the pages of node {}: {}", node, std::strerror(-rc));
    return false;
  }
  return true;
}

void ClairFs::Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto got = core_.Lookup(parent, name);
  if (!got.ok()) return ReplyError(req, got.status());
  fuse_entry_param e{};
  e.ino = got.value().node;
  e.attr = got.value().attr;
  e.attr_timeout = options_.attr_timeout;  // the control link's: fixed for the daemon's life
  e.entry_timeout = options_.entry_timeout;
  fuse_reply_entry(req, &e);
}

void ClairFs::GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  const auto* h = fi ? reinterpret_cast<const FileHandle*>(fi->fh) : nullptr;
  auto got = core_.GetAttr(ino, h);
  if (!got.ok()) return ReplyError(req, got.status());
  fuse_reply_attr(
      req, &got.value().st,
      got.value().last_known ? DatasetCore::kUnreachableAttrTimeout : options_.attr_timeout);
}

void ClairFs::ReadLink(fuse_req_t req, fuse_ino_t ino) {
  auto target = core_.ReadLink(ino);
  if (!target.ok()) return ReplyError(req, target.status());
  fuse_reply_readlink(req, target.value().c_str());
}

void ClairFs::Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  InodeTable::NodeInfo node;
  if (Status s = core_.MayOpen(ino, fi->flags, CallerOf(req), &node); !s.ok()) {
    return ReplyError(req, s);
  }
  if (options_.open_mode == OpenMode::kNone) return (void)fuse_reply_err(req, kNoOpen);
  auto opened = core_.Open(ino, node);
  if (!opened.ok()) return ReplyError(req, opened.status());
  fi->keep_cache = opened.value().keep_cache;
  fi->noflush = 1;  // nothing to flush on a read-only file: close() needs no round trip
  fi->fh = reinterpret_cast<uint64_t>(opened.value().contents.get());
  if (fuse_reply_open(req, fi) == 0) opened.value().contents.release();
}

void ClairFs::Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  if (fi->fh == 0) return ReadNode(req, ino, size, off);  // no-open mode: no handle
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  // The reply may complete the reader's read() before fuse_reply_iov returns here, and its
  // close() may release the handle meanwhile: `reply` keeps the bytes alive until then.
  ReadReply reply;
  Status s = core_.Read(ino, *h, size, static_cast<uint64_t>(off), &reply);
  if (!s.ok()) return ReplyError(req, s);  // counted in stats
  // Marked before the reply (the reader may open again as soon as it has it) and after (an
  // open may have come in between); h may be released once it is sent.
  const DatasetCore::Served served = DatasetCore::ServedBy(*h);
  core_.MarkServed(ino, served);
  fuse_reply_iov(req, reply.iov.data(), static_cast<int>(reply.iov.size()));
  core_.MarkServed(ino, served);
}

void ClairFs::ReadNode(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off) {
  ReadReply reply;
  bool drop = false;
  const uint32_t pid = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
  Status s = core_.ReadNode(ino, size, static_cast<uint64_t>(off), pid, &reply, &drop);
  if (!s.ok()) {
    ReplyError(req, s);
    // After the reply: this READ's pages are unlocked, so the drop cannot wait on them.
    if (drop) core_.DropPages(ino);
    return;
  }
  fuse_reply_iov(req, reply.iov.data(), static_cast<int>(reply.iov.size()));
}

void ClairFs::Release(fuse_req_t req, fuse_file_info* fi) {
  delete reinterpret_cast<FileHandle*>(fi->fh);
  fuse_reply_err(req, 0);  // success
}

void ClairFs::OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto opened = core_.OpenDir(ino);
  if (!opened.ok()) return ReplyError(req, opened.status());
  auto h = std::make_unique<DirHandle>();
  static_cast<DatasetCore::Dir&>(*h) = std::move(opened.value());
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
    auto batch = core_.ReadDir(ino, *h, off, size);
    if (!batch.ok()) return ReplyError(req, batch.status());
    if (batch.value().end) break;
    for (const auto& d : batch.value().entries) {
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
    off = batch.value().next;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void ClairFs::ReleaseDir(fuse_req_t req, fuse_file_info* fi) {
  delete reinterpret_cast<DirHandle*>(fi->fh);
  fuse_reply_err(req, 0);  // success
}

void ClairFs::StatFs(fuse_req_t req) {
  auto st = core_.StatFs();
  if (!st.ok()) return ReplyError(req, st.status());
  fuse_reply_statfs(req, &st.value());
}

void ClairFs::Access(fuse_req_t req, fuse_ino_t /*ino*/, int mask) {
  fuse_reply_err(req, ToErrno(DatasetCore::Access(mask)));  // 0: allowed
}

void ClairFs::GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  auto value = core_.Xattr(ino, name);
  if (!value.ok()) return ReplyError(req, value.status());
  ReplyXattr(req, value.value(), size);
}

void ClairFs::ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  auto names = core_.Xattr(ino, nullptr);
  if (!names.ok()) return ReplyError(req, names.status());
  ReplyXattr(req, names.value(), size);
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
      ReplyError(r, Status::Error(Code::kReadOnly, "a read-only mount"));
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
      fuse_reply_err(r, kNotWritable);
    };
    o.flush = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) {
      fuse_reply_err(r, f->fh == 0 ? kNoFlush : 0);
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

void ClairFs::NotifyInode(uint64_t id, bool contents) {
  // Pages go through the core, which records the drop (fs/core/page_versions.h), so that the
  // next READ of the new version is served at once instead of refused once.
  if (contents) return core_.DropPages(id);
  fuse_session* se = session_.load(std::memory_order_acquire);
  if (!se) return;
  // Attributes only (offset -1). The kernel forgets the node's cached ACLs with them.
  const int rc = fuse_lowlevel_notify_inval_inode(se, id, -1, 0);
  if (rc != 0 && rc != -ENOENT) {
    LogDebug("invalidation of node {}: {}", id, std::strerror(-rc));
  }
}

void ClairFs::NotifyEntry(uint64_t parent, const std::string& name) {
  fuse_session* se = session_.load(std::memory_order_acquire);
  if (!se) return;
  const int rc = fuse_lowlevel_notify_inval_entry(se, parent, name.c_str(), name.size());
  if (rc != 0 && rc != -ENOENT) {
    LogDebug("invalidation of '{}' in node {}: {}", name, parent, std::strerror(-rc));
  }
}

}  // namespace clairfs
