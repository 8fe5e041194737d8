#include "cache/backing.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace clairfs {
namespace {

// Opens path beneath root without following any symlink; a trailing symlink is opened itself
// when flags has O_PATH|O_NOFOLLOW, and fails with ELOOP otherwise.
int OpenBeneath(int root_fd, const std::string& path, int flags) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const char* p = path.empty() ? "." : path.c_str();
  int fd;
  do {
    fd = static_cast<int>(syscall(SYS_openat2, root_fd, p, &how, sizeof(how)));
  } while (fd < 0 && errno == EINTR);
  return fd;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Result<std::unique_ptr<PosixBacking>> PosixBacking::Open(const std::string& root_dir) {
  int fd = open(root_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "cannot open dataset directory '" + root_dir + "'");
  return std::unique_ptr<PosixBacking>(new PosixBacking(fd));
}

PosixBacking::~PosixBacking() { close(root_fd_); }

Status PosixBacking::Lstat(const std::string& path, struct stat* st) const {
  if (path.empty()) {
    if (fstat(root_fd_, st) != 0) return Status::FromErrno(errno, "stat of dataset root");
    return Status::Ok();
  }
  Fd fd(OpenBeneath(root_fd_, path, O_PATH));
  if (fd.get() < 0) return Status::FromErrno(errno, path);
  if (fstat(fd.get(), st) != 0) return Status::FromErrno(errno, path);
  return Status::Ok();
}

Result<std::string> PosixBacking::ReadLink(const std::string& path) const {
  Fd fd(OpenBeneath(root_fd_, path, O_PATH));
  if (fd.get() < 0) return Status::FromErrno(errno, path);
  std::string target(PATH_MAX, '\0');
  ssize_t n = readlinkat(fd.get(), "", target.data(), target.size());
  if (n < 0) return Status::FromErrno(errno, path);
  target.resize(static_cast<size_t>(n));
  return target;
}

Result<BlobPtr> PosixBacking::ReadFile(const std::string& path, uint64_t max_bytes) const {
  Fd fd(OpenBeneath(root_fd_, path, O_RDONLY));
  if (fd.get() < 0) return Status::FromErrno(errno, path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, path);
  if (!S_ISREG(st.st_mode)) {
    return Status::Error(Code::kInvalidArgument, path + ": not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) return Status::Error(Code::kNoSpace, path + ": larger than the limit");
  const FileVersion version = VersionOf(st);
  auto blob = Blob::Allocate(size, version);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd.get(), blob->mutable_data() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, path);
    if (n == 0) return Status::Error(Code::kIoError, path + ": file shrank while being read");
    done += static_cast<uint64_t>(n);
  }
  blob->Seal();
  return BlobPtr(std::move(blob));
}

Result<int> PosixBacking::OpenAt(const std::string& path, int flags) const {
  int fd = OpenBeneath(root_fd_, path, flags);
  if (fd < 0) return Status::FromErrno(errno, path);
  return fd;
}

Status PosixBacking::StatFs(struct statvfs* st) const {
  if (fstatvfs(root_fd_, st) != 0) return Status::FromErrno(errno, "statfs of dataset");
  return Status::Ok();
}

}  // namespace clairfs
