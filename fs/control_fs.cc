#include "fs/control_fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fs/read_only_ops.h"
#include "fs/request_guard.h"
#include "fs/status_errno.h"

namespace clairfs {
namespace {

using Node = ControlFs::Node;

// The names of the files, in the order of their nodes from Node::kManifest.
constexpr const char* kNames[] = {"manifest", "stats", "plan", "errors", "metrics", "batch"};
constexpr fuse_ino_t kFirstFile = static_cast<fuse_ino_t>(Node::kManifest);

// The generated file a node other than the root and the manifest is.
ControlFile GeneratedFile(Node node) {
  switch (node) {
    case Node::kStats:
      return ControlFile::kStats;
    case Node::kPlan:
      return ControlFile::kPlan;
    case Node::kMetrics:
      return ControlFile::kMetrics;
    default:
      return ControlFile::kErrors;
  }
}

ControlFs* Control(fuse_req_t req) { return static_cast<ControlFs*>(fuse_req_userdata(req)); }

// The control files' own refusals, as Status.
Status Stale() { return Status::Error(Code::kStale, "unknown control node"); }
Status NotADirectory() { return Status::FromErrno(ENOTDIR, "a control file"); }
Status ReadOnly() { return Status::Error(Code::kReadOnly, "a generated control file"); }

// Runs a handler so that no exception escapes into libfuse (fs/request_guard.h).
constexpr RequestGuard ControlGuard{"control request"};

}  // namespace

// An open file: a snapshot of a generated file (stats, plan, metrics, errors; empty for the
// manifest opened to read), or a manifest writer.
struct ControlFs::Handle {
  // Shared with each READ's reply: the reader's read() can return, and its close() release
  // the handle, before fuse_reply_buf returns (and ASan's writev interceptor reads the buffer
  // after the call).
  std::shared_ptr<const std::string> text = std::make_shared<const std::string>();
  std::unique_ptr<Registrar::Writer> writer;
};

ControlFs::ControlFs(Registrar& registrar, const ControlViews& views, AccessPolicy& access,
                     const FsOptions& options)
    : registrar_(registrar),
      views_(views),
      access_(access),
      entry_timeout_(options.entry_timeout),
      uid_(getuid()),
      gid_(getgid()) {
  clock_gettime(CLOCK_REALTIME, &started_);
}

ControlFs::~ControlFs() = default;

bool ControlFs::NodeOf(fuse_ino_t ino, Node* node) {
  if (ino < FUSE_ROOT_ID || ino > static_cast<fuse_ino_t>(Node::kBatch)) return false;
  *node = static_cast<Node>(ino);
  return true;
}

void ControlFs::SetBatchPath(std::string path) {
  std::lock_guard lock(batch_mu_);
  batch_path_ = std::move(path);
}

std::string ControlFs::BatchPath() const {
  std::lock_guard lock(batch_mu_);
  return batch_path_;
}

void ControlFs::Init(fuse_conn_info* conn) {
  // O_TRUNC reaches open() (replace vs. append of the manifest) instead of a separate setattr.
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  // A write must reach the writer's buffer at once, and close() report on it (flush).
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  // Writes of up to 1 MiB arrive whole (the kernel's default splits them at 128 KiB): each
  // write() checks the paths it completed as one batch, and fewer, larger batches open each
  // directory fewer times (libfuse caps it at its buffer size and asks for the pages).
  conn->max_write = std::max<unsigned>(conn->max_write, 1u << 20);
  // No POSIX ACLs here: the nodes have none, the mode bits (and AllowControlWrite) decide.
}

void ControlFs::Attr(Node node, struct stat* st) const {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = static_cast<ino_t>(node);
  st->st_uid = uid_;
  st->st_gid = gid_;
  st->st_atim = st->st_mtim = st->st_ctim = started_;
  st->st_nlink = 1;
  if (node == Node::kRoot) {
    st->st_mode = S_IFDIR | 0755;
    st->st_nlink = 2;
  } else if (node == Node::kManifest) {
    access_.ManifestAttr(st);  // 0644, or 0664 with control.group's id
  } else {
    st->st_mode = S_IFREG | 0444;
  }
}

void ControlFs::Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Node dir;
  if (!NodeOf(parent, &dir)) return ReplyError(req, Stale());
  if (dir != Node::kRoot) return ReplyError(req, NotADirectory());
  for (fuse_ino_t i = 0; i < std::size(kNames); ++i) {
    if (std::strcmp(name, kNames[i]) != 0) continue;
    if (kFirstFile + i == static_cast<fuse_ino_t>(Node::kBatch) && BatchPath().empty()) break;
    fuse_entry_param e{};
    e.ino = kFirstFile + i;
    Attr(static_cast<Node>(e.ino), &e.attr);
    e.attr_timeout = 0;  // stats and plan change: never cache their attributes
    e.entry_timeout = entry_timeout_;
    return (void)fuse_reply_entry(req, &e);
  }
  ReplyError(req, Status::Error(Code::kNotFound, name));
}

