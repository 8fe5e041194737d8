// Helpers shared by the unit tests.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "cache/object.h"

namespace clairfs::testing {

// A sealed blob holding data, as if read from a backing file of that size and mtime.
inline BlobPtr MakeBlob(const std::string& data, int64_t mtime = 1) {
  auto b = Blob::Allocate(data.size(), {data.size(), mtime});
  std::copy(data.begin(), data.end(), b->mutable_data());
  b->Seal();
  return b;
}

// A fresh directory under /tmp, removed with everything in it when the object dies.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/clairfs-unit.XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace clairfs::testing
