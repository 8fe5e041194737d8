// RequestGuard: the one wrapper every lowlevel callback of both clairfs file systems runs its
// handler in (fs/clairfs_fs.cc, fs/control_fs.cc), so that no exception escapes into libfuse.
// An exception derived from std::exception is logged as "<what> failed: <message>" and the
// request, when it still expects a reply (a non-null req: forget and forget_multi pass
// nullptr, as they have none), gets the errno of an I/O error (ToErrno, kIoError). Anything else
// thrown propagates.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <cerrno>
#include <exception>

#include "cache/base/log.h"
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
      LogError("{} failed: {}", what, e.what());
      if (req) fuse_reply_err(req, ToErrno(Status::Error(Code::kIoError, e.what())));
    }
  }
};

// Replies the errno of a failed Status: how both file systems answer a request that failed.
inline void ReplyError(fuse_req_t req, const Status& s) { fuse_reply_err(req, ToErrno(s)); }

// The answer to a WRITE through a handle not opened for writing: the protocol's refusal (EBADF),
// not a failure of the file system. Both file systems open their files read-only except the
// control plane's manifest.
constexpr int kNotWritable = EBADF;

}  // namespace clairfs