void ControlFs::GetAttr(fuse_req_t req, fuse_ino_t ino) {
  Node node;
  if (!NodeOf(ino, &node)) return ReplyError(req, Stale());
  if (node == Node::kBatch && BatchPath().empty()) {
    return ReplyError(req, Status::Error(Code::kNotFound, "batch"));
  }
  struct stat st;
  Attr(node, &st);
  fuse_reply_attr(req, &st, 0);
}

void ControlFs::SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                        fuse_file_info* fi) {
  constexpr int kTimes = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                         FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
  Node node;
  if (!NodeOf(ino, &node) || node != Node::kManifest ||
      (to_set & ~(FUSE_SET_ATTR_SIZE | kTimes)) != 0) {
    return ReplyError(req, ReadOnly());
  }
  // ftruncate(fd, 0) on a writer starts its text over; truncate(path) has no writer and
  // changes nothing (an open with O_TRUNC arrives in open(): FUSE_CAP_ATOMIC_O_TRUNC).
  if (to_set & FUSE_SET_ATTR_SIZE) {
    auto* h = fi ? reinterpret_cast<Handle*>(fi->fh) : nullptr;
    if (h && h->writer) {
      Status s = registrar_.Truncate(*h->writer, static_cast<uint64_t>(attr->st_size));
      if (!s.ok()) return ReplyError(req, s);
    } else if (attr->st_size != 0) {
      return ReplyError(req, Status::Error(Code::kInvalidArgument, "truncate to non-zero"));
    }
  }
  struct stat st;
  Attr(node, &st);
  fuse_reply_attr(req, &st, 0);
}

void ControlFs::Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Node node;
  if (!NodeOf(ino, &node)) return ReplyError(req, Stale());
  if (node == Node::kRoot)
    return ReplyError(req, Status::FromErrno(EISDIR, "the control directory"));
  const int mode = fi->flags & O_ACCMODE;
  if (node == Node::kManifest && mode != O_RDONLY && !access_.AllowControlWrite(req)) return;
  auto h = std::make_unique<Handle>();
  if (node == Node::kManifest && mode != O_RDONLY) {
    // The writer's paths are checked with its rights, as the opener's credentials are now
    // (docs/permissions.md): a descriptor handed to another process keeps them, as a file
    // description keeps the credentials it was opened with.
    std::shared_ptr<const Backing> view;
    if (!access_.WriterView(req, &view)) return;
    h->writer = registrar_.OpenWriter((fi->flags & O_APPEND) != 0, (fi->flags & O_TRUNC) != 0,
                                      std::move(view));
  } else if (mode != O_RDONLY) {
    return ReplyError(req, Status::Error(Code::kPermissionDenied, "a generated control file"));
  } else if (node == Node::kBatch) {
    std::string path = BatchPath();
    if (path.empty()) return ReplyError(req, Status::Error(Code::kNotFound, "batch"));
    h->text = std::make_shared<const std::string>(path + "\n");
  } else if (node != Node::kManifest) {
    registrar_.AwaitReleases();  // a plan whose writer's close() just returned is installed
    // What this caller may see, decided now for the life of the handle (docs/permissions.md).
    const ControlView view = ViewFor(fuse_req_ctx(req)->uid, access_.IsController(req));
    h->text = std::make_shared<const std::string>(views_.ViewText(GeneratedFile(node), view));
  }
  fi->direct_io = 1;         // contents are generated per open; the page cache must not keep them
  fi->noflush = !h->writer;  // only a manifest writer's close() has something to report
  fi->fh = reinterpret_cast<uint64_t>(h.get());
  Handle* raw = h.get();
  {
    std::lock_guard lock(handles_mu_);
    handles_.emplace(raw, std::move(h));
  }
  if (fuse_reply_open(req, fi) != 0) {  // the open was interrupted: no release will come
    std::lock_guard lock(handles_mu_);
    handles_.erase(raw);
  }
}

void ControlFs::Read(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi) {
  const auto* h = reinterpret_cast<const Handle*>(fi->fh);
  // Held until the reply is sent (see Handle). A writer's is empty: reads of the manifest
  // return nothing.
  const std::shared_ptr<const std::string> text = h->text;
  if (off < 0) return ReplyError(req, Status::Error(Code::kInvalidArgument, "offset"));
  const size_t from = std::min(static_cast<size_t>(off), text->size());
  fuse_reply_buf(req, text->data() + from, std::min(size, text->size() - from));
}

void ControlFs::Write(fuse_req_t req, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  auto* h = reinterpret_cast<Handle*>(fi->fh);
  if (!h->writer) return (void)fuse_reply_err(req, kNotWritable);
  Status s = registrar_.Write(*h->writer, std::string_view(buf, size), static_cast<uint64_t>(off),
                              (fi->flags & O_APPEND) != 0);
  if (!s.ok()) return ReplyError(req, s);
  fuse_reply_write(req, size);
}

void ControlFs::Flush(fuse_req_t req, fuse_file_info* fi) {
  auto* h = reinterpret_cast<Handle*>(fi->fh);
  if (!h->writer) return (void)fuse_reply_err(req, 0);  // success
  fuse_reply_err(req, ToErrno(registrar_.Flush(*h->writer)));
}

