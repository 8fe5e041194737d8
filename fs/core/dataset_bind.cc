// DatasetCore's open and bind rules: which version of a file an open or a handle-less READ
// gets, and what the kernel's caches are told about it (the namespace is in
// fs/core/dataset_core.cc).
#include <fcntl.h>

#include <cerrno>
#include <chrono>

#include "cache/base/log.h"
#include "fs/core/dataset_core.h"

namespace clairfs {
namespace {

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Status NotRegular(const std::string& path) {
  return Status::Error(Code::kInvalidArgument, path + ": not a regular file");
}

}  // namespace

Status DatasetCore::MayOpen(uint64_t node, int flags, const Caller& caller,
                            InodeTable::NodeInfo* info) {
  // The kernel follows the link itself; an open of it is the protocol's ELOOP.
  if (node == kControlLink) return Status::FromErrno(ELOOP, kControlName);
  if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) {
    return Status::Error(Code::kReadOnly, "a read-only mount");
  }
  if (await_releases_) await_releases_();  // a plan whose writer's close() just returned counts
  auto got = NodeOf(node);
  if (!got.ok()) return got.status();
  *info = std::move(got.value());
  return access_.AllowOpen(caller, info->path, flags);  // a revoked access fails at once
}

Result<DatasetCore::Opened> DatasetCore::Open(uint64_t node, const InodeTable::NodeInfo& info) {
  Opened o;
  o.contents = std::make_unique<OpenContents>();
  OpenContents* h = o.contents.get();
  auto bound = Bind(node, info, true, h);
  if (!bound.ok()) return bound.status();
  // The page cache may keep this file's pages only while its version is the one they hold.
  const bool fresh = bound.value().how == Bound::kFresh;
  const FileVersion version = fresh ? VersionOf(h->st) : h->blob->version();
  const InodeTable::Seen& seen = bound.value().seen;
  o.keep_cache = options_.keep_cache && !seen.older_pages &&
                 (seen.opened == version || (fresh && seen.opened == FileVersion{}));
  h->version = version;
  return o;
}

Result<DatasetCore::Binding> DatasetCore::OpenStore(uint64_t node, const InodeTable::NodeInfo& info,
                                                    OpenContents* h,
                                                    const PosixBacking::FirstRead* first) {
  auto fd = backing_.OpenFile(info.path, first);
  if (!fd.ok() &&
      (fd.status().code() == Code::kInvalidArgument || fd.status().code() == Code::kSymlink)) {
    struct stat now;  // not a regular file any more: kStale if another object (see Bind)
    if (Status s = Verify(node, info, &now); !s.ok()) return s;
    return NotRegular(info.path);
  }
  if (!fd.ok() && StoreUnreachable(fd.status())) {
    return BindUnverified(node, info, h, fd.status());
  }
  if (!fd.ok()) return PathError(fd.status());
  h->store = std::move(fd.value().handle);
  h->st = fd.value().st;
  if (Status s = CheckIdentity(node, info, h->st); !s.ok()) return s;
  if (!S_ISREG(h->st.st_mode)) return NotRegular(info.path);
  Binding b;
  if (first) b.first = std::move(fd.value().first);
  return b;
}

