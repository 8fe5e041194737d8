// RefuseChanges: the part of a lowlevel operation table that both clairfs file systems share:
// every call that would create, remove, rename, link or allocate a node, or set or remove an
// extended attribute, answers kReadOnly (EROFS). (The kernel refuses most of them itself on the
// dataset's read-only mount; the control files' mount is writable for the manifest only.)
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "cache/base/status.h"
#include "fs/status_errno.h"

namespace clairfs {

// Answers r: the mount is read-only (kReadOnly, through ToErrno).
inline void RefuseChange(fuse_req_t r) {
  fuse_reply_err(r, ToErrno(Status::Error(Code::kReadOnly, "a read-only mount")));
}

inline void RefuseChanges(fuse_lowlevel_ops* o) {
  o->mknod = [](fuse_req_t r, fuse_ino_t, const char*, mode_t, dev_t) { RefuseChange(r); };
  o->mkdir = [](fuse_req_t r, fuse_ino_t, const char*, mode_t) { RefuseChange(r); };
  o->unlink = [](fuse_req_t r, fuse_ino_t, const char*) { RefuseChange(r); };
  o->rmdir = [](fuse_req_t r, fuse_ino_t, const char*) { RefuseChange(r); };
  o->symlink = [](fuse_req_t r, const char*, fuse_ino_t, const char*) { RefuseChange(r); };
  o->rename = [](fuse_req_t r, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned) {
    RefuseChange(r);
  };
  o->link = [](fuse_req_t r, fuse_ino_t, fuse_ino_t, const char*) { RefuseChange(r); };
  o->create = [](fuse_req_t r, fuse_ino_t, const char*, mode_t, fuse_file_info*) {
    RefuseChange(r);
  };
  o->setxattr = [](fuse_req_t r, fuse_ino_t, const char*, const char*, size_t, int) {
    RefuseChange(r);
  };
  o->removexattr = [](fuse_req_t r, fuse_ino_t, const char*) { RefuseChange(r); };
  o->fallocate = [](fuse_req_t r, fuse_ino_t, int, off_t, off_t, fuse_file_info*) {
    RefuseChange(r);
  };
}

}  // namespace clairfs
