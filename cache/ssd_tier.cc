#include "cache/ssd_tier.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

namespace clairfs {
namespace {

// A record: size, mtime, ctime, inode number, xxh3 (8 bytes each). Records of another size
// (an older format without ctime and inode) cannot be validated and are erased at open.
constexpr size_t kRecordSize = 40;

std::string EncodeRecord(const FileVersion& v, uint64_t hash) {
  std::string out(kRecordSize, '\0');
  std::memcpy(out.data(), &v.size, 8);
  std::memcpy(out.data() + 8, &v.mtime_ns, 8);
  std::memcpy(out.data() + 16, &v.ctime_ns, 8);
  std::memcpy(out.data() + 24, &v.ino, 8);
  std::memcpy(out.data() + 32, &hash, 8);
  return out;
}

bool DecodeRecord(const rocksdb::Slice& s, FileVersion* v, uint64_t* hash) {
  if (s.size() != kRecordSize) return false;
  std::memcpy(&v->size, s.data(), 8);
  std::memcpy(&v->mtime_ns, s.data() + 8, 8);
  std::memcpy(&v->ctime_ns, s.data() + 16, 8);
  std::memcpy(&v->ino, s.data() + 24, 8);
  std::memcpy(hash, s.data() + 32, 8);
  return true;
}

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  if (s.IsNotFound()) return Status::Error(Code::kNotFound, what + ": " + s.ToString());
  if (s.IsCorruption()) return Status::Error(Code::kCorruption, what + ": " + s.ToString());
  if (s.IsNoSpace()) return Status::Error(Code::kNoSpace, what + ": " + s.ToString());
  return Status::Error(Code::kIoError, what + ": " + s.ToString());
}

rocksdb::Slice ToSlice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

}  // namespace

Result<std::unique_ptr<SsdTier>> SsdTier::Open(std::string name, const std::string& dir,
                                               uint64_t capacity) {
  std::unique_ptr<SsdTier> tier(new SsdTier(std::move(name), dir, capacity));
  Status s = tier->OpenDb();
  if (!s.ok()) return s;
  return tier;
}

Result<std::unique_ptr<SsdTier>> SsdTier::Prepare(std::string name, const std::string& dir,
                                                  uint64_t capacity) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Status::Error(Code::kIoError,
                         "cannot create cache directory '" + dir + "': " + ec.message());
  }
  const std::string lock_path = dir + "/LOCK";
  int fd = open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    const bool held = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    close(fd);
    if (held) {
      return Status::Error(Code::kUnavailable, "cache directory '" + dir +
                                                   "' is in use by another process (pid " +
                                                   std::to_string(fl.l_pid) + ")");
    }
  }
  return std::unique_ptr<SsdTier>(new SsdTier(std::move(name), dir, capacity));
}

Status SsdTier::OpenDb() {
  const std::string& dir = dir_;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Status::Error(Code::kIoError,
                         "cannot create cache directory '" + dir + "': " + ec.message());
  }
  rocksdb::DBOptions db_opts;
  db_opts.create_if_missing = true;
  db_opts.create_missing_column_families = true;
  db_opts.use_fsync = false;
  db_opts.max_background_jobs = 2;
  db_opts.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_opts.keep_log_file_num = 2;
  db_opts.max_total_wal_size = 64ull << 20;  // flush (and drop old WAL) past this
  rocksdb::ColumnFamilyOptions meta_opts;
  meta_opts.compression = rocksdb::kNoCompression;
  rocksdb::ColumnFamilyOptions data_opts;
  data_opts.compression = rocksdb::kNoCompression;  // dataset files are compressed already
  data_opts.enable_blob_files = true;               // values live in blob files ...
  data_opts.min_blob_size = 0;                      // ... all of them
  data_opts.blob_file_size = 256ull << 20;
  data_opts.blob_compression_type = rocksdb::kNoCompression;
  data_opts.enable_blob_garbage_collection = true;  // reclaim space of deleted objects
  data_opts.blob_garbage_collection_age_cutoff = 0.5;
  // Values sit in the memtable until a flush writes them to blob files: two 16 MiB memtables
  // bound the memory this tier adds beyond its capacity on disk.
  data_opts.write_buffer_size = 16ull << 20;
  data_opts.max_write_buffer_number = 2;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, meta_opts}, {"data", data_opts}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_opts, dir, cfs, &handles, &raw);
  if (!s.ok()) {
    if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
      return Status::Error(
          Code::kUnavailable,
          "cache directory '" + dir + "' is in use by another process: " + s.ToString());
    }
    return FromRocks(s, "cannot open the SSD cache in '" + dir + "'");
  }
  db_ = raw;
  meta_ = handles[0];
  data_ = handles[1];
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), meta_));
  std::vector<std::string> bad;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    Record r;
    if (!DecodeRecord(it->value(), &r.version, &r.hash)) {
      bad.push_back(it->key().ToString());
      continue;
    }
    used_ += r.version.size;
    index_.emplace(it->key().ToString(), r);
  }
  for (const auto& key : bad) EraseLocked(key);
  return Status::Ok();
}

SsdTier::~SsdTier() { Close(); }


