#include "cache/backing/store_handle.h"

#include <linux/limits.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>

namespace clairfs {

std::shared_ptr<StoreHandle> StoreHandle::Make(int fd, DIR* dir, IoExecutor::Poster post) {
  return std::shared_ptr<StoreHandle>(new StoreHandle(fd, dir),
                                      [post](StoreHandle* h) { post([h] { delete h; }); });
}

StoreHandle::~StoreHandle() {
  if (dir_) {
    closedir(dir_);
  } else if (fd_ >= 0) {
    close(fd_);
  }
}

Result<std::string> FdXattr(int fd, const char* name, const std::string& what) {
  const Status none = Status::FromErrno(ENODATA, what);
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  std::string buf;
  for (size_t cap : {size_t{4096}, size_t{XATTR_SIZE_MAX}}) {
    buf.resize(cap);
    const ssize_t n = name ? getxattr(proc.c_str(), name, buf.data(), cap)
                           : listxattr(proc.c_str(), buf.data(), cap);
    if (n >= 0) {
      buf.resize(static_cast<size_t>(n));
      return buf;
    }
    if (errno == ERANGE && cap < XATTR_SIZE_MAX) continue;
    // The kernel takes any error but ENODATA on an ACL read as a failed permission check.
    if (errno == ENOTSUP) return name ? Result<std::string>(none) : std::string();
    return Status::FromErrno(errno, what);
  }
  return Status::FromErrno(E2BIG, what);
}

}  // namespace clairfs
