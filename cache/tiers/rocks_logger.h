// RocksLogger: RocksDB's info log, sent to the daemon's log (spdlog) instead of a LOG file in
// the cache directory. A LOG file on the cache file system is itself a fault: once a write to
// it fails (a full disk), RocksDB 7.8 aborts on the next log line (an assertion in
// WritableFileWriter), so a full cache file system would kill the daemon.
// Warnings and errors only, rate-limited. Never throws (RocksDB is not exception-safe).
#pragma once

#include <rocksdb/env.h>

#include <string>

#include "cache/base/log_limit.h"

namespace clairfs {

class RocksLogger final : public rocksdb::Logger {
 public:
  explicit RocksLogger(std::string prefix)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL), prefix_(std::move(prefix)) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;
  void Logv(rocksdb::InfoLogLevel level, const char* format, va_list ap) override;

 private:
  const std::string prefix_;
  LogLimit limit_{10};
};

}  // namespace clairfs
