// The SSD tier's on-disk format, shared by the daemon's SsdTier (ssd_tier.cc) and the offline
// checker (ssd_verify.cc) so that neither repeats it: the column families and their options,
// and the per-object record. Private to cache/: nothing outside those two files includes it.
//
// Families: the default one holds a record per object (the key is the object key,
// cache/base/object_key.h); "data" holds the object's bytes under the same key, in blob files.
// A record is 40 bytes: size, mtime, ctime, inode number (the FileVersion), then the xxh3 of
// the bytes, each 8 bytes in host order. A record of another size (an older format, without
// ctime and inode) cannot be validated: the tier erases such records at open, the checker
// reports them as damaged.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/status.h>

#include <memory>
#include <string>
#include <vector>

#include "cache/base/object.h"
#include "cache/base/status.h"

namespace rocksdb {
class Logger;
}

namespace clairfs::ssd_format {

constexpr size_t kRecordSize = 40;
constexpr size_t kMetaFamily = 0;  // index in Families() and in the handles Open returns
constexpr size_t kDataFamily = 1;

std::string EncodeRecord(const FileVersion& v, uint64_t hash);
// False (outputs untouched) when s is not a record of this format.
bool DecodeRecord(const rocksdb::Slice& s, FileVersion* v, uint64_t* hash);

// The database options the tier opens with: files 0600, info log to logger, no fsync.
rocksdb::DBOptions DbOptions(std::shared_ptr<rocksdb::Logger> logger);
// Both families with their options, in the order kMetaFamily, kDataFamily.
std::vector<rocksdb::ColumnFamilyDescriptor> Families();

// A RocksDB status as a Status (kNotFound, kCorruption, kNoSpace, else kIoError), prefixed by
// what.
Status FromRocks(const rocksdb::Status& s, const std::string& what);

}  // namespace clairfs::ssd_format
