// PrivateFilesEnv: the RocksDB environment of the SSD tier, whose files are created mode 0600
// whatever the umask (RocksDB 7.8 creates them 0644, and Env::SetAllowNonOwnerAccess(false)
// does not change that). The cache holds copies of files other users may not read; the
// directory is 0700 too (ssd_dir.h), this is the second wall.
#pragma once

namespace rocksdb {
class Env;
}

namespace clairfs {

// Process-wide, lives until exit. Thread-safe.
rocksdb::Env* PrivateFilesEnv();

}  // namespace clairfs
