// Status and Result: how every layer below fs/ reports failure. No exception crosses a layer
// boundary. The error contract (docs/architecture.md, "Errors"): a caller tells failures apart
// by their Code, never by an errno value. Status::FromErrno is the one place an errno becomes a
// code; fs/status_errno.h (ToErrno) is the one place a Status becomes an errno. A Status keeps
// the errno of the system call that failed, only so that ToErrno gives the kernel that errno.
#pragma once

#include <cerrno>
#include <optional>
#include <string>
#include <utility>

namespace clairfs {

enum class Code {
  kOk = 0,
  kNotFound,          // no such file, or not in this tier
  kInvalidArgument,   // bad input (manifest, config, path); not a regular file
  kOutsideRoot,       // a path or symlink leads out of the dataset root
  kIoError,           // the backing store or a tier failed
  kTimedOut,          // a deadline passed
  kNoSpace,           // a capacity would be exceeded
  kCorruption,        // stored bytes do not match their hash
  kReadOnly,          // a mutation of the dataset was attempted
  kUnavailable,       // shutting down, or not started
  kStale,             // the object changed or was replaced since it was named or opened
  kPermissionDenied,  // the caller may not do this (mode bits, ACLs, ownership)
  kLocked,            // another process holds the lock (a cache directory in use)
  kDisconnected,      // the store's file system is gone (a dead FUSE or network mount): its
                      // root may be opened again
  kUnreachable,       // the store's server cannot be reached (network down, connection reset)
  kNoAttribute,       // no such extended attribute (an answer about the file, not a fault)
  kSymlink,           // a symbolic link where none is followed (ELOOP): the path leads
                      // elsewhere now
};
// The last code: a new code goes before it or becomes it (tests/unit/status_test.cc walks
// every code from kOk to here).
inline constexpr Code kLastCode = Code::kSymlink;

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(Code code, std::string message, int os_errno = 0) {
    return Status(code, std::move(message), os_errno);
  }
  // Maps an errno from a system call to a code (the table in status.cc; an errno it does not
  // name is kIoError), keeping the errno for ToErrno.
  static Status FromErrno(int err, std::string context);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  // The errno of the failed system call, or 0 when the failure did not come from one.
  int os_errno() const { return os_errno_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  Status(Code code, std::string message, int os_errno)
      : code_(code), os_errno_(os_errno), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  int os_errno_ = 0;
  std::string message_;
};

// A value or the Status that explains its absence. status().ok() iff a value is held.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: must not be Ok
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

const char* CodeName(Code code);

}  // namespace clairfs