void ControlFs::Release(fuse_req_t req, fuse_file_info* fi) {
  auto* h = reinterpret_cast<Handle*>(fi->fh);
  if (h->writer) registrar_.Release(*h->writer);  // the last close() was answered by flush
  std::unique_ptr<Handle> owned;                  // freed after the lock
  {
    std::lock_guard lock(handles_mu_);
    auto it = handles_.find(h);
    if (it != handles_.end()) {
      owned = std::move(it->second);
      handles_.erase(it);
    }
  }
  fuse_reply_err(req, 0);
}

void ControlFs::OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Node node;
  if (!NodeOf(ino, &node)) return ReplyError(req, Stale());
  if (node != Node::kRoot) return ReplyError(req, NotADirectory());
  fi->fh = 0;  // the listing is fixed: no handle
  fuse_reply_open(req, fi);
}

void ControlFs::ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off) {
  if (ino != FUSE_ROOT_ID) return ReplyError(req, NotADirectory());
  static const char* const kAll[] = {".",    "..",     "manifest", "stats",
                                     "plan", "errors", "metrics",  "batch"};
  static_assert(std::size(kAll) == std::size(kNames) + 2);
  const bool batch = !BatchPath().empty();
  std::vector<char> buf(size);
  size_t used = 0;
  struct stat st {};
  for (off_t i = std::max<off_t>(off, 0); i < static_cast<off_t>(std::size(kAll)); ++i) {
    st.st_ino = i < 2 ? FUSE_ROOT_ID : kFirstFile + static_cast<fuse_ino_t>(i - 2);
    st.st_mode = i < 2 ? S_IFDIR : S_IFREG;
    if (st.st_ino == static_cast<fuse_ino_t>(Node::kBatch) && !batch) break;  // the last
    const size_t n = fuse_add_direntry(req, buf.data() + used, size - used, kAll[i], &st, i + 1);
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void ControlFs::Access(fuse_req_t req, fuse_ino_t ino, int mask) {
  const bool manifest = ino == static_cast<fuse_ino_t>(Node::kManifest);
  fuse_reply_err(req, ToErrno((mask & W_OK) && !manifest ? ReadOnly() : Status::Ok()));  // 0: ok
}

const fuse_lowlevel_ops& ControlFs::Ops() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    RefuseChanges(&o);
    o.init = [](void* u, fuse_conn_info* c) { static_cast<ControlFs*>(u)->Init(c); };
    o.lookup = [](fuse_req_t r, fuse_ino_t p, const char* n) {
      ControlGuard(r, [&] { Control(r)->Lookup(r, p, n); });
    };
    // The nodes are fixed: nothing to forget.
    o.forget = [](fuse_req_t r, fuse_ino_t, uint64_t) { fuse_reply_none(r); };
    o.forget_multi = [](fuse_req_t r, size_t, fuse_forget_data*) { fuse_reply_none(r); };
    o.getattr = [](fuse_req_t r, fuse_ino_t i, fuse_file_info*) {
      ControlGuard(r, [&] { Control(r)->GetAttr(r, i); });
    };
    o.setattr = [](fuse_req_t r, fuse_ino_t i, struct stat* a, int s, fuse_file_info* f) {
      ControlGuard(r, [&] { Control(r)->SetAttr(r, i, a, s, f); });
    };
    o.getxattr = [](fuse_req_t r, fuse_ino_t, const char* n, size_t) {
      ReplyError(r, Status::FromErrno(ENODATA, n));  // no attribute
    };
    o.listxattr = [](fuse_req_t r, fuse_ino_t, size_t s) {
      if (s) {
        fuse_reply_buf(r, nullptr, 0);
      } else {
        fuse_reply_xattr(r, 0);
      }
    };
    o.open = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      ControlGuard(r, [&] { Control(r)->Open(r, i, f); });
    };
    o.read = [](fuse_req_t r, fuse_ino_t, size_t s, off_t o, fuse_file_info* f) {
      ControlGuard(r, [&] { Control(r)->Read(r, s, o, f); });
    };
    o.write = [](fuse_req_t r, fuse_ino_t, const char* b, size_t s, off_t o, fuse_file_info* f) {
      ControlGuard(r, [&] { Control(r)->Write(r, b, s, o, f); });
    };
    o.flush = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) {
      ControlGuard(r, [&] { Control(r)->Flush(r, f); });
    };
    o.release = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) {
      ControlGuard(r, [&] { Control(r)->Release(r, f); });
    };
    o.opendir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      ControlGuard(r, [&] { Control(r)->OpenDir(r, i, f); });
    };
    o.readdir = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t o, fuse_file_info*) {
      ControlGuard(r, [&] { Control(r)->ReadDir(r, i, s, o); });
    };
    o.releasedir = [](fuse_req_t r, fuse_ino_t, fuse_file_info*) { fuse_reply_err(r, 0); };
    o.access = [](fuse_req_t r, fuse_ino_t i, int m) {
      ControlGuard(r, [&] { Control(r)->Access(r, i, m); });
    };
    return o;
  }();
  return ops;
}

}  // namespace clairfs
