#include "cache/tiers/rocks_logger.h"

#include <algorithm>
#include <cstdio>

#include "cache/base/log.h"

namespace clairfs {

void RocksLogger::Logv(const char* format, va_list ap) {
  Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
}

void RocksLogger::Logv(rocksdb::InfoLogLevel level, const char* format, va_list ap) {
  if (level < GetInfoLogLevel() || level == rocksdb::InfoLogLevel::HEADER_LEVEL) return;
  uint64_t suppressed = 0;
  if (!limit_.Allow(&suppressed)) return;
  try {
    char buf[1024];
    const int n = std::vsnprintf(buf, sizeof(buf), format, ap);
    for (size_t end = n < 0 ? 0 : std::min<size_t>(n, sizeof(buf) - 1);
         end > 0 && (buf[end - 1] == '\n' || buf[end - 1] == ' ');) {
      buf[--end] = '\0';
    }
    const auto lvl = level >= rocksdb::InfoLogLevel::ERROR_LEVEL  ? LogLevel::kError
                     : level == rocksdb::InfoLogLevel::WARN_LEVEL ? LogLevel::kWarn
                                                                  : LogLevel::kInfo;
    if (suppressed > 0) {
      Log(lvl, "{} (rocksdb): {} [{} similar lines suppressed]", prefix_, buf, suppressed);
    } else {
      Log(lvl, "{} (rocksdb): {}", prefix_, buf);
    }
  } catch (...) {  // a log line is not worth unwinding through RocksDB
  }
}

}  // namespace clairfs
