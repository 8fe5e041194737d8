#include "cache/tiers/ssd_tier.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sys/statvfs.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "cache/base/log.h"
#include "cache/base/object_key.h"
#include "cache/tiers/cache_info.h"
#include "cache/tiers/rocks_logger.h"
#include "cache/tiers/ssd_format.h"

namespace clairfs {
namespace {

using ssd_format::DecodeRecord;
using ssd_format::EncodeRecord;
using ssd_format::FromRocks;

rocksdb::Slice ToSlice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

uint64_t FreeBytes(const std::string& dir) {
  struct statvfs st;
  if (statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

}  // namespace

SsdTier::SsdTier(std::string name, std::string dir, uint64_t capacity, SsdOptions options)
    : name_(std::move(name)),
      dir_(std::move(dir)),
      capacity_(capacity),
      options_(options),
      logger_(std::make_shared<RocksLogger>(name_ + " tier (" + dir_ + ")")) {}

namespace {

// Removes the directories in created (outermost first) that a failed start made. Only a start
// that holds the directory's lock removes the innermost with its contents: without the lock,
// another daemon may have found the directory this start made and be using it (it holds the
// lock file inside, so the directory is not empty). Every other removal is of an empty
// directory only. remove_all never follows a symbolic link, and nobody but this user (or root)
// can add entries below a directory made 0700 moments ago.
enum class LockHeld { kNo, kYes };
void RemoveCreated(const std::vector<std::string>& created, LockHeld held) {
  for (auto it = created.rbegin(); it != created.rend(); ++it) {
    std::error_code ec;
    if (it == created.rbegin() && held == LockHeld::kYes) {
      std::filesystem::remove_all(*it, ec);
    } else if (!std::filesystem::remove(*it, ec) && !ec) {
      return;  // not there any more
    }
    if (ec == std::errc::directory_not_empty) return;  // in use by another start: keep it
    if (ec) {
      LogWarn("cannot remove '{}', made by this failed start: {}", *it, ec.message());
      return;
    }
  }
}

}  // namespace

Result<std::unique_ptr<SsdTier>> SsdTier::Create(std::string name, const std::string& dir,
                                                 uint64_t capacity, SsdOptions options) {
  const std::string normal = NormalCacheDir(dir);
  std::vector<std::string> created;
  if (Status s = SecureCacheDir(normal, &created); !s.ok()) {
    RemoveCreated(created, LockHeld::kNo);
    return s;
  }
  auto lock = CacheDirLock::Acquire(normal);
  if (!lock.ok()) {
    RemoveCreated(created, LockHeld::kNo);  // the daemon that holds it may use what we made
    return lock.status();
  }
  std::unique_ptr<SsdTier> tier(new SsdTier(std::move(name), normal, capacity, options));
  tier->lock_ = std::move(lock.value());
  tier->created_ = std::move(created);
  if (tier->created_dir()) {
    LogWarn(
        "{} tier: created '{}', a new and empty cache directory; if a cache of this dataset "
        "exists elsewhere (clairfs-ctl cache list shows them), check the path "
        "(cache.tiers[].dir)",
        tier->name_, normal);
  }
  std::string previous;
  if (Status s = RecordCacheUse(normal, options.dataset, &previous); !s.ok()) {
    LogWarn("{} tier: cannot describe the cache: {}", tier->name_, s.message());
  } else if (!options.dataset.empty() && !previous.empty() && previous != options.dataset) {
    LogWarn("{} tier: '{}' was a cache of '{}' and is now used for '{}'", tier->name_, normal,
            previous, options.dataset);
  }
  return tier;
}

Result<std::unique_ptr<SsdTier>> SsdTier::Open(std::string name, const std::string& dir,
                                               uint64_t capacity, SsdOptions options) {
  auto tier = Create(std::move(name), dir, capacity, options);
  if (!tier.ok()) return tier;
  if (Status s = tier.value()->Reopen(); !s.ok()) {
    tier.value()->Abandon();
    return s;
  }
  return tier;
}

Result<std::unique_ptr<SsdTier>> SsdTier::Prepare(std::string name, const std::string& dir,
                                                  uint64_t capacity, SsdOptions options) {
  return Create(std::move(name), dir, capacity, options);
}

Status SsdTier::OpenDbLocked() {
  const rocksdb::DBOptions db_opts = ssd_format::DbOptions(logger_);
  const std::vector<rocksdb::ColumnFamilyDescriptor> cfs = ssd_format::Families();
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_opts, dir_, cfs, &handles, &raw);
  if (!s.ok()) return FromRocks(s, "cannot open the SSD cache in '" + dir_ + "'");
  db_ = raw;
  meta_ = handles[ssd_format::kMetaFamily];
  data_ = handles[ssd_format::kDataFamily];
  std::lock_guard lock(mu_);
  index_.clear();
  used_ = 0;
  rocksdb::WriteBatch cleanup;  // records of an old format, and deletes made while off
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), meta_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      Record r;
      const std::string_view key(it->key().data(), it->key().size());
      if (!DecodeRecord(it->value(), &r.version, &r.hash) || !ParseObjectKey(key)) {
        cleanup.Delete(meta_, it->key());
        cleanup.Delete(data_, it->key());
        continue;
      }
      used_ += ObjectBytes(key, r.version);
      index_.emplace(it->key().ToString(), r);
    }
    s = it->status();
  }
  for (const std::string& key : pending_erase_) {
    cleanup.Delete(meta_, key);
    cleanup.Delete(data_, key);
    auto at = index_.find(key);
    if (at != index_.end()) {
      used_ -= ObjectBytes(at->first, at->second.version);
      index_.erase(at);
    }
  }
  if (s.ok() && cleanup.Count() > 0) s = db_->Write(rocksdb::WriteOptions(), &cleanup);
  if (!s.ok()) {
    io_errors_.fetch_add(1, std::memory_order_relaxed);
    Status st = FromRocks(s, "cannot load the SSD cache index in '" + dir_ + "'");
    index_.clear();
    used_ = 0;
    CloseDbLocked();
    return st;
  }
  pending_erase_.clear();
  return Status::Ok();
}

