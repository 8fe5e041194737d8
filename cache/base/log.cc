#include "cache/base/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <mutex>

namespace clairfs {
namespace {

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kCritical:
      return spdlog::level::critical;
  }
  return spdlog::level::err;
}

// Keeps every formatted line (LogCapture).
class BufferSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string Text() {
    std::lock_guard lock(mutex_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    text_.append(line.data(), line.size());
  }
  void flush_() override {}

 private:
  std::string text_;  // guarded by mutex_ (base_sink's, held around sink_it_)
};

}  // namespace

bool LogEnabled(LogLevel level) {
  return spdlog::default_logger_raw()->should_log(ToSpdlog(level));
}

void LogLine(LogLevel level, std::string_view text) {
  spdlog::default_logger_raw()->log(ToSpdlog(level), text);
}

void LogFlush() { spdlog::default_logger_raw()->flush(); }

void SetLogLevel(LogLevel level) { spdlog::set_level(ToSpdlog(level)); }

struct LogCapture::Parts {
  std::shared_ptr<BufferSink> sink = std::make_shared<BufferSink>();
  std::shared_ptr<spdlog::logger> previous;
};

LogCapture::LogCapture() : parts_(std::make_unique<Parts>()) {
  parts_->previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", parts_->sink));
}

LogCapture::~LogCapture() { spdlog::set_default_logger(parts_->previous); }

std::string LogCapture::Text() const { return parts_->sink->Text(); }

}  // namespace clairfs
