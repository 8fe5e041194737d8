// SsdTier: objects on a node-local SSD in an embedded RocksDB, kept across remounts.
//
// Layout: both column families are keyed by the object's key (cache/base/object_key.h). "data"
// holds the object's bytes (BlobDB: every value goes to blob files, so compaction moves only
// small index entries, never the bytes); the default column family holds a 40-byte record per
// object (its FileVersion and the xxh3 of the bytes). Both are written in one batch. The
// records are loaded into memory at open, so Contains() and the capacity accounting need no
// I/O. Writes use the WAL without syncing it: a killed daemon loses nothing, a power loss loses
// recent objects (a cache can refetch them).
//
// Integrity: Get reads the record and the bytes from one RocksDB snapshot and verifies the
// bytes against that record's hash. Only a real mismatch there (or RocksDB reporting
// corruption) counts in corruptions(); the object is then deleted and kCorruption returned, so
// the caller reads the object elsewhere. An object erased or replaced by another thread while a
// Get runs is a plain miss. No wrong byte leaves this class.
//
// The directory: made safe and locked as cache/tiers/ssd_dir.h says, before RocksDB touches it.
// RocksDB's files are created 0600 and its info log goes to the daemon's log (spdlog). A
// directory made by this start is logged as a new, empty cache (a mistyped path shows). The
// directory's description (cache/tiers/cache_info.h) is written when the lock is taken and again
// when the database is closed. A start that fails before serving calls Abandon().
//
// Faults degrade, never stop: the first RocksDB I/O error (a full file system, EIO) switches
// the tier off (logged once with its cause, counted in Health()). While off, Get and Contains
// answer a miss and Put is refused, without I/O; the database is closed. Every retry_after a
// background thread reopens it (once resume_free_bytes are free, if the cause was a lack of
// space) and switches the tier back on (logged). Deletes made while off are applied then.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/base/log_limit.h"
#include "cache/tiers/ssd_dir.h"
#include "cache/tiers/tier.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
class Status;
}  // namespace rocksdb

namespace clairfs {

class RocksLogger;

struct SsdOptions {
  std::chrono::milliseconds retry_after{30'000};  // an off tier tries to come back this often
  uint64_t resume_free_bytes = 32ull << 20;       // ...after a lack of space, once this is free
  std::string dataset;  // absolute path of the dataset cached, for the directory's description
                        // (cache/tiers/cache_info.h); "": keep the one it names
};

class SsdTier final : public Tier {
 public:
  // Secures and locks dir (cache/tiers/ssd_dir.h), then opens (or creates) the database in it.
  // Fails if dir is unsafe or another process holds it; an I/O failure of RocksDB instead
  // yields a tier that is off and retries.
  static Result<std::unique_ptr<SsdTier>> Open(std::string name, const std::string& dir,
                                               uint64_t capacity, SsdOptions options = {});
  ~SsdTier() override;
  SsdTier(const SsdTier&) = delete;
  SsdTier& operator=(const SsdTier&) = delete;

  const std::string& name() const override { return name_; }
  bool persistent() const override { return true; }
  Result<BlobPtr> Get(std::string_view key, const FileVersion& version) override;
  Status Put(std::string_view key, BlobPtr blob) override;
  bool Contains(std::string_view key, const FileVersion& version) override;
  void Erase(std::string_view key) override;
  void RetainOnly(const std::function<bool(std::string_view, const FileVersion&)>& keep) override;
  uint64_t used_bytes() const override;
  uint64_t capacity() const override { return capacity_; }
  uint64_t corruptions() const override { return corruptions_.load(); }
  TierHealth Health() const override;
  size_t objects() const;
  const std::string& dir() const { return dir_; }

