// RefuseChanges: the part of a lowlevel operation table that both clairfs file systems share:
// every call that would create, remove, rename, link or allocate a node, or set or remove an
// extended attribute, answers EROFS. (The kernel refuses most of them itself on the dataset's
// read-only mount; the control files' mount is writable for the manifest only.)
#pragma once

#define FUSE_USE_VERSION 314
#include <errno.h>
#include <fuse_lowlevel.h>

namespace clairfs {

inline void RefuseChanges(fuse_lowlevel_ops* o) {
  o->mknod = [](fuse_req_t r, fuse_ino_t, const char*, mode_t, dev_t) { fuse_reply_err(r, EROFS); };
  o->mkdir = [](fuse_req_t r, fuse_ino_t, const char*, mode_t) { fuse_reply_err(r, EROFS); };
  o->unlink = [](fuse_req_t r, fuse_ino_t, const char*) { fuse_reply_err(r, EROFS); };
  o->rmdir = [](fuse_req_t r, fuse_ino_t, const char*) { fuse_reply_err(r, EROFS); };
  o->symlink = [](fuse_req_t r, const char*, fuse_ino_t, const char*) {
    fuse_reply_err(r, EROFS);
  };
  o->rename = [](fuse_req_t r, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned) {
    fuse_reply_err(r, EROFS);
  };
  o->link = [](fuse_req_t r, fuse_ino_t, fuse_ino_t, const char*) { fuse_reply_err(r, EROFS); };
  o->create = [](fuse_req_t r, fuse_ino_t, const char*, mode_t, fuse_file_info*) {
    fuse_reply_err(r, EROFS);
  };
  o->setxattr = [](fuse_req_t r, fuse_ino_t, const char*, const char*, size_t, int) {
    fuse_reply_err(r, EROFS);
  };
  o->removexattr = [](fuse_req_t r, fuse_ino_t, const char*) { fuse_reply_err(r, EROFS); };
  o->fallocate = [](fuse_req_t r, fuse_ino_t, int, off_t, off_t, fuse_file_info*) {
    fuse_reply_err(r, EROFS);
  };
}

}  // namespace clairfs
