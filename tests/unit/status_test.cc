// The error contract (cache/base/status.h, docs/architecture.md "Errors"): every Code has a name
// and an errno for the kernel (ToErrno), FromErrno maps that errno back to the code, and an errno
// carried from a system call reaches the kernel unchanged.
#include "cache/base/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "fs/status_errno.h"

namespace clairfs {
namespace {

// Every code, from the first to kLastCode (checked below to be the last with a name).
std::vector<Code> AllCodes() {
  std::vector<Code> out;
  for (int i = 0; i <= static_cast<int>(kLastCode); ++i) out.push_back(static_cast<Code>(i));
  return out;
}

// The errno the kernel gets for a code when no system call's errno is carried, and the code
// FromErrno gives back for it. Three codes have no errno of their own and share another's:
// a path out of the root is missing to the kernel, corruption and shutdown are I/O errors.
struct Row {
  Code code;
  int err;
  Code back;
};
constexpr Row kTable[] = {
    {Code::kOk, 0, Code::kOk},
    {Code::kNotFound, ENOENT, Code::kNotFound},
    {Code::kInvalidArgument, EINVAL, Code::kInvalidArgument},
    {Code::kOutsideRoot, ENOENT, Code::kNotFound},
    {Code::kIoError, EIO, Code::kIoError},
    {Code::kTimedOut, ETIMEDOUT, Code::kTimedOut},
    {Code::kNoSpace, ENOSPC, Code::kNoSpace},
    {Code::kCorruption, EIO, Code::kIoError},
    {Code::kReadOnly, EROFS, Code::kReadOnly},
    {Code::kUnavailable, EIO, Code::kIoError},
    {Code::kStale, ESTALE, Code::kStale},
    {Code::kPermissionDenied, EACCES, Code::kPermissionDenied},
    {Code::kLocked, EWOULDBLOCK, Code::kLocked},
    {Code::kDisconnected, ENOTCONN, Code::kDisconnected},
    {Code::kUnreachable, EHOSTUNREACH, Code::kUnreachable},
    {Code::kNoAttribute, ENODATA, Code::kNoAttribute},
    {Code::kSymlink, ELOOP, Code::kSymlink},
};

TEST(Status, EveryCodeHasAName) {
  for (Code c : AllCodes()) {
    EXPECT_STRNE(CodeName(c), "unknown") << static_cast<int>(c);
    EXPECT_STRNE(CodeName(c), "") << static_cast<int>(c);
  }
  // kLastCode is the last: the value after it has no name.
  EXPECT_STREQ(CodeName(static_cast<Code>(static_cast<int>(kLastCode) + 1)), "unknown");
  // Names are distinct: a log line tells the codes apart.
  for (Code a : AllCodes()) {
    for (Code b : AllCodes()) {
      if (a != b) {
        EXPECT_STRNE(CodeName(a), CodeName(b));
      }
    }
  }
}

TEST(Status, EveryCodeRoundTripsThroughToErrnoAndFromErrno) {
  ASSERT_EQ(std::size(kTable), AllCodes().size()) << "a code without a row in kTable";
  for (const Row& row : kTable) {
    const Status s = row.code == Code::kOk ? Status::Ok() : Status::Error(row.code, "x");
    EXPECT_EQ(ToErrno(s), row.err) << CodeName(row.code);
    if (row.code == Code::kOk) continue;
    const Status back = Status::FromErrno(ToErrno(s), "x");
    EXPECT_EQ(back.code(), row.back) << CodeName(row.code) << " -> " << row.err;
    EXPECT_EQ(ToErrno(back), row.err) << CodeName(row.code);
  }
}

// Whatever code an errno maps to, the kernel gets that errno back: the mapping to codes never
// changes what a caller of the mount sees.
TEST(Status, TheErrnoOfASystemCallReachesTheKernelUnchanged) {
  for (int err = 1; err < 134; ++err) {
    const Status s = Status::FromErrno(err, "path");
    EXPECT_FALSE(s.ok()) << err;
    EXPECT_EQ(s.os_errno(), err);
    EXPECT_EQ(ToErrno(s), err) << std::strerror(err) << " as " << CodeName(s.code());
    EXPECT_NE(s.message().find(std::strerror(err)), std::string::npos) << s.message();
  }
  // A code with a system call's errno: the errno wins.
  EXPECT_EQ(ToErrno(Status::Error(Code::kStale, "changed", ESTALE)), ESTALE);
  EXPECT_EQ(ToErrno(Status::Error(Code::kLocked, "in use", EWOULDBLOCK)), EWOULDBLOCK);
}

// The errnos callers need told apart, each to its code.
TEST(Status, FromErrnoGivesTheCodeCallersBranchOn) {
  const struct {
    int err;
    Code code;
  } kMapped[] = {
      {ENOENT, Code::kNotFound},
      {ENOTDIR, Code::kNotFound},
      {ENODATA, Code::kNoAttribute},
      {EXDEV, Code::kOutsideRoot},
      {EINVAL, Code::kInvalidArgument},
      {ENAMETOOLONG, Code::kInvalidArgument},
      {ELOOP, Code::kSymlink},
      {ENOSPC, Code::kNoSpace},
      {EROFS, Code::kReadOnly},
      {ETIMEDOUT, Code::kTimedOut},
      {ESTALE, Code::kStale},
      {EACCES, Code::kPermissionDenied},
      {EPERM, Code::kPermissionDenied},
      {EWOULDBLOCK, Code::kLocked},
      {EAGAIN, Code::kLocked},
      {ENOTCONN, Code::kDisconnected},
      {ECONNABORTED, Code::kDisconnected},
      {ECONNRESET, Code::kUnreachable},
      {ESHUTDOWN, Code::kUnreachable},
      {EHOSTDOWN, Code::kUnreachable},
      {EHOSTUNREACH, Code::kUnreachable},
      {ENETDOWN, Code::kUnreachable},
      {ENETUNREACH, Code::kUnreachable},
      {EIO, Code::kIoError},
      {ENXIO, Code::kIoError},
      {ENODEV, Code::kIoError},
      {EREMOTEIO, Code::kIoError},
      {EMFILE, Code::kIoError},
  };
  for (const auto& m : kMapped) {
    EXPECT_EQ(Status::FromErrno(m.err, "p").code(), m.code) << std::strerror(m.err);
  }
}

TEST(Status, ToStringIsTheMessageOrTheCodesName) {
  EXPECT_EQ(Status::Ok().ToString(), "ok");
  EXPECT_EQ(Status::Error(Code::kStale, "").ToString(), "stale");
  EXPECT_EQ(Status::FromErrno(ESTALE, "f").ToString(), std::string("f: ") + std::strerror(ESTALE));
}

}  // namespace
}  // namespace clairfs
