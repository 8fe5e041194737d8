// daemon/mounts.h CloseFuseDescriptors: what a daemon whose stop overran closes on its way out.
// Real descriptors of /dev/fuse (opened, not mounted: the kernel has no connection for them
// yet) beside others that must stay open.
#include "daemon/mounts.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>

namespace clairfs {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

TEST(Mounts, CloseFuseDescriptorsClosesEveryDevFuseDescriptorAndNothingElse) {
  const int a = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (a < 0) GTEST_SKIP() << "no /dev/fuse here";
  const int b = open("/dev/fuse", O_RDWR | O_CLOEXEC);  // a worker's clone, as with clone_fd
  const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  ASSERT_GE(b, 0);
  ASSERT_GE(null, 0);

  EXPECT_EQ(CloseFuseDescriptors(), 2);
  EXPECT_FALSE(IsOpen(a));
  EXPECT_FALSE(IsOpen(b));
  EXPECT_TRUE(IsOpen(null));
  EXPECT_TRUE(IsOpen(pipe_fds[0]));
  EXPECT_TRUE(IsOpen(pipe_fds[1]));
  EXPECT_TRUE(IsOpen(STDERR_FILENO));
  EXPECT_EQ(CloseFuseDescriptors(), 0);  // none left

  close(null);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

}  // namespace
}  // namespace clairfs