void SsdTier::CloseDbLocked() {
  on_.store(false);
  if (!db_) return;
  db_->DestroyColumnFamilyHandle(meta_);
  db_->DestroyColumnFamilyHandle(data_);
  if (rocksdb::Status s = db_->Close(); !s.ok()) {
    io_errors_.fetch_add(1, std::memory_order_relaxed);
    if (error_log_.Allow()) LogWarn("{} tier: closing RocksDB: {}", name_, s.ToString());
  }
  delete db_;
  db_ = nullptr;
  meta_ = data_ = nullptr;
}

SsdTier::~SsdTier() {
  {
    std::lock_guard lock(state_mu_);
    stop_ = true;
  }
  state_cv_.notify_all();
  if (recovery_.joinable()) recovery_.join();
  Close();
}

void SsdTier::Close() {
  std::unique_lock dl(db_mu_);
  const bool was_open = db_ != nullptr;
  CloseDbLocked();
  {
    std::lock_guard lock(mu_);
    index_.clear();
    used_ = 0;
  }
  if (was_open && !abandoned_) {
    if (Status s = RecordCacheUse(dir_, options_.dataset); !s.ok()) {
      LogWarn("{} tier: cannot describe the cache: {}", name_, s.message());
    }
  }
}

void SsdTier::Abandon() {
  {
    std::lock_guard lock(state_mu_);
    stop_ = true;
  }
  state_cv_.notify_all();
  if (recovery_.joinable()) recovery_.join();
  std::unique_lock dl(db_mu_);
  abandoned_ = true;
  CloseDbLocked();
  RemoveCreated(created_, LockHeld::kYes);
  created_.clear();
}