Result<DatasetCore::Binding> DatasetCore::Bind(uint64_t node, const InodeTable::NodeInfo& info,
                                               bool consume, OpenContents* h,
                                               const PosixBacking::FirstRead* first) {
  // The version is taken by a stat of the path (beneath the root, no symlink followed): when
  // a tier holds a blob of exactly that version, it is served and no descriptor is opened. Else
  // the file is opened (O_NONBLOCK, so that a FIFO swapped in for it never blocks) and every
  // later byte comes from that descriptor, of the version its fstat reports.
  // A stat made ahead of this read (cache/backing/stat_ahead.h) stands for one made now when the
  // backing watch vouches that nothing changed the file since.
  // A file the plan does not name is never served from a tier (Prefetcher::Plans): without a
  // stat made ahead it is opened at once, its version the fstat's, and a READ's bytes come in
  // the same call on the I/O thread (one wait on the store instead of three: stat, open, read).
  h->dataset = true;
  struct stat st;
  Status looked = Status::Ok();
  // Set when the descriptor is open: by the open of an unplanned file below, or once the
  // prefetcher holds no blob of the version. The binding's first bytes come from that open.
  Binding b;
  bool opened = false;
  if (!ahead_ || !ahead_->Recent(info.path, &st) || !info.Names(st)) {
    if (first && !prefetcher_.Plans(info.path)) {
      auto o = OpenStore(node, info, h, first);
      if (!o.ok() || o.value().how == Bound::kUnverified) return o;
      b.first.swap(o.value().first);
      opened = true;
      st = h->st;
    } else {
      looked = ReaderLstat(info.path, &st);
    }
  }
  if (!looked.ok() && StoreUnreachable(looked)) {
    return BindUnverified(node, info, h, looked);
  }
  if (!looked.ok()) return PathError(std::move(looked));
  unverified_logged_.store(false, std::memory_order_relaxed);
  // Another object at this path (a FIFO or directory swapped in) is kStale, so the kernel
  // looks the name up again and learns what it is now.
  if (Status s = CheckIdentity(node, info, st); !s.ok()) return s;
  if (!S_ISREG(st.st_mode)) return NotRegular(info.path);
  h->st = st;
  h->path = info.path;
  FileVersion version = VersionOf(st);
  auto served = prefetcher_.Open(info.path, version, consume);
  if (!served.ok()) {
    if (uint64_t more = 0; open_log_.Allow(&more)) {
      LogWarn("open {}: {}{}", info.path, served.status().ToString(),
              more ? fmt::format(" ({} more failed opens since the last line)", more) : "");
    }
    return served.status();
  }
  const bool cached = served.value().blob && served.value().blob->version() == version &&
                      served.value().source != OpenResult::Source::kChunked;
  if (!cached && !opened) {
    auto o = OpenStore(node, info, h, first);
    if (!o.ok() || o.value().how == Bound::kUnverified) return o;
    b.first.swap(o.value().first);
    opened = true;
    if (VersionOf(h->st) != version) {  // changed since the stat: the descriptor's version
      version = VersionOf(h->st);
      served.value().blob.reset();
    }
  }
  h->chunked = served.value().source == OpenResult::Source::kChunked;
  if (h->chunked) h->chunk_size = served.value().chunk;  // keeps store for unplanned chunks
  h->blob = std::move(served.value().blob);
  if (h->blob && h->blob->version() != version) {
    stats_.errors.stale.fetch_add(1, std::memory_order_relaxed);
    h->blob.reset();
  }
  // The bytes read with the open serve only a file read from its descriptor.
  if (h->blob || h->chunked) b.first.reset();
  if (h->blob) {
    h->store.reset();  // a cached file holds no descriptor (closed on an I/O thread)
  } else if (!h->chunked) {
    stats_.served_backing.fetch_add(1, std::memory_order_relaxed);
    stats_.backing_reads.fetch_add(1, std::memory_order_relaxed);
  }
  // The kernel's attributes (size above all: reads stop at the size it caches) must follow
  // the version. The adapter sends the invalidation from the request's thread (it never blocks
  // and cannot deadlock there: see ClairFs::InvalidateAttrs).
  b.how = Bound::kFresh;
  b.seen = inodes_.SwapOpen(node, version, &h->opened_changes);
  if (b.seen.reported != version) kernel_.InvalidateAttrs(node);
  return b;
}

Result<DatasetCore::Binding> DatasetCore::BindUnverified(uint64_t node,
                                                         const InodeTable::NodeInfo& info,
                                                         OpenContents* h, const Status& cause) {
  Binding b;
  b.how = Bound::kUnverified;
  b.seen = inodes_.SeenOf(node);
  h->opened_changes = UINT64_MAX;             // no open recorded: every READ compares (MarkServed)
  const FileVersion& last = b.seen.reported;  // what the kernel's cached attributes say
  auto blob = last == FileVersion{} ? Result<BlobPtr>(Status::Error(Code::kNotFound, info.path))
                                    : prefetcher_.GetLocal(info.path, last);
  if (!blob.ok() || !blob.value() || blob.value()->version() != last) return cause;
  if (!unverified_logged_.exchange(true, std::memory_order_relaxed)) {
    LogWarn(
        "the backing store does not answer ({}): serving cached files at the version "
        "last seen, unverified, until it does",
        cause.message());
  }
  h->path = info.path;
  h->blob = std::move(blob.value());
  fs_stats_.served_unverified.fetch_add(1, std::memory_order_relaxed);
  return b;
}

