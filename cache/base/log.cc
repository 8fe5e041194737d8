#include "cache/base/log.h"

#include <spdlog/spdlog.h>

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

}  // namespace

bool LogEnabled(LogLevel level) {
  return spdlog::default_logger_raw()->should_log(ToSpdlog(level));
}

void LogLine(LogLevel level, std::string_view text) {
  spdlog::default_logger_raw()->log(ToSpdlog(level), text);
}

void LogFlush() { spdlog::default_logger_raw()->flush(); }

}  // namespace clairfs