Status SsdTier::Reopen() {
  lock_.RecordPid();  // after a daemonizing fork, the child's
  Status s;
  {
    std::unique_lock dl(db_mu_);
    CloseDbLocked();
    s = OpenDbLocked();
  }
  if (s.ok()) {
    SwitchOn();
    return s;
  }
  if (s.code() != Code::kIoError && s.code() != Code::kNoSpace &&
      s.code() != Code::kPermissionDenied) {
    return s;
  }
  Disable(s);
  return Status::Ok();
}

void SsdTier::SwitchOn() {
  std::lock_guard lock(state_mu_);
  off_ = false;
  no_space_ = false;
  cause_.clear();
  on_.store(true);
}

Status SsdTier::Failed(const rocksdb::Status& s, const std::string& what, bool is_write) {
  io_errors_.fetch_add(1, std::memory_order_relaxed);
  Status st = FromRocks(s, name_ + " tier: " + what);
  if (is_write || s.IsIOError()) {
    Disable(st);
  } else if (uint64_t n = 0; error_log_.Allow(&n)) {
    LogWarn("{}{}", st.message(),
            n ? " (" + std::to_string(n) + " similar errors not logged)" : std::string());
  }
  return st;
}

void SsdTier::Disable(const Status& cause) {
  on_.store(false);
  {
    std::lock_guard lock(state_mu_);
    if (off_ || stop_) return;
    off_ = true;
    no_space_ =
        cause.code() == Code::kNoSpace || cause.message().find("No space") != std::string::npos;
    cause_ = cause.message();
    disables_.fetch_add(1, std::memory_order_relaxed);
    LogError(
        "{} tier switched off: {}. Reads go on from the other tiers and the backing store; "
        "it is retried every {} s",
        name_, cause_, options_.retry_after.count() / 1000.0);
    if (!recovery_.joinable()) recovery_ = std::thread([this] { RecoveryLoop(); });
  }
  state_cv_.notify_all();
}

void SsdTier::RecoveryLoop() {
  std::unique_lock sl(state_mu_);
  for (;;) {
    state_cv_.wait(sl, [&] { return stop_ || off_; });
    if (stop_) return;
    sl.unlock();
    {
      std::unique_lock dl(db_mu_);  // RocksDB stays closed (and silent) while the tier is off
      CloseDbLocked();
    }
    sl.lock();
    while (off_) {
      if (state_cv_.wait_for(sl, options_.retry_after, [&] { return stop_; })) return;
      const bool no_space = no_space_;
      sl.unlock();
      Status s;
      const uint64_t free = FreeBytes(dir_);
      if (no_space && free < options_.resume_free_bytes) {
        s = Status::Error(Code::kNoSpace,
                          "only " + std::to_string(free) + " bytes free in '" + dir_ + "'");
      } else {
        std::unique_lock dl(db_mu_);
        s = OpenDbLocked();
      }
      if (s.ok()) {
        SwitchOn();
        LogWarn("{} tier back on ({} objects, {} bytes)", name_, objects(), used_bytes());
        sl.lock();
        break;
      }
      if (uint64_t n = 0; error_log_.Allow(&n)) {
        LogWarn("{} tier still off: {}", name_, s.message());
      }
      sl.lock();
    }
  }
}

TierHealth SsdTier::Health() const {
  TierHealth h;
  h.state = on_.load() ? TierState::kOn : TierState::kOff;
  h.disabled = disables_.load(std::memory_order_relaxed);
  h.io_errors = io_errors_.load(std::memory_order_relaxed);
  std::lock_guard lock(state_mu_);
  if (h.state == TierState::kOff) h.cause = off_ ? cause_ : "not open";
  return h;
}

void SsdTier::EraseLocked(std::string_view key) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    used_ -= ObjectBytes(it->first, it->second.version);
    index_.erase(it);
  }
  if (!on_.load()) {
    pending_erase_.emplace(key);
    return;
  }
  rocksdb::WriteBatch batch;
  batch.Delete(meta_, ToSlice(key));
  batch.Delete(data_, ToSlice(key));
  if (rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &batch); !s.ok()) {
    pending_erase_.emplace(key);
    (void)Failed(s, "delete of '" + std::string(key) + "'", true);
  }
}

