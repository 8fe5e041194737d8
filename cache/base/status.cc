#include "cache/base/status.h"

#include <cstring>

namespace clairfs {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kNotFound:
      return "not found";
    case Code::kInvalidArgument:
      return "invalid argument";
    case Code::kOutsideRoot:
      return "outside the dataset root";
    case Code::kIoError:
      return "I/O error";
    case Code::kTimedOut:
      return "timed out";
    case Code::kNoSpace:
      return "no space";
    case Code::kCorruption:
      return "corruption";
    case Code::kReadOnly:
      return "read-only";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kStale:
      return "stale";
    case Code::kPermissionDenied:
      return "permission denied";
    case Code::kLocked:
      return "locked";
    case Code::kDisconnected:
      return "disconnected";
    case Code::kUnreachable:
      return "unreachable";
    case Code::kNoAttribute:
      return "no such attribute";
    case Code::kSymlink:
      return "a symbolic link";
  }
  return "unknown";
}

Status Status::FromErrno(int err, std::string context) {
  Code code = Code::kIoError;
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      code = Code::kNotFound;
      break;
    case ENODATA:  // no such extended attribute
      code = Code::kNoAttribute;
      break;
    case EXDEV:
      code = Code::kOutsideRoot;
      break;
    case EINVAL:
    case ENAMETOOLONG:
      code = Code::kInvalidArgument;
      break;
    case ELOOP:
      code = Code::kSymlink;
      break;
    case ENOSPC:
      code = Code::kNoSpace;
      break;
    case EROFS:
      code = Code::kReadOnly;
      break;
    case ETIMEDOUT:
      code = Code::kTimedOut;
      break;
    case ESTALE:
      code = Code::kStale;
      break;
    case EACCES:
    case EPERM:
      code = Code::kPermissionDenied;
      break;
    case EWOULDBLOCK:  // == EAGAIN
      code = Code::kLocked;
      break;
    case ENOTCONN:
    case ECONNABORTED:
      code = Code::kDisconnected;
      break;
    case ECONNRESET:
    case ESHUTDOWN:
    case EHOSTDOWN:
    case EHOSTUNREACH:
    case ENETDOWN:
    case ENETUNREACH:
      code = Code::kUnreachable;
      break;
    default:
      break;
  }
  return Status(code, context + ": " + std::strerror(err), err);
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return message_.empty() ? CodeName(code_) : message_;
}

}  // namespace clairfs
