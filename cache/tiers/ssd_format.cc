#include "cache/tiers/ssd_format.h"

#include <cstring>

#include "cache/tiers/rocks_env.h"

namespace clairfs::ssd_format {

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

rocksdb::DBOptions DbOptions(std::shared_ptr<rocksdb::Logger> logger) {
  rocksdb::DBOptions db_opts;
  db_opts.create_if_missing = true;
  db_opts.create_missing_column_families = true;
  db_opts.use_fsync = false;
  db_opts.max_background_jobs = 2;
  db_opts.env = PrivateFilesEnv();           // files 0600 (rocks_env.h)
  db_opts.info_log = std::move(logger);      // no LOG file in the cache directory (rocks_logger.h)
  db_opts.max_total_wal_size = 64ull << 20;  // flush (and drop old WAL) past this
  return db_opts;
}

std::vector<rocksdb::ColumnFamilyDescriptor> Families() {
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
  return {{rocksdb::kDefaultColumnFamilyName, meta_opts}, {"data", data_opts}};
}

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  if (s.IsNotFound()) return Status::Error(Code::kNotFound, what + ": " + s.ToString());
  if (s.IsCorruption()) return Status::Error(Code::kCorruption, what + ": " + s.ToString());
  if (s.IsNoSpace()) return Status::Error(Code::kNoSpace, what + ": " + s.ToString());
  return Status::Error(Code::kIoError, what + ": " + s.ToString());
}

}  // namespace clairfs::ssd_format
