// RequestGuard: the one wrapper every lowlevel callback of both clairfs file systems runs its
// handler in (fs/clairfs_fs.cc, fs/control_fs.cc), so that no exception escapes into libfuse.
// An exception derived from std::exception is logged as "<what> failed: <message>" and the
// request, when it still expects a reply (a non-null req: forget and forget_multi pass
// nullptr, as they have none), gets the errno of an I/O error (ToErrno, kIoError). Anything else
// thrown propagates.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <spdlog/spdlog.h>

#include <exception>

#include "cache/base/status.h"
#include "fs/status_errno.h"

namespace clairfs {

struct RequestGuard {
  const char* what;  // names the file system's requests in the log line

  template <typename F>
  void operator()(fuse_req_t req, F&& f) const {
    try {
      f();
    } catch (const std::exception& e) {
      spdlog::error("{} failed: {}", what, e.what());
      if (req) fuse_reply_err(req, ToErrno(Status::Error(Code::kIoError, e.what())));
    }
  }
};

}  // namespace clairfs
