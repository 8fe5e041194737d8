#include "daemon/daemon_log.h"

#include <fcntl.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/syslog_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

#include "cache/base/log.h"

namespace clairfs {
namespace {

// A file sink that can open its path again (SIGHUP, after logrotate renamed it) and rotates
// the file by itself past max_bytes (0: never): path.<keep> is dropped, path.<i> becomes
// path.<i+1>, path becomes path.1, and a new path is started. spdlog's file sinks cannot reopen
// and throw where this one returns a Status. Writes are appends, so lines from before and
// after a rotation never interleave within one file; a line is never split across files.
class ReopenableFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  ReopenableFileSink(std::string path, uint64_t max_bytes, int keep)
      : path_(std::move(path)), max_bytes_(max_bytes), keep_(keep) {}
  ~ReopenableFileSink() override {
    if (file_) std::fclose(file_);
  }

  const std::string& path() const { return path_; }

  // Opens path_ and swaps it in; on failure the current file (if any) stays.
  Status Reopen() {
    std::lock_guard lock(mutex_);
    return ReopenLocked();
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!file_) return;
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    if (max_bytes_ > 0 && size_ > 0 && size_ + buf.size() > max_bytes_) Rotate();
    std::fwrite(buf.data(), 1, buf.size(), file_);
    // Each record reaches the file at once (`tail -f`, a crash): the daemon logs a few lines
    // a minute at info level, so this costs nothing that matters.
    std::fflush(file_);
    size_ += buf.size();
  }
  void flush_() override {
    if (file_) std::fflush(file_);
  }

 private:
  Status ReopenLocked() {
    const int fd = open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) return Status::FromErrno(errno, "cannot open '" + path_ + "'");
    struct stat st {};
    const uint64_t size = fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    std::FILE* f = fdopen(fd, "a");
    if (!f) {
      const int err = errno;
      close(fd);
      return Status::FromErrno(err, "cannot open '" + path_ + "'");
    }
    if (file_) std::fclose(file_);
    file_ = f;
    size_ = size;
    return Status::Ok();
  }

  // Under mutex_. A step that fails leaves the lines going to the current file, which then
  // counts as empty again, so a broken directory costs one attempt per max_bytes, not per line.
  void Rotate() {
    std::fflush(file_);
    const auto numbered = [&](int i) { return path_ + "." + std::to_string(i); };
    unlink(numbered(keep_).c_str());
    for (int i = keep_ - 1; i >= 1; --i) rename(numbered(i).c_str(), numbered(i + 1).c_str());
    if (rename(path_.c_str(), numbered(1).c_str()) != 0 || !ReopenLocked().ok()) size_ = 0;
  }

  const std::string path_;
  const uint64_t max_bytes_;
  const int keep_;
  // guarded by mutex_ (base_sink's, taken around sink_it_ and flush_)
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;  // bytes in the current file
};

std::shared_ptr<ReopenableFileSink> file_sink;  // set once, before any thread starts

}  // namespace

Status SetUpLogging(const LogConfig& log, bool foreground) {
  try {
    std::shared_ptr<spdlog::logger> logger;
    if (!log.file.empty()) {
      std::error_code ec;
      const std::filesystem::path abs = std::filesystem::absolute(log.file, ec);
      auto sink = std::make_shared<ReopenableFileSink>(ec ? log.file : abs.string(), log.max_size,
                                                       log.max_files);
      if (Status s = sink->Reopen(); !s.ok()) {
        return Status::Error(Code::kInvalidArgument, "config key 'log.file': " + s.message(),
                             s.os_errno());
      }
      file_sink = sink;
      logger = std::make_shared<spdlog::logger>("clairfs", sink);
    } else if (foreground) {
      logger = std::make_shared<spdlog::logger>("clairfs",
                                                std::make_shared<spdlog::sinks::stderr_sink_mt>());
    } else {
      logger = std::make_shared<spdlog::logger>(
          "clairfs",
          std::make_shared<spdlog::sinks::syslog_sink_mt>("clairfs", LOG_PID, LOG_USER, false));
    }
    logger->set_level(spdlog::level::from_str(log.level));
    logger->flush_on(spdlog::level::warn);
    spdlog::set_default_logger(logger);
  } catch (const std::exception& e) {
    return Status::Error(Code::kInvalidArgument, std::string("cannot set up logging: ") + e.what());
  }
  return Status::Ok();
}

void ReopenLog() {
  if (!file_sink) {
    LogInfo("SIGHUP received; no log file to reopen");
    return;
  }
  if (Status s = file_sink->Reopen(); !s.ok()) {
    LogError("SIGHUP received; keeping the old log file: {}", s.message());
    return;
  }
  LogInfo("SIGHUP received; reopened the log file {}", file_sink->path());
}

}  // namespace clairfs