void SsdTier::Close() {
  if (!db_) return;
  db_->DestroyColumnFamilyHandle(meta_);
  db_->DestroyColumnFamilyHandle(data_);
  (void)db_->Close();
  delete db_;
  db_ = nullptr;
  std::lock_guard lock(mu_);
  index_.clear();
  used_ = 0;
}

Status SsdTier::Reopen() {
  Close();
  return OpenDb();
}

void SsdTier::EraseLocked(std::string_view path) {
  auto it = index_.find(path);
  if (it != index_.end()) {
    used_ -= it->second.version.size;
    index_.erase(it);
  }
  rocksdb::WriteBatch batch;
  batch.Delete(meta_, ToSlice(path));
  batch.Delete(data_, ToSlice(path));
  (void)db_->Write(rocksdb::WriteOptions(), &batch);
}

Result<BlobPtr> SsdTier::Get(std::string_view path, const FileVersion& version) {
  Record rec;
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(path);
    if (it == index_.end()) return Status::Error(Code::kNotFound, "not in " + name_);
    if (it->second.version != version) {
      EraseLocked(path);  // the backing file changed: this copy can never be served again
      return Status::Error(Code::kNotFound, "stale in " + name_);
    }
    rec = it->second;
  }
  rocksdb::PinnableSlice value;
  rocksdb::ReadOptions ro;
  // The bytes are verified below against their xxh3; RocksDB's CRC32c of the blob (computed
  // without hardware help in Debian's build) would check them a second time at several times
  // the cost.
  ro.verify_checksums = false;
  ro.fill_cache = false;  // blob values are read once per use; keep the block cache for index
  rocksdb::Status s = db_->Get(ro, data_, ToSlice(path), &value);
  Status bad;
  if (!s.ok()) {
    bad = FromRocks(s, name_ + " read of '" + std::string(path) + "'");
  } else if (value.size() != rec.version.size) {
    bad = Status::Error(Code::kCorruption,
                        name_ + ": '" + std::string(path) + "' has the wrong size");
  }
  std::shared_ptr<Blob> blob;
  if (bad.ok()) {
    blob = Blob::Allocate(value.size(), rec.version);
    std::memcpy(blob->mutable_data(), value.data(), value.size());
    blob->Seal();
    if (blob->hash() != rec.hash) {
      bad = Status::Error(Code::kCorruption,
                          name_ + ": '" + std::string(path) + "' fails its checksum");
    }
  }
  if (!bad.ok()) {
    if (bad.code() == Code::kCorruption || bad.code() == Code::kNotFound) {
      corruptions_.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard lock(mu_);
      EraseLocked(path);
      return Status::Error(Code::kCorruption, bad.message());
    }
    return bad;
  }
  return BlobPtr(std::move(blob));
}

Status SsdTier::Put(std::string_view path, BlobPtr blob) {
  const uint64_t size = blob->size();
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(path);
    const uint64_t old = it == index_.end() ? 0 : it->second.version.size;
    if (used_ - old + size > capacity_)
      return Status::Error(Code::kNoSpace, name_ + " tier is full");
    used_ += size;  // reserved until the write lands
  }
  rocksdb::WriteBatch batch;
  batch.Put(data_, ToSlice(path), rocksdb::Slice(blob->data(), size));
  batch.Put(meta_, ToSlice(path), EncodeRecord(blob->version(), blob->hash()));
  rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &batch);
  std::lock_guard lock(mu_);
  used_ -= size;
  if (!s.ok()) return FromRocks(s, name_ + " write of '" + std::string(path) + "'");
  auto [it, inserted] = index_.try_emplace(std::string(path));
  if (!inserted) used_ -= it->second.version.size;
  it->second = Record{blob->version(), blob->hash()};
  used_ += size;
  return Status::Ok();
}

bool SsdTier::Contains(std::string_view path, const FileVersion& version) {
  std::lock_guard lock(mu_);
  auto it = index_.find(path);
  return it != index_.end() && it->second.version == version;
}

void SsdTier::Erase(std::string_view path) {
  std::lock_guard lock(mu_);
  EraseLocked(path);
}

void SsdTier::RetainOnly(const std::function<bool(std::string_view, const FileVersion&)>& keep) {
  std::lock_guard lock(mu_);
  rocksdb::WriteBatch batch;
  for (auto it = index_.begin(); it != index_.end();) {
    if (keep(it->first, it->second.version)) {
      ++it;
      continue;
    }
    batch.Delete(meta_, it->first);
    batch.Delete(data_, it->first);
    used_ -= it->second.version.size;
    it = index_.erase(it);
  }
  if (batch.Count() > 0) (void)db_->Write(rocksdb::WriteOptions(), &batch);
}

uint64_t SsdTier::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_;
}

size_t SsdTier::objects() const {
  std::lock_guard lock(mu_);
  return index_.size();
}

Status SsdTier::CorruptForTest(std::string_view path) {
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), data_, ToSlice(path), &value);
  if (!s.ok()) return FromRocks(s, "corrupt");
  std::string bytes = value.ToString();
  if (!bytes.empty()) bytes[bytes.size() / 2] ^= 0x5a;
  return FromRocks(db_->Put(rocksdb::WriteOptions(), data_, ToSlice(path), bytes), "corrupt");
}

}  // namespace clairfs
