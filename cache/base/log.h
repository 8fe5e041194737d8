// Log lines: the one way the project's code writes to the log. A call formats its message with
// fmt (the format string checked at compile time) only when its level is on, then hands the
// text to spdlog's default logger (set up by the daemon, daemon/daemon_log.h; tests may install
// their own), in log.cc.
//
// Why not spdlog's own calls: each one instantiates spdlog's formatting and logging templates in
// the file that makes it, about 3 s of compile time per file at -O3 and 9 s under
// AddressSanitizer; these instantiate only fmt's argument packing (docs/architecture.md,
// "Log lines").
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace clairfs {

enum class LogLevel { kDebug, kInfo, kWarn, kError, kCritical };

// Whether the default logger writes lines of this level.
bool LogEnabled(LogLevel level);

// Writes text as it is (no formatting) at level, if the level is on.
void LogLine(LogLevel level, std::string_view text);

// Writes out what the default logger has buffered (before the process ends or hands over).
void LogFlush();

// The lowest level the default logger writes from now on (a test silences the warnings it
// provokes by the thousand).
void SetLogLevel(LogLevel level);

// While it lives, the default logger's lines go to a buffer of its own instead (a test that
// checks what was logged); its destructor puts the previous logger back. One at a time.
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  // Every line written so far, each ending in a newline.
  std::string Text() const;

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

template <typename... Args>
void Log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (!LogEnabled(level)) return;
  LogLine(level, fmt::vformat(format, fmt::make_format_args(args...)));
}

template <typename... Args>
void LogDebug(fmt::format_string<Args...> format, Args&&... args) {
  Log(LogLevel::kDebug, format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogInfo(fmt::format_string<Args...> format, Args&&... args) {
  Log(LogLevel::kInfo, format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogWarn(fmt::format_string<Args...> format, Args&&... args) {
  Log(LogLevel::kWarn, format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogError(fmt::format_string<Args...> format, Args&&... args) {
  Log(LogLevel::kError, format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogCritical(fmt::format_string<Args...> format, Args&&... args) {
  Log(LogLevel::kCritical, format, std::forward<Args>(args)...);
}

}  // namespace clairfs
