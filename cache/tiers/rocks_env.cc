#include "cache/tiers/rocks_env.h"

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <sys/stat.h>

namespace clairfs {
namespace {

// Narrows every file RocksDB creates to 0600 right after creating it. The file sits in a
// 0700 directory meanwhile, so nobody else can open it in between.
class PrivateFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  using FileSystemWrapper::FileSystemWrapper;
  const char* Name() const override { return "ClairfsPrivateFileSystem"; }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    return Private(f, target()->NewWritableFile(f, o, r, dbg));
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override {
    return Private(f, target()->ReopenWritableFile(f, o, r, dbg));
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override {
    return Private(f, target()->ReuseWritableFile(f, old, o, r, dbg));
  }
  rocksdb::IOStatus NewRandomRWFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    return Private(f, target()->NewRandomRWFile(f, o, r, dbg));
  }
  rocksdb::IOStatus LockFile(const std::string& f, const rocksdb::IOOptions& o,
                             rocksdb::FileLock** l, rocksdb::IODebugContext* dbg) override {
    return Private(f, target()->LockFile(f, o, l, dbg));
  }
  rocksdb::IOStatus NewLogger(const std::string& f, const rocksdb::IOOptions& o,
                              std::shared_ptr<rocksdb::Logger>* r,
                              rocksdb::IODebugContext* dbg) override {
    return Private(f, target()->NewLogger(f, o, r, dbg));
  }

 private:
  static rocksdb::IOStatus Private(const std::string& f, rocksdb::IOStatus s) {
    if (s.ok() && chmod(f.c_str(), 0600) != 0) {
      return rocksdb::IOStatus::IOError("cannot make '" + f + "' private (chmod 0600)");
    }
    return s;
  }
};

}  // namespace

rocksdb::Env* PrivateFilesEnv() {
  static const std::unique_ptr<rocksdb::Env> env =
      rocksdb::NewCompositeEnv(std::make_shared<PrivateFileSystem>(rocksdb::FileSystem::Default()));
  return env.get();
}

}  // namespace clairfs
