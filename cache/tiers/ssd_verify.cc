#include "cache/tiers/ssd_verify.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "cache/base/object_key.h"
#include "cache/tiers/rocks_logger.h"
#include "cache/tiers/ssd_dir.h"
#include "cache/tiers/ssd_format.h"

namespace clairfs {
namespace {

using ssd_format::FromRocks;

// The open database and its two families; closed (handles first) when it goes out of scope.
struct Db {
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  ~Db() {
    if (!db) return;
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    (void)db->Close();
    delete db;
  }
};

Status NotACache(const std::string& dir, const std::string& why) {
  return Status::Error(Code::kNotFound, "'" + dir + "' is not an SSD cache directory: " + why);
}

// What is wrong with the object of key whose record is value, "" if nothing. Reads its bytes.
std::string Check(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* data, const rocksdb::Slice& key,
                  const rocksdb::Slice& value, uint64_t* bytes, Status* failure) {
  FileVersion version;
  uint64_t hash = 0;
  if (!ssd_format::DecodeRecord(value, &version, &hash)) {
    return "its record is damaged (" + std::to_string(value.size()) + " bytes)";
  }
  const std::string_view k(key.data(), key.size());
  if (!ParseObjectKey(k)) return "its key is malformed";
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;  // each value is read once
  ro.verify_checksums = true;
  rocksdb::PinnableSlice bytes_read;
  const rocksdb::Status s = db->Get(ro, data, key, &bytes_read);
  if (s.IsNotFound()) return "its bytes are missing";
  if (s.IsCorruption()) return "its bytes are damaged: " + s.ToString();
  if (!s.ok()) {
    *failure = FromRocks(s, "read of '" + DisplayKey(k) + "'");
    return "";
  }
  *bytes += bytes_read.size();
  if (bytes_read.size() != ObjectBytes(k, version)) {
    return "it holds " + std::to_string(bytes_read.size()) + " bytes, its record says " +
           std::to_string(ObjectBytes(k, version));
  }
  if (HashBytes(bytes_read.data(), bytes_read.size()) != hash) return "it fails its checksum";
  return "";
}

}  // namespace

Result<VerifyReport> VerifySsdCache(const std::string& dir_in, VerifyMode mode) {
  const std::string dir = NormalCacheDir(dir_in);
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return NotACache(dir, std::strerror(errno));
  if (S_ISLNK(st.st_mode)) return NotACache(dir, "it is a symbolic link");
  if (!S_ISDIR(st.st_mode)) return NotACache(dir, "it is not a directory");
  const std::string current = dir + "/CURRENT";
  if (lstat(current.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return NotACache(dir, "it holds no database (no CURRENT file)");
  }
  auto lock = CacheDirLock::Acquire(dir);
  if (!lock.ok()) return lock.status();

  rocksdb::DBOptions options =
      ssd_format::DbOptions(std::make_shared<RocksLogger>("verify (" + dir + ")"));
  options.create_if_missing = false;
  options.create_missing_column_families = false;
  Db db;
  const rocksdb::Status opened =
      mode == VerifyMode::kCheck
          ? rocksdb::DB::OpenForReadOnly(options, dir, ssd_format::Families(), &db.handles, &db.db)
          : rocksdb::DB::Open(options, dir, ssd_format::Families(), &db.handles, &db.db);
  if (!opened.ok()) return FromRocks(opened, "cannot open the SSD cache in '" + dir + "'");
  rocksdb::ColumnFamilyHandle* meta = db.handles[ssd_format::kMetaFamily];
  rocksdb::ColumnFamilyHandle* data = db.handles[ssd_format::kDataFamily];

  VerifyReport report;
  rocksdb::WriteBatch deletes;
  {
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(db.db->NewIterator(ro, meta));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ++report.objects;
      Status failure;
      std::string why = Check(db.db, data, it->key(), it->value(), &report.bytes, &failure);
      if (!failure.ok()) return failure;
      if (why.empty()) continue;
      const std::string_view key(it->key().data(), it->key().size());
      report.bad.push_back({DisplayKey(key), std::move(why)});
      deletes.Delete(meta, it->key());
      deletes.Delete(data, it->key());
    }
    if (!it->status().ok()) {
      return FromRocks(it->status(), "cannot walk the records of '" + dir + "'");
    }
  }
  if (mode == VerifyMode::kRepair && deletes.Count() > 0) {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    if (rocksdb::Status s = db.db->Write(wo, &deletes); !s.ok()) {
      return FromRocks(s, "cannot delete the bad objects in '" + dir + "'");
    }
    report.deleted = report.bad.size();
  }
  return report;
}

}  // namespace clairfs