Result<BlobPtr> SsdTier::Get(std::string_view key, const FileVersion& version) {
  // on_ is checked before db_mu_ too: while off, readers never queue behind the recovery
  // thread's exclusive lock.
  if (!on_.load()) return Status::Error(Code::kNotFound, name_ + " tier is off");
  std::shared_lock dl(db_mu_);
  if (!on_.load()) return Status::Error(Code::kNotFound, name_ + " tier is off");
  Record rec;
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return Status::Error(Code::kNotFound, "not in " + name_);
    if (it->second.version != version) {
      EraseLocked(key);  // the backing file changed: this copy can never be served again
      return Status::Error(Code::kNotFound, "stale in " + name_);
    }
    rec = it->second;
  }
  // The record and the bytes from one snapshot: a delete or a replacement racing this Get
  // shows as both gone or both new, never as bytes that do not match their record.
  rocksdb::ReadOptions ro;
  // The bytes are verified below against their xxh3; RocksDB's CRC32c of the blob (computed
  // without hardware help in Debian's build) would check them a second time at several times
  // the cost.
  ro.verify_checksums = false;
  ro.fill_cache = false;  // blob values are read once per use; keep the block cache for index
  ro.snapshot = db_->GetSnapshot();
  std::string meta;
  rocksdb::PinnableSlice value;
  rocksdb::Status sm = db_->Get(ro, meta_, ToSlice(key), &meta);
  rocksdb::Status sd = sm.ok() ? db_->Get(ro, data_, ToSlice(key), &value) : rocksdb::Status();
  db_->ReleaseSnapshot(ro.snapshot);
  const std::string what = "read of '" + std::string(key) + "'";
  for (const rocksdb::Status* s : {&sm, &sd}) {
    if (!s->ok() && !s->IsNotFound() && !s->IsCorruption()) return Failed(*s, what, false);
  }
  if (sm.IsNotFound()) {
    // Erased since the index lookup. If the index still shows the record and no Put of it is
    // in progress, the record is a leftover of such a race: drop it. Not a corruption.
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end() && it->second == rec && !writing_.count(key)) {
      used_ -= ObjectBytes(it->first, it->second.version);
      index_.erase(it);
    }
    return Status::Error(Code::kNotFound, "erased from " + name_);
  }
  Record stored;
  const bool decoded = sm.ok() && DecodeRecord(meta, &stored.version, &stored.hash);
  if (decoded && stored.version != version) {
    return Status::Error(Code::kNotFound, "replaced in " + name_);  // by a concurrent Put
  }
  Status bad;
  if (!decoded) {
    bad = Status::Error(Code::kCorruption, name_ + ": the record of '" + std::string(key) +
                                               "' is damaged: " + sm.ToString());
  } else if (!sd.ok()) {
    bad = Status::Error(Code::kCorruption, name_ + ": the bytes of '" + std::string(key) +
                                               "' are missing or damaged: " + sd.ToString());
  } else if (value.size() != ObjectBytes(key, stored.version)) {
    bad =
        Status::Error(Code::kCorruption, name_ + ": '" + std::string(key) + "' has the wrong size");
  }
  std::shared_ptr<Blob> blob;
  if (bad.ok()) {
    blob = Blob::Allocate(value.size(), stored.version);
    std::memcpy(blob->mutable_data(), value.data(), value.size());
    blob->Seal();
    if (blob->hash() != stored.hash) {
      bad = Status::Error(Code::kCorruption,
                          name_ + ": '" + std::string(key) + "' fails its checksum");
    }
  }
  if (!bad.ok()) {
    corruptions_.fetch_add(1, std::memory_order_relaxed);
    if (uint64_t n = 0; error_log_.Allow(&n)) LogWarn("{}", bad.message());
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    // Not if a Put is replacing the damaged object: the delete would drop the new one.
    if (it != index_.end() && (!decoded || it->second == stored) && !writing_.count(key)) {
      EraseLocked(key);
    }
    return bad;
  }
  return BlobPtr(std::move(blob));
}

