// The daemon's log: stderr, syslog or a file that SIGHUP reopens (for logrotate).
#pragma once

#include "cache/base/status.h"
#include "conf/config.h"

namespace clairfs {

// Sets spdlog's default logger: to log.file when set (made absolute, so that a reopen after
// fuse_daemonize's chdir("/") finds it), else stderr in the foreground, else syslog. Fails
// with the key, the path and the reason when the file cannot be opened. Never throws.
Status SetUpLogging(const LogConfig& log, bool foreground);

// On SIGHUP: opens log.file again (logrotate renamed the old one; lines go to the new file
// from here on) and logs the outcome; a failed reopen keeps writing to the old file. Without
// a log file it only logs that the signal came. Thread-safe.
void ReopenLog();

}  // namespace clairfs
