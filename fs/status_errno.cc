#include "fs/status_errno.h"

#include <cerrno>

namespace clairfs {

int ToErrno(const Status& s) {
  if (s.ok()) return 0;
  if (s.os_errno() != 0) return s.os_errno();
  switch (s.code()) {
    case Code::kOk:
      return 0;
    case Code::kNotFound:
      return ENOENT;
    case Code::kInvalidArgument:
      return EINVAL;
    case Code::kOutsideRoot:
      return ENOENT;
    case Code::kIoError:
      return EIO;
    case Code::kTimedOut:
      return ETIMEDOUT;
    case Code::kNoSpace:
      return ENOSPC;
    case Code::kCorruption:
      return EIO;
    case Code::kReadOnly:
      return EROFS;
    case Code::kUnavailable:
      return EIO;
    case Code::kStale:
      return ESTALE;
    case Code::kPermissionDenied:
      return EACCES;
    case Code::kLocked:
      return EWOULDBLOCK;
    case Code::kDisconnected:
      return ENOTCONN;
    case Code::kUnreachable:
      return EHOSTUNREACH;
    case Code::kNoAttribute:
      return ENODATA;
    case Code::kSymlink:
      return ELOOP;
  }
  return EIO;
}

}  // namespace clairfs