Status SsdTier::Put(std::string_view key, BlobPtr blob) {
  std::shared_lock dl(db_mu_, std::defer_lock);
  if (on_.load()) dl.lock();
  if (!on_.load()) {
    std::lock_guard lock(state_mu_);
    return Status::Error(Code::kUnavailable,
                         name_ + " tier is off" + (cause_.empty() ? "" : ": " + cause_));
  }
  const uint64_t size = blob->size();
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    const uint64_t old = it == index_.end() ? 0 : ObjectBytes(it->first, it->second.version);
    if (used_ - old + size > capacity_)
      return Status::Error(Code::kNoSpace, name_ + " tier is full");
    used_ += size;  // reserved until the write lands
    ++writing_[std::string(key)];
  }
  rocksdb::WriteBatch batch;
  batch.Put(data_, ToSlice(key), rocksdb::Slice(blob->data(), size));
  batch.Put(meta_, ToSlice(key), EncodeRecord(blob->version(), blob->hash()));
  const rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &batch);
  {
    std::lock_guard lock(mu_);
    used_ -= size;
    auto w = writing_.find(key);
    if (--w->second == 0) writing_.erase(w);
    if (s.ok()) {
      auto [it, inserted] = index_.try_emplace(std::string(key));
      if (!inserted) used_ -= ObjectBytes(it->first, it->second.version);
      it->second = Record{blob->version(), blob->hash()};
      used_ += size;
      return Status::Ok();
    }
  }
  return Failed(s, "write of '" + std::string(key) + "'", true);
}

bool SsdTier::Contains(std::string_view key, const FileVersion& version) {
  if (!on_.load()) return false;
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  return it != index_.end() && it->second.version == version;
}

void SsdTier::Erase(std::string_view key) {
  std::shared_lock dl(db_mu_);
  std::lock_guard lock(mu_);
  EraseLocked(key);
}

void SsdTier::RetainOnly(const std::function<bool(std::string_view, const FileVersion&)>& keep) {
  std::shared_lock dl(db_mu_);
  std::lock_guard lock(mu_);
  rocksdb::WriteBatch batch;
  std::vector<std::string> erased;
  for (auto it = index_.begin(); it != index_.end();) {
    if (keep(it->first, it->second.version)) {
      ++it;
      continue;
    }
    batch.Delete(meta_, it->first);
    batch.Delete(data_, it->first);
    erased.push_back(it->first);
    used_ -= ObjectBytes(it->first, it->second.version);
    it = index_.erase(it);
  }
  if (erased.empty()) return;
  rocksdb::Status s;
  if (on_.load()) s = db_->Write(rocksdb::WriteOptions(), &batch);
  if (!on_.load() || !s.ok()) {
    for (auto& p : erased) pending_erase_.insert(std::move(p));
    if (!s.ok())
      (void)Failed(s, "eviction of " + std::to_string(batch.Count() / 2) + " objects", true);
  }
}

uint64_t SsdTier::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_;
}

size_t SsdTier::objects() const {
  std::lock_guard lock(mu_);
  return index_.size();
}

Status SsdTier::CorruptForTest(std::string_view key) {
  std::shared_lock dl(db_mu_);
  if (!db_) return Status::Error(Code::kUnavailable, "not open");
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), data_, ToSlice(key), &value);
  if (!s.ok()) return FromRocks(s, "corrupt");
  std::string bytes = value.ToString();
  if (!bytes.empty()) bytes[bytes.size() / 2] ^= 0x5a;
  return FromRocks(db_->Put(rocksdb::WriteOptions(), data_, ToSlice(key), bytes), "corrupt");
}

}  // namespace clairfs
