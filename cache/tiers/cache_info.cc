#include "cache/tiers/cache_info.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <nlohmann/json.hpp>

namespace clairfs {
namespace {

constexpr int kFormat = 1;
constexpr off_t kMaxBytes = 64 << 10;  // a description is a few hundred bytes
constexpr char kTempFile[] = ".clairfs.json.tmp";

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

Result<CacheInfo> ReadCacheInfo(const std::string& dir) {
  const std::string path = dir + "/" + kCacheInfoFile;
  Fd f{open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) {
    if (errno == ENOENT) return Status::Error(Code::kNotFound, "no " + path);
    if (errno == ELOOP) return Status::Error(Code::kCorruption, path + " is a symbolic link");
    return Status::FromErrno(errno, "cannot open " + path);
  }
  struct stat st;
  if (fstat(f.fd, &st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode) || st.st_size > kMaxBytes) {
    return Status::Error(Code::kCorruption, path + " is not a cache description");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(f.fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read " + path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto field = [&](const char* key, nlohmann::json::value_t type) {
    return j.is_object() && j.contains(key) && j[key].type() == type;
  };
  using T = nlohmann::json::value_t;
  if (!field("dataset", T::string) || !field("version", T::string) ||
      !(field("created", T::number_unsigned) || field("created", T::number_integer)) ||
      !(field("last_used", T::number_unsigned) || field("last_used", T::number_integer))) {
    return Status::Error(Code::kCorruption, path + " is not a cache description");
  }
  CacheInfo info;
  info.dataset = j["dataset"].get<std::string>();
  info.version = j["version"].get<std::string>();
  info.created = j["created"].get<int64_t>();
  info.last_used = j["last_used"].get<int64_t>();
  return info;
}

Status WriteCacheInfo(const std::string& dir, const CacheInfo& info) {
  nlohmann::json j = {{"format", kFormat},
                      {"dataset", info.dataset},
                      {"version", info.version},
                      {"created", info.created},
                      {"last_used", info.last_used}};
  // Invalid UTF-8 in a path is replaced rather than refused: the file is for people.
  const std::string text = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  Fd d{open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
  if (d.fd < 0) return Status::FromErrno(errno, "cannot open the cache directory '" + dir + "'");
  // A temporary file left by a crash (or planted: the directory is ours alone, see
  // ssd_dir.h) is removed, never written through: O_EXCL also refuses a symbolic link.
  Fd t;
  for (int attempt = 0; attempt < 2 && t.fd < 0; ++attempt) {
    t.fd = openat(d.fd, kTempFile, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (t.fd < 0 && errno == EEXIST && attempt == 0) (void)unlinkat(d.fd, kTempFile, 0);
  }
  const std::string temp = dir + "/" + kTempFile;
  if (t.fd < 0) return Status::FromErrno(errno, "cannot create " + temp);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(t.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      (void)unlinkat(d.fd, kTempFile, 0);
      return Status::FromErrno(err, "cannot write " + temp);
    }
    done += static_cast<size_t>(n);
  }
  if (renameat(d.fd, kTempFile, d.fd, kCacheInfoFile) != 0) {
    const int err = errno;
    (void)unlinkat(d.fd, kTempFile, 0);
    return Status::FromErrno(err, "cannot rename " + temp);
  }
  return Status::Ok();
}

Status RecordCacheUse(const std::string& dir, const std::string& dataset, std::string* previous) {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  CacheInfo info;
  info.created = now;
  info.dataset = dataset;
  if (previous) previous->clear();
  if (auto old = ReadCacheInfo(dir); old.ok()) {
    info.created = old.value().created;
    if (previous) *previous = old.value().dataset;
    if (dataset.empty()) info.dataset = old.value().dataset;  // a user that does not know it
  }
  info.version = CLAIRFS_VERSION;
  info.last_used = now;
  return WriteCacheInfo(dir, info);
}

}  // namespace clairfs
