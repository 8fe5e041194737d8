// MemBacking: an in-memory dataset implementing Backing, with fault injection, for tests.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "cache/backing/backing.h"

namespace clairfs::testing {

class MemBacking final : public Backing {
 public:
  MemBacking() { nodes_[""] = Node{S_IFDIR | 0755, "", 1}; }

  // Adds a regular file (and its parent directories) with the given contents.
  void AddFile(const std::string& path, std::string data, int64_t mtime_ns = 1) {
    std::lock_guard lock(mu_);
    AddParents(path);
    nodes_[path] = Node{S_IFREG | 0644, std::move(data), mtime_ns};
  }
  void AddDir(const std::string& path) {
    std::lock_guard lock(mu_);
    AddParents(path);
    nodes_[path] = Node{S_IFDIR | 0755, "", 1};
  }
  void AddSymlink(const std::string& path, std::string target) {
    std::lock_guard lock(mu_);
    AddParents(path);
    nodes_[path] = Node{S_IFLNK | 0777, std::move(target), 1};
  }
  void AddFifo(const std::string& path) {
    std::lock_guard lock(mu_);
    AddParents(path);
    nodes_[path] = Node{S_IFIFO | 0644, "", 1};
  }

  // Changes path's mode bits (not its type), as a chmod made elsewhere would.
  void Chmod(const std::string& path, mode_t bits) {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(path);
    if (it != nodes_.end()) it->second.mode = (it->second.mode & S_IFMT) | (bits & 07777);
  }
  // Removes the object at path (and nothing below it).
  void Remove(const std::string& path) {
    std::lock_guard lock(mu_);
    nodes_.erase(path);
  }

  // Fault injection: reads of path fail with EIO; every read takes delay; a closed gate blocks
  // every read until it is opened.
  void FailReads(const std::string& path) {
    std::lock_guard lock(mu_);
    failing_ = path;
  }
  void SetDelay(std::chrono::milliseconds d) {
    std::lock_guard lock(mu_);
    delay_ = d;
  }
  void CloseGate() {
    std::lock_guard lock(mu_);
    gate_open_ = false;
  }
  void OpenGate() {
    {
      std::lock_guard lock(mu_);
      gate_open_ = true;
    }
    gate_cv_.notify_all();
  }
  // The version Lstat reports for path now ({} if there is no such object).
  FileVersion Version(const std::string& path) const {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(path);
    return it == nodes_.end() ? FileVersion{} : VersionOf(StatOf(path, it->second));
  }
  uint64_t reads() const { return reads_.load(); }
  uint64_t reads_of(const std::string& path) const {
    std::lock_guard lock(mu_);
    auto it = reads_by_path_.find(path);
    return it == reads_by_path_.end() ? 0 : it->second;
  }

  Status Lstat(const std::string& path, struct stat* st) const override {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return Status::FromErrno(ENOENT, path);
    *st = StatOf(path, it->second);
    return Status::Ok();
  }
  Result<std::string> ReadLink(const std::string& path) const override {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(path);
    if (it == nodes_.end() || !S_ISLNK(it->second.mode)) return Status::FromErrno(EINVAL, path);
    return it->second.data;
  }
  Result<BlobPtr> Read(const std::string& path, ByteRange range) const override {
    std::unique_lock lock(mu_);
    reads_.fetch_add(1);
    ++reads_by_path_[path];
    gate_cv_.wait(lock, [&] { return gate_open_; });
    const auto delay = delay_;
    if (path == failing_) return Status::FromErrno(EIO, path);
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return Status::FromErrno(ENOENT, path);
    if (!S_ISREG(it->second.mode)) return Status::Error(Code::kInvalidArgument, "not regular");
    const std::string& data = it->second.data;
    if (!range.whole() &&
        (range.offset > data.size() || range.length > data.size() - range.offset)) {
      return Status::Error(Code::kInvalidArgument, "range not inside the file");
    }
    const size_t begin = range.offset, n = range.whole() ? data.size() : range.length;
    auto blob = Blob::Allocate(n, VersionOf(StatOf(path, it->second)));
    std::copy(data.begin() + begin, data.begin() + begin + n, blob->mutable_data());
    lock.unlock();
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    blob->Seal();
    return BlobPtr(std::move(blob));
  }

 private:
  struct Node {
    mode_t mode;
    std::string data;  // contents, or the symlink target
    int64_t mtime_ns;
  };
  // ctime follows mtime here; the inode number is the path's hash.
  static struct stat StatOf(const std::string& path, const Node& n) {
    struct stat st {};
    st.st_mode = n.mode;
    st.st_size = static_cast<off_t>(n.data.size());
    st.st_mtim.tv_sec = st.st_ctim.tv_sec = n.mtime_ns / 1'000'000'000;
    st.st_mtim.tv_nsec = st.st_ctim.tv_nsec = n.mtime_ns % 1'000'000'000;
    st.st_ino = std::hash<std::string>()(path);
    return st;
  }
  void AddParents(const std::string& path) {
    for (size_t i = path.find('/'); i != std::string::npos; i = path.find('/', i + 1)) {
      nodes_.try_emplace(path.substr(0, i), Node{S_IFDIR | 0755, "", 1});
    }
  }
  mutable std::mutex mu_;
  mutable std::condition_variable gate_cv_;
  std::map<std::string, Node> nodes_;
  std::string failing_;
  std::chrono::milliseconds delay_{0};
  bool gate_open_ = true;
  mutable std::atomic<uint64_t> reads_{0};
  mutable std::map<std::string, uint64_t> reads_by_path_;
};

}  // namespace clairfs::testing