Status DatasetCore::ReadNode(uint64_t node, size_t size, uint64_t off, uint32_t pid, ReadReply* out,
                             bool* drop_after_reply) {
  *drop_after_reply = false;
  std::optional<PosixBacking::Bytes> first;  // [off, off+size), read with the open if any
  std::shared_ptr<OpenContents> c = node_reads_.Find(node);
  if (off == 0 || !c) {
    // A read of the file starts (at offset 0), or a READ finds its node not bound (the
    // kernel's readahead can send a later READ before the first one bound it): bound afresh,
    // so the version is checked at every read that reaches the daemon. Only a start is
    // consumed in the plan (and counted in file_reads), as an open is.
    if (await_releases_) await_releases_();
    auto info = NodeOf(node);
    if (!info.ok()) return info.status();
    auto fresh = std::make_shared<OpenContents>();
    const PosixBacking::FirstRead read{off, size};
    auto bound = Bind(node, *info, off == 0, fresh.get(), &read);
    if (!bound.ok()) return bound.status();
    first = std::move(bound.value().first);
    node_reads_.Bind(node, fresh);
    c = std::move(fresh);
  }
  Status s = ReadContents(*c, backing_, prefetcher_, stats_, fs_stats_, size, off, out, &first);
  if (!s.ok()) {
    // The file is not the version bound any more: the next READ binds the one it has now.
    if (NotTheVersionBound(s)) node_reads_.Release(node, c.get());
    return s;  // counted in stats
  }
  // Bytes of exactly one version, all it holds in the range asked (ReadContents). The kernel
  // must not get them when it would make a read() return bytes no version held:
  // - a reply shorter than asked ends the file for the kernel only if the size it caches
  //   says so: below that size it pads the pages with zeros (a version smaller than the one
  //   the kernel knows: its attributes were invalidated by Bind, the next read() asks again);
  // - pages of another version than those the kernel may hold (fs/core/page_versions.h).
  // Either is refused (kStale): the read() gets what it already copied, or the error. The
  // kernel asks only for pages up to the size it caches (its readahead stops at the page
  // holding the end), so a reply that ends before the last page asked for, or before the size
  // last reported (replies may reach the kernel in another order), is short of its size.
  const FileVersion version = c->blob ? c->blob->version() : VersionOf(c->st);
  const uint64_t got_to = off + out->bytes;
  const bool short_of_size =
      out->bytes < size && (off + size > (got_to + kPageSize - 1) / kPageSize * kPageSize ||
                            got_to < inodes_.SeenOf(node).reported.size);
  using Verdict = PageVersions::Verdict;
  // The first page alone: a read() that asks for it copied no page of the file before.
  const bool first_page = off == 0 && size <= kPageSize;
  Verdict verdict =
      short_of_size ? Verdict::kRefuse : pages_.Serve(node, version, pid, first_page, SteadyNs());
  if (verdict == Verdict::kDropOthers) {
    // The pages after this READ's are dropped before it gets its reply. Its own page (locked
    // until the reply) is left out of the drop, which cannot wait on it; other READs of the
    // node are answered without waiting on this one.
    DropPages(node, kPageSize);
    verdict = pages_.Serve(node, version, pid, true, SteadyNs());
    if (verdict != Verdict::kServe) verdict = Verdict::kRefuse;
  }
  if (verdict != Verdict::kServe) {
    stats_.errors.stale.fetch_add(1, std::memory_order_relaxed);
    if (short_of_size) kernel_.InvalidateAttrs(node);
    // The caller drops the pages after its reply: this READ's pages are unlocked by then, so
    // the drop cannot wait on them.
    *drop_after_reply = verdict == Verdict::kRefuseDrop;
    return Status::Error(Code::kStale, "pages of another version");
  }
  const uint64_t end = c->blob ? c->blob->size() : static_cast<uint64_t>(c->st.st_size);
  if (off + size >= end) node_reads_.Release(node, c.get());  // all read
  return Status::Ok();
}

void DatasetCore::DropPages(uint64_t node, uint64_t from) {
  const uint64_t ticket = pages_.DropBegin(node);
  if (!kernel_.DropPages(node, from)) return;  // not dropped: the node's pages stay as they were
  pages_.DropDone(node, ticket, SteadyNs());
}

}  // namespace clairfs
