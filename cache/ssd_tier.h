// SsdTier: objects on a node-local SSD in an embedded RocksDB, kept across remounts.
//
// Layout: column family "data" holds file bytes (BlobDB: every value goes to blob files, so
// compaction moves only small index entries, never the bytes); the default column family holds
// a 40-byte record per object (its FileVersion and the xxh3 of the bytes). Both are written in one batch.
// The records are loaded into memory at open, so Contains() and the capacity accounting need
// no I/O. Writes use the WAL without syncing it: a killed daemon loses nothing, a power loss
// loses recent objects (a cache can refetch them).
//
// Every Get verifies the bytes against the stored hash; a mismatch (or RocksDB reporting
// corruption) deletes the object, is counted in corruptions(), and is returned as kCorruption
// so the caller reads the file elsewhere. No wrong byte leaves this class.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cache/tier.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace clairfs {

class SsdTier final : public Tier {
 public:
  // Opens (or creates) the database in dir. Fails if dir is not usable or another process
  // has it open.
  static Result<std::unique_ptr<SsdTier>> Open(std::string name, const std::string& dir,
                                               uint64_t capacity);
  ~SsdTier() override;
  SsdTier(const SsdTier&) = delete;
  SsdTier& operator=(const SsdTier&) = delete;

  const std::string& name() const override { return name_; }
  Result<BlobPtr> Get(std::string_view path, const FileVersion& version) override;
  Status Put(std::string_view path, BlobPtr blob) override;
  bool Contains(std::string_view path, const FileVersion& version) override;
  void Erase(std::string_view path) override;
  void RetainOnly(const std::function<bool(std::string_view, const FileVersion&)>& keep) override;
  uint64_t used_bytes() const override;
  uint64_t capacity() const override { return capacity_; }
  uint64_t corruptions() const override { return corruptions_.load(); }
  size_t objects() const;

  // A tier whose database is not open yet: checks that dir can be created and that no other
  // process holds it, without starting RocksDB. A process that forks (daemonizes) must use this
  // and call Reopen() after the fork: RocksDB's thread pool is process-wide, fork keeps only
  // the calling thread, and RocksDB without its flush threads stalls forever.
  static Result<std::unique_ptr<SsdTier>> Prepare(std::string name, const std::string& dir,
                                                  uint64_t capacity);
  // Closes the database, if open, and opens it, reloading the index.
  void Close();
  Status Reopen();

  // Test hook: replaces the stored bytes of path without updating its record, as a failing
  // device would.
  Status CorruptForTest(std::string_view path);

 private:
  struct Record {
    FileVersion version;
    uint64_t hash = 0;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  SsdTier(std::string name, std::string dir, uint64_t capacity)
      : name_(std::move(name)), dir_(std::move(dir)), capacity_(capacity) {}
  Status OpenDb();
  void EraseLocked(std::string_view path);

  const std::string name_;
  const std::string dir_;
  const uint64_t capacity_;
  rocksdb::DB* db_ = nullptr;  // owned; closed and deleted by the destructor
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
  rocksdb::ColumnFamilyHandle* data_ = nullptr;
  mutable std::mutex mu_;  // leaf lock: guards index_ and used_; RocksDB calls happen outside it
                           // except deletes, which must not race a Put of the same key
  std::unordered_map<std::string, Record, Hash, std::equal_to<>> index_;
  uint64_t used_ = 0;  // bytes of file data in index_ plus reservations of Puts in progress
  std::atomic<uint64_t> corruptions_{0};
};

}  // namespace clairfs