  // A tier whose database is not open yet: secures dir and takes its lock (so a second daemon
  // fails here), without starting RocksDB. A process that forks (daemonizes) must use this
  // and call Reopen() after the fork: RocksDB's thread pool is process-wide, fork keeps only
  // the calling thread, and RocksDB without its flush threads stalls forever. The lock's
  // descriptor is inherited by the child, which keeps the lock when the parent exits.
  static Result<std::unique_ptr<SsdTier>> Prepare(std::string name, const std::string& dir,
                                                  uint64_t capacity, SsdOptions options = {});
  // Closes the database, if open (the directory stays locked), and records the use in the
  // directory's description.
  void Close();
  // For a start that fails before serving: closes the database and removes what Open or
  // Prepare created, i.e. the directory if it was made by them (with everything in it, all of
  // it this process's) and the ancestors they made, if empty. Nothing that existed before is
  // touched. The tier is unusable afterwards, except for destruction.
  void Abandon();
  // Whether Open or Prepare made the directory (it held no cache before).
  bool created_dir() const { return !created_.empty() && created_.back() == dir_; }
  // Closes the database, if open, and opens it, reloading the index. An I/O failure switches
  // the tier off (it retries) and returns Ok; other failures are returned.
  Status Reopen();

  // Test hook: replaces the stored bytes of key without updating its record, as a failing
  // device would.
  Status CorruptForTest(std::string_view key);

 private:
  struct Record {
    FileVersion version;
    uint64_t hash = 0;
    bool operator==(const Record&) const = default;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  SsdTier(std::string name, std::string dir, uint64_t capacity, SsdOptions options);
  static Result<std::unique_ptr<SsdTier>> Create(std::string name, const std::string& dir,
                                                 uint64_t capacity, SsdOptions options);
  Status OpenDbLocked();                   // db_mu_ held exclusively
  void CloseDbLocked();                    // db_mu_ held exclusively
  void EraseLocked(std::string_view key);  // db_mu_ shared and mu_ held
  // A failed RocksDB call: counted and logged (rate-limited); an I/O error (and any failed
  // write) switches the tier off. Returns the failure as a Status.
  Status Failed(const rocksdb::Status& s, const std::string& what, bool is_write);
  void Disable(const Status& cause);
  void SwitchOn();
  void RecoveryLoop();

  const std::string name_;
  const std::string dir_;  // absolute and normal
  const uint64_t capacity_;
  const SsdOptions options_;
  CacheDirLock lock_;
  std::vector<std::string> created_;  // directories made by Create, outermost first
  bool abandoned_ = false;            // set by Abandon(): the directory is no longer described
  std::shared_ptr<RocksLogger> logger_;

  // Lock order: db_mu_, then mu_, then state_mu_.
  mutable std::shared_mutex db_mu_;  // shared: any use of db_; exclusive: opening, closing it
  rocksdb::DB* db_ = nullptr;        // owned
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
  rocksdb::ColumnFamilyHandle* data_ = nullptr;
  std::atomic<bool> on_{false};  // db_ is open and in service (changes under db_mu_ or state_mu_)

  mutable std::mutex mu_;  // guards the members below; deletes write to RocksDB under it, so
                           // that they never interleave with the index update of a Put
  std::unordered_map<std::string, Record, Hash, std::equal_to<>> index_;
  uint64_t used_ = 0;  // bytes of object data in index_ plus reservations of Puts in progress
  std::unordered_map<std::string, int, Hash, std::equal_to<>> writing_;  // Puts in progress
  std::unordered_set<std::string> pending_erase_;  // deleted while off; applied at reopen

  mutable std::mutex state_mu_;  // leaf: guards the members below
  std::condition_variable state_cv_;
  bool off_ = false;       // switched off by a fault, until the recovery thread reopens
  bool no_space_ = false;  // ... and the fault was a lack of space
  std::string cause_;      // why it is off
  bool stop_ = false;
  std::thread recovery_;  // started at the first fault

  std::atomic<uint64_t> corruptions_{0};
  std::atomic<uint64_t> disables_{0};
  std::atomic<uint64_t> io_errors_{0};
  LogLimit error_log_;
};

}  // namespace clairfs
