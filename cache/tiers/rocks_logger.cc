#include "cache/tiers/rocks_logger.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

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
    const auto lvl = level >= rocksdb::InfoLogLevel::ERROR_LEVEL  ? spdlog::level::err
                     : level == rocksdb::InfoLogLevel::WARN_LEVEL ? spdlog::level::warn
                                                                  : spdlog::level::info;
    if (suppressed > 0) {
      spdlog::log(lvl, "{} (rocksdb): {} [{} similar lines suppressed]", prefix_, buf, suppressed);
    } else {
      spdlog::log(lvl, "{} (rocksdb): {}", prefix_, buf);
    }
  } catch (...) {  // a log line is not worth unwinding through RocksDB
  }
}

}  // namespace clairfs
